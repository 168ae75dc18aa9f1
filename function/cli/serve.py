"""``sack8s serve``: the gRPC function server, with the SDK's standard flags."""

from __future__ import annotations

import click
from crossplane.function import cli as sdkcli

from function.fn import FunctionRunner


@click.command("serve")
@sdkcli.standard_options
def serve(**kwargs: object) -> None:
    """Serve RunFunction over gRPC (--insecure, --tls-certs-dir, --address, --debug)."""
    sdkcli.run(FunctionRunner(), **kwargs)  # type: ignore[arg-type]


COMMANDS = [serve]
