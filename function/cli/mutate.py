"""``sack8s localize`` / ``configure`` / ``mutate``: the ConfigData engine on one file.

Service teams run these locally or in CI to see exactly what the function will do to their
manifests: stdout is only the mutated file (comments, order and quoting kept), so it can be
diffed or piped; stderr carries logs (``-v``: every substitution, old → new, and every rule
that does not apply to FILE). Exit 0 on success, 1 with one line naming rule, field and
file on bad input, 2 on a usage error (:mod:`function.cli.exits`). This is the only module
of the ConfigData tooling that touches files, stdin or the network.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from function.cli.common import (
    MAX_BYTES,
    NO_TRANSFER,
    Failure,
    TransferFlags,
    cli_image_table,
    fail,
    load_component,
    load_values,
    log,
    moved,
    read_input,
    rule_file,
    transfer_for,
    transfer_notes,
    transfer_options,
)
from function.cli.exits import EPILOG, severity_option
from function.errors import SackError

# The engine, ruamel, pydantic and the component sources are imported inside the functions
# that use them, so ``sack8s --help`` and ``sack8s localize`` load only what they need
# (function/cli/__init__.py; the per-file PLC0415 ignore in pyproject.toml).

IMAGE_PAIRS_DOWNGRADE = (
    "Pass --image-pairs warning to report it as a warning while the ConfigData is fixed"
)


def _run(
    *,
    config_data: str,
    file: str,
    root: str,
    as_path: str | None,
    verbose: int,
    component: str | None = None,
    plain_http: bool = False,
    registry: str | None = None,
    transfer_flags: TransferFlags = NO_TRANSFER,
    values_file: str | None = None,
    key: str | None = None,
    schema_violations: str = "Fatal",
    allow_unpinned: bool = False,
    image_pairs: str = "fatal",
    skip_digest_check: bool = False,
) -> None:
    from function.configdata.engine import apply_to_file, plan
    from function.configdata.localize import enforce_image_pairs, image_pair_defects
    from function.configdata.model import parse_configdata
    from function.configdata.substitution import describe
    from function.configdata.suggestions import suggestions
    from function.configdata.yamlfile import load_file

    localize = component is not None
    configure = values_file is not None
    try:
        root_path = Path(root)
        name, full = rule_file(file, root_path, as_path)
        cd_path = Path(config_data)
        cd = parse_configdata(read_input(cd_path, "--config-data"), f"ConfigData {cd_path.name}")
        values = (
            load_values(
                read_input(Path(values_file), "--values"),
                values_file,
                key,
                cd.configuration.schema_ if cd.configuration else None,
            )
            if values_file
            else None
        )
        if full is None:
            text = sys.stdin.buffer.read(MAX_BYTES + 1)
            if len(text) > MAX_BYTES:
                raise Failure(f"stdin: larger than the {MAX_BYTES} byte limit")
        else:
            text = read_input(full, "FILE")
        transfer = transfer_for(transfer_flags, registry=registry, plain_http=plain_http)
        digest_warnings: list[str] = []
        cv = (
            load_component(
                component,
                plain_http=plain_http,
                registry=registry,
                verify=not skip_digest_check,
                warn=digest_warnings.append,
            )
            if localize
            else None
        )
        cv, problems = moved(cv, transfer)
        if localize and skip_digest_check:
            digest_warnings.append("resource digests not checked (--skip-digest-check, tests only)")
        p = plan(
            cd,
            component=cv,
            only_file=name,
            values=values,
            localize=localize,
            configure=configure,
            schema_violations="Warning" if schema_violations.lower() == "warning" else "Fatal",
            images=(
                cli_image_table(cv, allow_unpinned=allow_unpinned, problems=problems)
                if cv is not None
                else {}  # configure without --component: no images to localize
            ),
        )
        try:
            result = apply_to_file(text, name, p.substitutions)
        except SackError as e:
            if not as_path:
                raise
            read = "stdin" if full is None else str(full)
            raise type(e)(e.where, f"{e.message} (FILE {read}, read as --as {name})") from None
        pair_warnings = enforce_image_pairs(
            image_pair_defects(c.sub for c in result.changes),
            fatal=image_pairs.lower() == "fatal",
            downgrade=IMAGE_PAIRS_DOWNGRADE,
        )
        hints = (
            suggestions(load_file(result.text, name).docs, result.changes) if result.changes else ()
        )
        unused: tuple[str, ...] = ()
        hint = ""
        if configure:
            from function.configdata.unused import unused_hint, unused_values  # jsonschema

            unused = unused_values(cd, values)
            hint = unused_hint(cd, unused)
    except Failure as e:
        fail(str(e))
    except SackError as e:
        fail(str(e))
    if verbose:
        for i, rule in enumerate(cd.localization if localize else []):
            if rule.file != name:
                log(
                    f"not applicable: ConfigData localization[{i}] addresses file {rule.file}, "
                    f"not {name}"
                )
        for sub in result.not_applicable:
            log(f"not applicable: ConfigData {sub.rule} addresses file {sub.file}, not {name}")
        for change in result.changes:
            log(describe(change))
    for note in transfer_notes(transfer, registry, cv):
        log(f"warning: {note}")
    for message in digest_warnings:
        log(f"warning: {message}")
    for finding in p.findings + result.findings:
        log(f"warning: {finding.message}")
    for change in result.changes:
        if change.sub.warning:
            log(f"warning: {change.sub.warning}")
    for w in pair_warnings:
        log(f"warning: {w}")
    for hint in hints:
        log(f"warning: {hint.message}")
    if unused:
        log(
            f"warning: {len(unused)} value(s) reach no configuration rule of the ConfigData "
            f"(for any file), so they are never applied: {', '.join(unused)}"
            + (f" ({hint})" if hint else "")
        )
    if not result.changes:
        log(
            "warning: no "
            f"{'/'.join(k for k, on in (('localization', localize), ('configuration', configure)) if on)} "  # noqa: E501
            f"rule of the ConfigData addresses {name}; printed unchanged"
        )
    sys.stdout.write(result.text)
    sys.stdout.flush()


_config = [
    click.option(
        "--config-data",
        "config_data",
        required=True,
        metavar="CD.yaml",
        help="The ConfigData file.",
    ),
]
_common = [
    click.option(
        "--root",
        default=".",
        show_default=True,
        metavar="DIR",
        help="Directory the rules' file paths are relative to.",
    ),
    click.option(
        "--as",
        "as_path",
        metavar="PATH",
        help="The file name the rules address (required with FILE '-').",
    ),
    click.option(
        "-v",
        "--verbose",
        count=True,
        help="Log every substitution and every rule that does not apply.",
    ),
]
_file = [click.argument("file", metavar="FILE")]
_component = [
    click.option(
        "--component",
        "component",
        required=True,
        metavar="SOURCE",
        help="Component version: descriptor file, directory, CTF, or [TYPE::]REPO//NAME:VERSION.",
    ),
    click.option(
        "--plain-http", is_flag=True, help="Talk plain HTTP to a registry given without a scheme."
    ),
    click.option(
        "--registry",
        metavar="HOST[/BASE]",
        help="Registry a local CTF/directory stands for (where the cluster pulls localBlob "
        "images; other images stay put: for a transfer, see --transfer-to).",
    ),
    transfer_options,
    click.option(
        "--allow-unpinned",
        is_flag=True,
        help="Accept an image with neither digest nor resource digest (a warning; never in "
        "production).",
    ),
    severity_option(
        "--image-pairs",
        choices=("fatal", "warning"),
        help="A rule writing an invalid or unlocalized reference into a repository:tag pair: "
        "an error, or a warning (the policy's configData.imagePairs).",
    ),
    click.option(
        "--skip-digest-check",
        is_flag=True,
        help="Use the component without checking its ConfigData and deployable blobs against "
        "their resource digests (for tests only).",
    ),
]
_values = [
    click.option(
        "--values",
        "values_file",
        required=True,
        metavar="VALUES.yaml",
        help="Values: a YAML map, or a ConfigMap manifest (see --key).",
    ),
    click.option(
        "--key",
        metavar="KEY",
        help="ConfigMap data key holding the values (default: the only key).",
    ),
    severity_option(
        "--schema-violations",
        "schema_violations",
        choices=("Fatal", "Warning"),
        help="Values that break the ConfigData schema: an error, or a warning (as the policy's "
        "configData.schemaViolations).",
    ),
]


def _with(options: list[Any]) -> Any:
    def deco(f: Any) -> Any:
        for opt in reversed(options):
            f = opt(f)
        return f

    return deco


@click.command(epilog=EPILOG)
@_with(_config + _component + _common + _file)
def localize(**kw: Any) -> None:
    """Print FILE with every localization rule for it applied."""
    _run(**kw)


@click.command(epilog=EPILOG)
@_with(_config + _values + _common + _file)
def configure(**kw: Any) -> None:
    """Print FILE with every configuration rule for it applied."""
    _run(**kw)


@click.command(epilog=EPILOG)
@_with(_config + _component + _values + _common + _file)
def mutate(**kw: Any) -> None:
    """Print FILE with localization, then configuration, applied (upstream order)."""
    _run(**kw)
