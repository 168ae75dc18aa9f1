"""``sack8s render``: run the function in-process on an XR or claim and print what it composes."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from function.cli.exits import EPILOG, InputPath


def _one(path: str, what: str) -> dict:
    from function.render import RenderError, load_docs

    docs = load_docs([path])
    if len(docs) != 1:
        raise RenderError(path, f"must hold exactly one {what}, found {len(docs)} documents")
    return docs[0]


@click.command("render", epilog=EPILOG)
@click.argument("xr_file", metavar="XR_OR_CLAIM.yaml", type=InputPath(exists=True, dir_okay=False))
@click.option(
    "--composition",
    type=InputPath(exists=True, dir_okay=False),
    help="Composition whose pipeline step holds the function input.",
)
@click.option(
    "--input",
    "input_file",
    type=InputPath(exists=True, dir_okay=False),
    help="The function input (Policy) itself.",
)
@click.option(
    "--component",
    help="Local CTF or component directory to read the claim's component from (an offline mirror).",
)
@click.option(
    "--observed",
    multiple=True,
    type=InputPath(exists=True),
    help="Observed composed resources (file or directory).",
)
@click.option(
    "--required-resources",
    multiple=True,
    type=InputPath(exists=True),
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
    help="Print Warning/Normal results to stderr.",
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
    composition,
    input_file,
    component,
    observed,
    required_resources,
    function_credentials,
    include_results,
    graph,
    skip_digest_check,
    verbose,
) -> None:
    """Print the desired composed resources as a YAML stream (exit 1 with the Fatal message on
    stderr).
    """
    import asyncio

    from crossplane.function import logging as sdklogging
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    from function.api.policy import MirrorPolicy
    from function.errors import SackError
    from function.fn import FunctionRunner
    from function.graph import mermaid
    from function.render import (
        RenderError,
        claim_to_xr,
        load_docs,
        our_step,
        render,
        step_credentials,
    )
    from function.sources import SourceFactory

    sdklogging.configure(sdklogging.Level.DEBUG if verbose else sdklogging.Level.DISABLED)
    try:
        if composition and input_file:
            raise RenderError("--input", "give either --composition or --input, not both")
        xr = claim_to_xr(_one(xr_file, "XR or claim"))
        fn_input = None
        secrets = load_docs([function_credentials]) if function_credentials else []
        if composition:
            step = our_step(_one(composition, "Composition"), composition)
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
        rendered = asyncio.run(
            render(
                xr,
                fn_input,
                observed=load_docs(observed),
                required=load_docs(required_resources),
                credentials=secrets,
                runner=FunctionRunner(sources=SourceFactory(verify_digests=not skip_digest_check)),
            )
        )
    except SackError as e:
        click.echo(f"sack8s render: {e}", err=True)
        sys.exit(1)
    if rendered.fatal is not None:
        click.echo(f"sack8s render: {rendered.fatal.message}", err=True)
        sys.exit(1)
    if include_results:
        for r in rendered.results:
            click.echo(
                f"{fnv1.Severity.Name(r.severity).removeprefix('SEVERITY_').title()} {r.reason}: "
                f"{r.message}",
                err=True,
            )
    if graph:
        click.echo(mermaid(rendered.xr, rendered.resources), nl=False)
        return
    click.echo(rendered.yaml(), nl=False)
