"""``sack8s serve``: the gRPC function server, with the SDK's standard flags."""

from __future__ import annotations

import logging as stdlogging

import click
from crossplane.function import cli as sdkcli
from crossplane.function import logging as sdklogging

from function import metrics
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
@click.option(
    "--metrics-address",
    default=None,
    envvar=metrics.ENV_ADDRESS,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9090). Off by default.",
)
def serve(tag_ttl: float, cache_bytes: int, metrics_address: str | None, **kwargs: object) -> None:
    """Serve RunFunction over gRPC (--insecure, --tls-certs-dir, --address, --debug)."""
    if metrics_address:
        try:
            metrics.parse_address(metrics_address)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--metrics-address") from None
    cache = Cache(ttl=tag_ttl, max_bytes=cache_bytes)
    runner = FunctionRunner(sources=SourceFactory(cache=cache))
    if kwargs.get("debug"):
        stdlogging.getLogger("function").setLevel(stdlogging.DEBUG)
    if metrics_address:
        metrics.start_server(metrics_address)
    # RunFunction adds structlog's merge_contextvars to the SDK's logging configuration on
    # its first call, so every line of a request carries the XR and claim (function/fn.py).
    # The SDK logs nothing of its own: one line on start and one once SIGTERM has drained the
    # in-flight requests, so a pod's log shows a clean stop (tests/test_image.py).
    sdklogging.configure(sdklogging.Level.DEBUG if kwargs.get("debug") else sdklogging.Level.INFO)
    log = sdklogging.get_logger()
    log.info("serving", address=kwargs.get("address"), tls=bool(kwargs.get("tls_certs_dir")))
    sdkcli.run(runner, **kwargs)  # type: ignore[arg-type]
    log.info("stopped", address=kwargs.get("address"))


COMMANDS = [serve]
