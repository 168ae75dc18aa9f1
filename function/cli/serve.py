"""``sack8s serve``: the gRPC function server, with the SDK's standard flags."""

from __future__ import annotations

import logging as stdlogging

import click
from crossplane.function import cli as sdkcli
from crossplane.function import logging as sdklogging
from crossplane.function import runtime

from function import budgets, metrics, server
from function.cache import DEFAULT_MEMO_BYTES, DEFAULT_RESPONSE_BYTES, Cache, Memos, Responses
from function.cli.exits import EPILOG
from function.fn import FunctionRunner
from function.sources import SourceFactory


@click.command("serve", epilog=EPILOG)
@sdkcli.standard_options
@click.option(
    "--tag-ttl",
    type=float,
    default=60.0,
    show_default=True,
    envvar="SACK8S_TAG_TTL",
    help="Seconds a registry tag list (and tag→digest) stays cached; a version range is "
    "re-resolved after it.",
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
    "--memo-bytes",
    type=int,
    default=DEFAULT_MEMO_BYTES,
    show_default=True,
    envvar="SACK8S_MEMO_BYTES",
    help="Memory cap of the content-keyed memos (parsed ConfigData and files, Flux mutations).",
)
@click.option(
    "--response-bytes",
    type=int,
    default=DEFAULT_RESPONSE_BYTES,
    show_default=True,
    envvar="SACK8S_RESPONSE_BYTES",
    help="Memory cap of the answers kept for identical requests (0 turns reuse off).",
)
@click.option(
    "--metrics-address",
    default=None,
    envvar=metrics.ENV_ADDRESS,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9090). Off by "
    "default.",
)
@click.option(
    "--budget",
    "budget",
    multiple=True,
    metavar="NAME=VALUE",
    help="A cost budget for work on component content (repeatable): yaml-nodes, "
    "schema-steps, expression-nodes, suggestion-keys, suggestion-candidates, render-cpu-ms "
    "(docs/security.md).",
)
def serve(
    tag_ttl: float,
    cache_bytes: int,
    memo_bytes: int,
    response_bytes: int,
    metrics_address: str | None,
    budget: tuple[str, ...] = (),
    *,
    debug: bool,
    address: str,
    tls_certs_dir: str | None,
    insecure: bool,
    max_recv_message_size: int,
    max_send_message_size: int | None,
) -> None:
    """Serve RunFunction over gRPC (--insecure, --tls-certs-dir, --address, --debug)."""
    if metrics_address:
        try:
            metrics.parse_address(metrics_address)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--metrics-address") from None
    settings: dict[str, int] = {}
    for item in budget:
        name, _, value = item.partition("=")
        try:
            settings[name.strip()] = int(value)
        except ValueError:
            raise click.BadParameter(
                f"{item!r} is not NAME=INTEGER", param_hint="--budget"
            ) from None
    try:
        budgets.configure(settings)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--budget") from None
    cache = Cache(ttl=tag_ttl, max_bytes=cache_bytes)
    runner = FunctionRunner(sources=SourceFactory(cache=cache), memos=Memos(memo_bytes))
    responses = Responses(response_bytes)
    metrics.watch_responses(responses)
    if debug:
        stdlogging.getLogger("function").setLevel(stdlogging.DEBUG)
    if metrics_address:
        metrics.start_server(metrics_address)
    # As the SDK's run(): its logging, its message-size options, its mTLS credentials. Then
    # our server (function/server.py), which answers identical requests from `responses`.
    # RunFunction adds structlog's merge_contextvars to that logging configuration on its
    # first call, so every line of a request carries the XR and claim (function/fn.py).
    # The SDK logs nothing of its own: one line on start and one once SIGTERM has drained the
    # in-flight requests, so a pod's log shows a clean stop (tests/test_image.py).
    sdklogging.configure(level=sdklogging.Level.DEBUG if debug else sdklogging.Level.INFO)
    send = max_send_message_size or max_recv_message_size
    options = [
        ("grpc.max_receive_message_length", max_recv_message_size * 1024 * 1024),
        ("grpc.max_send_message_length", send * 1024 * 1024),
    ]
    creds = runtime.load_credentials(tls_certs_dir) if tls_certs_dir else None
    log = sdklogging.get_logger()
    log.info("serving", address=address, tls=bool(tls_certs_dir) and not insecure)
    server.serve(runner, responses, address, creds=creds, insecure=insecure, options=options)
    log.info("stopped", address=address)
