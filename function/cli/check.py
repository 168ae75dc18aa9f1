"""``sack8s check``: lint a ConfigData against its deployable before a team publishes it.

One line per finding on stdout, ``error|warning: <rule>: <file>: <path>: message`` (``-`` where
a part does not apply; rule ``deployable`` for a reference that leaves the chart or Kustomize
directory, which the function refuses), a count on stderr; exit 1 when there is an error,
else 0, and 2 on a usage error (:mod:`function.cli.exits`). The checks themselves are
:mod:`function.configdata.check`; this module only reads the ConfigData, the deployable's
files (``--root``), the values a claim would give (``--values``) and the component
(``--component``, which also supplies every Helm chart and Kustomize directory it ships when
there is no ``--root``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click

from function.cli.common import (
    MAX_BYTES,
    Failure,
    TransferFlags,
    cli_image_table,
    fail,
    load_values,
    log,
    moved,
    read_input,
    transfer_for,
    transfer_notes,
    transfer_options,
    with_component,
)
from function.cli.exits import EPILOG, InputPath, severity_option
from function.errors import DigestMismatch, SackError

MAX_FILES = 4096
MAX_TOTAL = 64 * 1024 * 1024


def read_root(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (hidden directories skipped), by POSIX path."""
    if not root.is_dir():
        raise Failure(f"--root {root}: not a directory")
    files: dict[str, bytes] = {}
    total = 0
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if (
            any(part.startswith(".") for part in rel.parts[:-1])
            or p.is_symlink()
            or not p.is_file()
        ):
            continue
        if len(files) >= MAX_FILES:
            raise Failure(f"--root {root}: more than {MAX_FILES} files")
        if p.stat().st_size > MAX_BYTES:
            continue  # not a manifest the engine would read; a rule naming it says so
        data = read_input(p, "file")
        total += len(data)
        if total > MAX_TOTAL:
            raise Failure(f"--root {root}: more than {MAX_TOTAL} bytes of files")
        files[rel.as_posix()] = data
    return files


def _flavour_of(files: dict[str, bytes]) -> str | None:
    if "Chart.yaml" in files:
        return "helm"
    if any(f in files for f in ("kustomization.yaml", "kustomization.yml", "Kustomization")):
        return "kustomize"
    return None


def _component_deployables(
    source: str, *, plain_http: bool, registry: str | None
) -> tuple[Any, list[Any], list[Any]]:
    """(component version, its deployables, findings for deployables that cannot be read)."""
    from function.configdata.check import Deployable, Finding
    from function.ocm.access import FLAVOUR_OF_TYPE
    from function.ocm.fetch import DEPLOYABLE_TYPES, fetch_deployable

    async def read(src: Any, cv: Any) -> tuple[Any, list[Any], list[Any]]:
        deployables, problems = [], []
        for r in cv.descriptor.resources:
            if r.type not in DEPLOYABLE_TYPES:
                continue
            try:
                files, _ = await fetch_deployable(src, cv, r)
            except SackError as e:
                problems.append(
                    Finding(
                        # a tampered deployable is an error; one that cannot be read, a warning
                        "error" if isinstance(e, DigestMismatch) else "warning",
                        "component",
                        "-",
                        "-",
                        f"{r.describe()} cannot be read, so no rule is checked against it: {e}",
                    )
                )
                continue
            flavour = FLAVOUR_OF_TYPE[r.type]
            deployables.append(Deployable(r.describe(), flavour, MappingProxyType(dict(files))))
        return cv, deployables, problems

    return with_component(source, read, plain_http=plain_http, registry=registry)


def _remote_references(deployables: list[Any]) -> list[Any]:
    """What the function refuses at composition (function.compose.selfcontained): references
    that leave the deployable, for every kustomization (a claim chooses the path) and chart.
    """
    from function.compose.selfcontained import problems
    from function.configdata.check import Finding

    found = []
    for d in deployables:
        if d.flavour is None:
            continue
        for p in problems(d.flavour, d.files, None):
            found.append(Finding("error", "deployable", p.file, p.entry, f"{d.name}: {p.message}"))
    return found


def _schema(data: bytes) -> Any:
    """The ConfigData's schema for reading a flat values ConfigMap; None when the ConfigData
    cannot be read (the check itself reports why).
    """
    from function.configdata.model import parse_configdata

    try:
        conf = parse_configdata(data).configuration
    except SackError:
        return None
    return conf.schema_ if conf is not None else None


@click.command("check", epilog=EPILOG)
@click.option(
    "--config-data",
    "config_data",
    required=True,
    metavar="CD.yaml",
    type=InputPath(exists=True, dir_okay=False),
    help="The ConfigData file.",
)
@click.option(
    "--component",
    metavar="SOURCE",
    help="Component version (descriptor, directory, CTF, or [TYPE::]REPO//NAME:VERSION): its "
    "images, and without --root its charts and Kustomize directories.",
)
@click.option(
    "--root",
    metavar="DIR",
    type=InputPath(exists=True, file_okay=False),
    help="The deployable's files (a chart or a Kustomize directory).",
)
@click.option(
    "--values",
    "values_file",
    metavar="VALUES.yaml",
    type=InputPath(exists=True, dir_okay=False),
    help="Values a claim would give (a YAML map or a ConfigMap, see --key): checked against "
    "the rules, and any value no rule consumes is reported.",
)
@click.option(
    "--key", metavar="KEY", help="ConfigMap data key holding the values (default: the only key)."
)
@click.option(
    "--plain-http", is_flag=True, help="Talk plain HTTP to a registry given without a scheme."
)
@click.option(
    "--registry",
    metavar="HOST[/BASE]",
    help="Registry a local CTF/directory stands for (where the cluster pulls localBlob images).",
)
@click.option(
    "--allow-unpinned",
    is_flag=True,
    help="An image with neither digest nor resource digest is a warning.",
)
@transfer_options
@severity_option(
    "--image-pairs",
    choices=("fatal", "warning"),
    help="Image-pair defects are errors (fatal) or warnings.",
)
def check(
    *,
    config_data: str,
    component: str | None,
    root: str | None,
    values_file: str | None,
    key: str | None,
    plain_http: bool,
    registry: str | None,
    allow_unpinned: bool,
    image_pairs: str,
    transfer_flags: TransferFlags,
) -> None:
    """Lint a ConfigData against its deployable: one line per finding, exit 1 on errors."""
    from function.configdata.check import Deployable, has_errors
    from function.configdata.check import check as run_check

    try:
        if not component and not root:
            raise click.UsageError("give --component SOURCE, --root DIR, or both")
        cd_path = Path(config_data)
        data = read_input(cd_path, "--config-data")
        cv, deployables, findings = None, [], []
        values = (
            load_values(read_input(Path(values_file), "--values"), values_file, key, _schema(data))
            if values_file
            else None
        )
        transfer = transfer_for(transfer_flags, registry=registry, plain_http=plain_http)
        if transfer is not None and not component:
            raise click.UsageError("--transfer-to needs --component SOURCE")
        if component:
            cv, deployables, findings = _component_deployables(
                component, plain_http=plain_http, registry=registry
            )
        # the deployables were read where the component is; the images are where it goes
        cv, problems = moved(cv, transfer)
        if root:
            files = read_root(Path(root))
            deployables = [
                Deployable(f"--root {root}", _flavour_of(files), MappingProxyType(files))
            ]  # type: ignore[arg-type]
        findings = (
            findings
            + run_check(
                data,
                deployables=deployables,
                component=cv,
                images=(
                    cli_image_table(cv, allow_unpinned=allow_unpinned, problems=problems)
                    if cv is not None
                    else None
                ),
                values=values,
                image_pairs_fatal=image_pairs.lower() == "fatal",
                complete=root is None,
                name=f"ConfigData {cd_path.name}",
            )
            + _remote_references(deployables)
        )
    except (Failure, SackError) as e:
        fail(str(e))
    for note in transfer_notes(transfer, registry, cv):
        log(f"warning: {note}")
    for f in findings:
        click.echo(f.line())
    errors = sum(f.severity == "error" for f in findings)
    log(f"check: {errors} error(s), {len(findings) - errors} warning(s)")
    sys.stdout.flush()
    if has_errors(findings):
        sys.exit(1)
