"""``sack8s render``: run the function in-process on an XR or claim and print what it composes.

It takes ``crossplane render``'s arguments too (``XR COMPOSITION FUNCTIONS``, ``-o``, ``-e``,
``-r``, ``-x``), and prints composed objects with the metadata ``crossplane render`` adds
(``function.edge.render.composed_metadata``), so the two outputs can be diffed. The FUNCTIONS file
is read only to be checked: the function runs in this process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from function.cli.exits import EPILOG, InputPath, file_option, objects_option


def _one(path: str, what: str) -> dict:
    from function.edge.render import RenderError, load_docs

    docs = load_docs([path])
    if len(docs) != 1:
        raise RenderError(path, f"must hold exactly one {what}, found {len(docs)} documents")
    return docs[0]


def _stderr_logs() -> None:
    """The SDK's console logger prints to stdout; the YAML stream owns stdout here. Colours
    only on a terminal (a CI log or a file gets plain text).
    """
    import structlog

    processors = [
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if isinstance(p, structlog.dev.ConsoleRenderer)
        else p
        for p in structlog.get_config()["processors"]
    ]
    structlog.configure(
        processors=processors, logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )


@click.command("render", epilog=EPILOG)
@click.argument("xr_file", metavar="XR_OR_CLAIM.yaml", type=InputPath(exists=True, dir_okay=False))
@click.argument(
    "composition_arg",
    metavar="[COMPOSITION.yaml]",
    required=False,
    type=InputPath(exists=True, dir_okay=False),
)
@click.argument("functions_arg", metavar="[FUNCTIONS]", required=False, type=InputPath(exists=True))
@file_option(
    "--composition",
    help="Composition whose pipeline step holds the function input (or give it second, as "
    "crossplane render takes it).",
)
@file_option("--input", "input_file", help="The function input (Policy) itself.")
@click.option(
    "--component",
    help="Local CTF or component directory to read the claim's component from (an offline mirror).",
)
@objects_option(
    "--observed",
    "--observed-resources",
    "-o",
    "observed",
    help="Observed composed resources (file or directory).",
)
@objects_option(
    "--required-resources",
    "--extra-resources",
    "-e",
    "required_resources",
    help="Objects the function may require (file or directory).",
)
@click.option(
    "--function-credentials",
    type=InputPath(exists=True),
    help="Secrets passed as the step's credentials.",
)
@click.option(
    "--include-results/--no-include-results",
    default=True,
    show_default=True,
    help="Print Warning/Normal results to stderr as text.",
)
@click.option(
    "-r",
    "--include-function-results",
    "result_docs",
    is_flag=True,
    help="Print Warning/Normal results on stdout as `kind: Result` documents, as crossplane "
    "render does (instead of text on stderr).",
)
@click.option(
    "-x",
    "--include-full-xr",
    "full_xr",
    is_flag=True,
    help="Print the input XR's metadata and spec with its status, as crossplane render -x does.",
)
@click.option(
    "--settle",
    is_flag=True,
    help="Follow the reconciles as a cluster would (every composed object observed and Ready, "
    "the OCM Component at the resolved version) and print the settled desired state; each "
    "reconcile's stage goes to stderr.",
)
@click.option(
    "--graph",
    is_flag=True,
    help="Print a Mermaid diagram of the composed objects instead of the YAML stream.",
)
@click.option(
    "--skip-digest-check",
    is_flag=True,
    help="Use the component's blobs without checking them against the resource digests (a "
    "Warning per resource; for tests only, never what the function does in a cluster).",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug logs on stderr.")
def render_cmd(
    xr_file,
    composition_arg,
    functions_arg,
    composition,
    input_file,
    component,
    observed,
    required_resources,
    function_credentials,
    include_results,
    result_docs,
    full_xr,
    settle,
    graph,
    skip_digest_check,
    verbose,
) -> None:
    """Print the desired composed resources as a YAML stream (exit 1 with the Fatal message on
    stderr). XR_OR_CLAIM.yaml [COMPOSITION.yaml [FUNCTIONS]] is crossplane render's form.
    """
    import asyncio

    from crossplane.function import logging as sdklogging
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    from function.api.policy import MirrorPolicy
    from function.cli.graph import mermaid
    from function.edge import settle as settling
    from function.edge.fn import FunctionRunner
    from function.edge.render import (
        RenderError,
        claim_to_xr,
        composed_metadata,
        crossplane_xr,
        dump_yaml,
        load_docs,
        our_step,
        render,
        result_documents,
        step_credentials,
    )
    from function.edge.sources import SourceFactory
    from function.errors import SackError

    if composition_arg and composition:
        raise click.UsageError("give the Composition either as an argument or as --composition")
    composition = composition or composition_arg
    sdklogging.configure(sdklogging.Level.DEBUG if verbose else sdklogging.Level.DISABLED)
    if verbose:
        _stderr_logs()
    step_name = "compose"
    try:
        if composition and input_file:
            raise RenderError("--input", "give either --composition or --input, not both")
        if functions_arg:
            load_docs([functions_arg])  # crossplane render's Functions: checked, not run
        xr = claim_to_xr(_one(xr_file, "XR or claim"))
        fn_input = None
        secrets = load_docs([function_credentials]) if function_credentials else []
        if composition:
            step = our_step(_one(composition, "Composition"), composition)
            step_name = str(step.get("step") or step_name)
            fn_input = dict(step["input"])
            if step.get("credentials"):
                secrets = step_credentials(step, secrets)
        elif input_file:
            fn_input = _one(input_file, "function input")
        if component:
            repo = ((xr.get("spec") or {}).get("component") or {}).get("repository")
            if not repo:
                raise RenderError(
                    "--component", "the XR names no spec.component.repository to mirror"
                )
            fn_input = dict(fn_input or {})
            mirrors = list(fn_input.get("mirrors") or [])
            mirrors.insert(
                0, MirrorPolicy(repository=repo, path=str(Path(component).resolve())).model_dump()
            )
            fn_input["mirrors"] = mirrors
        kw = {
            "observed": load_docs(observed),
            "required": load_docs(required_resources),
            "credentials": secrets,
            "runner": FunctionRunner(sources=SourceFactory(verify_digests=not skip_digest_check)),
        }
        if settle:
            settled = asyncio.run(settling.converge(xr, fn_input, **kw))
            for stage in settled.stages:
                for line in stage.lines():
                    click.echo(f"sack8s render --settle: {line}", err=True)
            rendered = settled.last
            if settled.settled:
                click.echo(
                    f"sack8s render --settle: settled after {len(settled.renders)} reconciles: "
                    f"{len(rendered.resources)} composed objects",
                    err=True,
                )
        else:
            rendered = asyncio.run(render(xr, fn_input, **kw))
    except SackError as e:
        click.echo(f"sack8s render: {e}", err=True)
        sys.exit(1)
    if rendered.fatal is not None:
        click.echo(f"sack8s render: {rendered.fatal.message}", err=True)
        sys.exit(1)
    if settle and not settled.settled:
        click.echo(
            f"sack8s render --settle: still composing new objects after "
            f"{len(settled.renders)} "
            "reconciles; the last reconcile's stage is above",
            err=True,
        )
        sys.exit(1)
    if include_results and not result_docs:
        for r in rendered.results:
            click.echo(
                f"{fnv1.Severity.Name(r.severity).removeprefix('SEVERITY_').title()} {r.reason}: "
                f"{r.message}",
                err=True,
            )
    waiting = [
        r
        for r in rendered.results
        if r.severity == fnv1.SEVERITY_NORMAL and r.reason.startswith("Waiting")
    ]
    if waiting and not settle:
        click.echo(
            "sack8s render: this is the first reconcile's desired state only; more is composed "
            "once these objects exist (see the Waiting results). `--settle` follows the "
            "reconciles and prints the settled state, or pass the objects as they exist with "
            "--observed.",
            err=True,
        )
    resources = composed_metadata(xr, rendered.resources)
    if graph:
        click.echo(mermaid(rendered.xr, resources), nl=False)
        return
    out_xr = crossplane_xr(rendered)
    if full_xr:
        out_xr = {**out_xr, "metadata": xr.get("metadata") or {}, "spec": xr.get("spec") or {}}
    docs = [out_xr, *resources]
    if result_docs:
        docs += result_documents(rendered.results, step_name)
    click.echo(dump_yaml(docs), nl=False)
