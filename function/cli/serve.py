"""``sack8s serve``: the gRPC function server, with the SDK's standard flags.

``sack8s serve --help`` imports nothing but click: the SDK's ``standard_options`` module
imports gRPC and the SDK's runtime (about half a second), so the same flags are declared
here (tests/test_cli_startup.py checks they match the SDK's), and the server, the SDK and the
caches are imported when the command runs.
"""

from __future__ import annotations

import functools
import logging as stdlogging
from collections.abc import Callable
from typing import Any, TypeVar

import click

from function.cli.exits import EPILOG

F = TypeVar("F", bound=Callable[..., Any])

#: The SDK's defaults (crossplane.function.cli DEFAULT_ADDRESS, DEFAULT_MAX_RECV_MESSAGE_SIZE).
DEFAULT_ADDRESS = "0.0.0.0:9443"
DEFAULT_MAX_RECV_MESSAGE_SIZE = 4  # MB
#: The memo and answer budgets' defaults (function.cache DEFAULT_MEMO_BYTES and
#: DEFAULT_RESPONSE_BYTES; tests/test_cli_startup.py checks they agree).
DEFAULT_MEMO_BYTES = 224 * 1024 * 1024
DEFAULT_RESPONSE_BYTES = 256 * 1024 * 1024
ENV_METRICS_ADDRESS = "SACK8S_METRICS_ADDRESS"


def standard_options(func: F) -> F:
    """The SDK's standard composition-function flags (crossplane.function.cli), same names,
    environment variables and defaults.
    """

    @click.option(
        "--max-send-message-size",
        type=int,
        default=None,
        envvar="MAX_SEND_MESSAGE_SIZE",
        help="Maximum size of sent gRPC messages in MB. Defaults to --max-recv-message-size.",
    )
    @click.option(
        "--max-recv-message-size",
        "--max-grpc-message-size",
        type=int,
        default=DEFAULT_MAX_RECV_MESSAGE_SIZE,
        show_default=True,
        envvar=["MAX_RECV_MESSAGE_SIZE", "MAX_GRPC_MESSAGE_SIZE"],
        help="Maximum size of received gRPC messages in MB.",
    )
    @click.option(
        "--insecure",
        is_flag=True,
        envvar="INSECURE",
        help="Run without mTLS credentials. "
        "If you supply this flag --tls-server-certs-dir will be ignored.",
    )
    @click.option(
        "--tls-server-certs-dir",
        "--tls-certs-dir",
        "tls_certs_dir",
        envvar="TLS_SERVER_CERTS_DIR",
        help="Serve using mTLS certificates.",
    )
    @click.option(
        "--address",
        default=DEFAULT_ADDRESS,
        show_default=True,
        envvar="ADDRESS",
        help="Address at which to listen for gRPC connections.",
    )
    @click.option("--debug", "-d", is_flag=True, envvar="DEBUG", help="Emit debug logs.")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _memory_cap(flag: str, default: int, envvar: str, of: str) -> Callable[[Any], Any]:
    """A byte budget of one of the three caches (function/cache.py), settable from the
    environment as a Deployment sets it.
    """
    return click.option(
        flag,
        type=int,
        default=default,
        show_default=True,
        envvar=envvar,
        help=f"Memory cap of {of}",
    )


@click.command("serve", epilog=EPILOG)
@standard_options
@click.option(
    "--tag-ttl",
    type=float,
    default=300.0,
    show_default=True,
    envvar="SACK8S_TAG_TTL",
    help="Seconds a registry tag list (and tag→digest) stays cached; a version range is "
    "re-resolved after it. Also the longest meta.ttl of an answer (Crossplane's "
    "--enable-function-response-cache may reuse it that long).",
)
@_memory_cap(
    "--cache-bytes",
    256 * 1024 * 1024,
    "SACK8S_CACHE_BYTES",
    "the digest-keyed cache (descriptors, manifests, blobs).",
)
@_memory_cap(
    "--memo-bytes",
    DEFAULT_MEMO_BYTES,
    "SACK8S_MEMO_BYTES",
    "the content-keyed memos (parsed ConfigData and files, Flux mutations).",
)
@_memory_cap(
    "--response-bytes",
    DEFAULT_RESPONSE_BYTES,
    "SACK8S_RESPONSE_BYTES",
    "the answers kept for identical requests (0 turns reuse off).",
)
@click.option(
    "--metrics-address",
    default=None,
    envvar=ENV_METRICS_ADDRESS,
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
    from crossplane.function import logging as sdklogging
    from crossplane.function import runtime

    from function import budgets
    from function.cache import Cache, Memos, Responses
    from function.edge import metrics, server
    from function.edge.fn import FunctionRunner
    from function.edge.sources import SourceFactory

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
    # our server (function/edge/server.py), which answers identical requests from `responses`.
    # RunFunction adds structlog's merge_contextvars to that logging configuration on its
    # first call, so every line of a request carries the XR and claim (function/edge/fn.py).
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
