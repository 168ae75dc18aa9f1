"""``sack8s serve``: the gRPC function server, with the SDK's standard flags."""

from __future__ import annotations

import click
from crossplane.function import cli as sdkcli

from function.fn import FunctionRunner
from function.ocm.cache import Cache
from function.sources import SourceFactory


@click.command("serve")
@sdkcli.standard_options
@click.option(
    "--tag-ttl",
    type=float,
    default=60.0,
    show_default=True,
    envvar="SACK8S_TAG_TTL",
    help="Seconds a registry tag list (and tag→digest) stays cached; a version range is re-resolved after it.",
)
@click.option(
    "--cache-bytes",
    type=int,
    default=256 * 1024 * 1024,
    show_default=True,
    envvar="SACK8S_CACHE_BYTES",
    help="Memory cap of the digest-keyed cache (descriptors, manifests, blobs).",
)
def serve(tag_ttl: float, cache_bytes: int, **kwargs: object) -> None:
    """Serve RunFunction over gRPC (--insecure, --tls-certs-dir, --address, --debug)."""
    cache = Cache(ttl=tag_ttl, max_bytes=cache_bytes)
    sdkcli.run(FunctionRunner(sources=SourceFactory(cache=cache)), **kwargs)  # type: ignore[arg-type]


COMMANDS = [serve]
