"""``sack8s inspect SOURCE``: what a component holds, before a team writes a claim for it.

The edge of :mod:`function.cli.inspection`: parse SOURCE, open the source, resolve the version, read
the ConfigData and the deployables' file lists, print the report; or, with ``--extract``,
write one resource (a chart's or a Kustomize directory's files, the ConfigData file) to disk.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from function.cli.common import mirror_for
from function.cli.exits import EPILOG, BadInput, one_line
from function.errors import ComponentError, DigestMismatch, SackError

# The component modules (pydantic, httpx) are imported where they are used, so that
# ``sack8s inspect --help`` loads none of them (function/cli/__init__.py).

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_EXTENSIONS = {
    "application/yaml": ".yaml",
    "application/x-yaml": ".yaml",
    "text/yaml": ".yaml",
    "application/json": ".json",
    "application/x-tar": ".tar",
    "application/x-tar+gzip": ".tar.gz",
    "application/gzip": ".gz",
}


def missing_local_path(text: str) -> str | None:
    """A reason when SOURCE is most likely a local path that does not exist.

    ``examples/component/ctfx//acme.org/x`` parses as registry host ``examples``; a host
    with neither a dot, a port nor the name ``localhost`` is no registry (the rule container
    references use), so say the path does not exist instead of trying the network.
    """
    if "::" in text or "://" in text:
        return None
    repo = text.split("//", 1)[0]
    host = repo.split("/", 1)[0]
    if "." in host or ":" in host or host == "localhost" or host.startswith("["):
        return None
    return (
        f"{repo} does not exist (no such directory or file; a registry is "
        "HOST.DOMAIN[:PORT]/BASE or oci::URL)"
    )


async def _gather(src: Any, loc: Any, source: str, constraint: str | None) -> tuple[Any, Any]:
    from function.ocm.inventory import need_component, resolve_version

    component = need_component(src, loc.component, where=f"source {source}")
    res = await resolve_version(
        src, component, constraint, where=f"source {source}", default="highest"
    )
    cv = await src.get(component, res.version)
    return res, cv


async def _digest_checks(src: Any, cv: Any, *, verify: bool) -> tuple[dict[str, str], list[str]]:
    """Every localBlob resource read and checked against its digest: what to show per resource
    (by resource key), and the errors of the checks that failed.
    """
    from function.ocm import digests
    from function.ocm.access import LOCAL_BLOB, normalize_access_type
    from function.ocm.fetch import read_blob
    from function.ocm.source import resource_key

    shown: dict[str, str] = {}
    failed: list[str] = []
    for r in cv.descriptor.resources:
        if normalize_access_type(str(r.access.get("type", ""))) != LOCAL_BLOB:
            continue
        key = resource_key(r)
        if not verify:
            shown[key] = digests.skipped(r).text()
            continue
        try:
            data, media_type, where = await read_blob(src, cv, r)
        except DigestMismatch as e:  # stored content that does not hash to its digest
            shown[key] = f"FAILED: {e.message}"
            failed.append(str(e))
            continue
        except SackError as e:
            shown[key] = f"not checked: cannot be read: {e.message}"
            continue
        try:
            shown[key] = digests.check(where, r, data, media_type).text()
        except SackError as e:
            shown[key] = f"FAILED: {e.message}"
            failed.append(str(e))
    return shown, failed


async def _report(
    src: Any,
    loc: Any,
    source: str,
    constraint: str | None,
    *,
    verify: bool = True,
    keys: list[tuple[str, str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    from function.cli.inspection import configdata_resources, report
    from function.ocm.fetch import DEPLOYABLE_TYPES, fetch_deployable, fetch_file

    res, cv = await _gather(src, loc, source, constraint)
    checks, failed = await _digest_checks(src, cv, verify=verify)
    configdata: dict[str, bytes | str] = {}
    for r in configdata_resources(cv):
        try:
            configdata[r.name] = await fetch_file(src, cv, r, verify=verify)
        except SackError as e:
            configdata[r.name] = e.message
    files: dict[str, list[str] | str] = {}
    for r in cv.descriptor.resources:
        if r.type in DEPLOYABLE_TYPES:
            try:
                content, _ = await fetch_deployable(src, cv, r, verify=verify)
                files[r.name] = sorted(content)
            except SackError as e:
                files[r.name] = e.message
    rep = report(
        source,
        res,
        cv,
        configdata=configdata,
        deployable_files=files,
        digest_checks=checks,
        keys=keys or [],
    )
    return rep, failed


def _public_keys(given: tuple[str, ...]) -> list[tuple[str, str]]:
    """``--public-key NAME=FILE`` values: (signature name, PEM text)."""
    keys: list[tuple[str, str]] = []
    for item in given:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise BadInput(f"--public-key {item}: expected NAME=FILE (signature name, PEM file)")
        if any(name == k for k, _ in keys):
            raise BadInput(f"--public-key {item}: signature {name} given twice")
        try:
            text = Path(file).read_text()
        except (OSError, UnicodeDecodeError) as e:
            why = getattr(e, "strerror", None) or type(e).__name__
            raise BadInput(f"--public-key {item}: {file}: {why}") from None
        if "-----BEGIN " not in text:
            raise BadInput(f"--public-key {item}: {file} is not PEM (-----BEGIN ...)")
        keys.append((name, text))
    return keys


async def _extract(
    src: Any,
    loc: Any,
    source: str,
    constraint: str | None,
    name: str,
    out: Path,
    *,
    force: bool,
    verify: bool = True,
) -> list[Path]:
    from function.ocm.access import LOCAL_BLOB, normalize_access_type
    from function.ocm.fetch import DEPLOYABLE_TYPES, fetch_deployable
    from function.ocm.layout import is_manifest_media_type
    from function.ocm.select import find_resource

    _, cv = await _gather(src, loc, source, constraint)
    res = find_resource(cv.descriptor, name, {}, where="--extract")
    if not _SAFE_NAME.match(res.name):
        raise ComponentError(
            "--extract", f"resource name {res.name[:80]!r} is not usable as a file name"
        )
    if res.type in DEPLOYABLE_TYPES:
        content, _ = await fetch_deployable(src, cv, res, verify=verify)
        target = out / res.name
        _check_free(target, force=force)
        written = []
        for rel in sorted(content):
            path = target / rel
            if not path.resolve().is_relative_to(target.resolve()):
                raise ComponentError(
                    f"--extract {name}", f"archive entry {rel[:80]!r} leaves the target directory"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content[rel])
            written.append(path)
        return written
    access = res.access
    kind = normalize_access_type(str(access.get("type", "")))
    media = str(access.get("mediaType") or "")
    ref = access.get("localReference")
    if kind != LOCAL_BLOB or not isinstance(ref, str) or is_manifest_media_type(media):
        raise ComponentError(
            f"--extract {name}",
            f"{res.describe()} (type {res.type}, access {access.get('type')}) is an OCI "
            "artifact, not a file: "
            "pull it with an OCI client (sack8s inspect shows its reference)",
        )
    from function.ocm.fetch import read_checked

    data, _, _ = await read_checked(src, cv, res, verify=verify)
    target = out / (res.name + _EXTENSIONS.get(media.split(";")[0].strip().lower(), ""))
    _check_free(target, force=force)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return [target]


def _check_free(target: Path, *, force: bool) -> None:
    if target.exists() and not force:
        raise BadInput(f"--extract: {target} exists; remove it or pass --force to overwrite")


def _location(source: str, *, plain_http: bool) -> Any:
    from function.ocm.location import parse_location

    try:
        loc = parse_location(source, plain_http=plain_http)
    except ComponentError as e:
        missing = missing_local_path(source)
        raise (ComponentError(f"source {source}", missing) if missing else e) from None
    if loc.kind == "oci" and (missing := missing_local_path(source)):
        raise ComponentError(f"source {source}", missing)
    return loc


async def _with_source(loc: Any, registry: str | None, work: Any, *, plain_http: bool) -> Any:
    from function.ocm.location import open_source

    mirror = mirror_for(registry, plain_http=plain_http)
    src = open_source(loc, registry_repository=mirror)
    try:
        return await work(src, loc)
    finally:
        close = getattr(src, "aclose", None)
        if close is not None:
            await close()


@click.command("inspect", epilog=EPILOG)
@click.argument("source", metavar="SOURCE")
@click.option(
    "--version",
    "constraint",
    metavar="VERSION",
    help="A version or a range ('>=6.2 <7'); default: the highest.",
)
@click.option(
    "--plain-http", is_flag=True, help="Talk plain HTTP to a registry given without a scheme."
)
@click.option(
    "--registry",
    metavar="HOST[/BASE]",
    help="Registry a local CTF/directory stands for (to show what the cluster pulls for "
    "localBlob images).",
)
@click.option(
    "--extract",
    "extract",
    metavar="RESOURCE",
    help="Write this resource to disk: a chart's or Kustomize directory's files into "
    "DIR/RESOURCE/, "
    "a file resource (the ConfigData) to DIR/RESOURCE.yaml.",
)
@click.option(
    "-o",
    "--output-dir",
    "output_dir",
    default=".",
    show_default=True,
    metavar="DIR",
    help="Where --extract writes.",
)
@click.option("--force", is_flag=True, help="Let --extract overwrite what exists.")
@click.option(
    "--public-key",
    "public_keys",
    multiple=True,
    metavar="NAME=FILE",
    help="Verify signature NAME with the PEM RSA public key (or certificate) in FILE, as the "
    "function does with the policy's ocm.verify; repeatable. A signature that does not verify "
    "is shown, and the exit status is 1.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--skip-digest-check",
    is_flag=True,
    help="Read the blobs without checking them against the resource digests (for tests only).",
)
def inspect_cmd(
    *,
    source: str,
    constraint: str | None,
    plain_http: bool,
    registry: str | None,
    extract: str | None,
    output_dir: str,
    force: bool,
    public_keys: tuple[str, ...],
    as_json: bool,
    skip_digest_check: bool,
) -> None:
    """Show a component's versions, resources and ConfigData rules, or --extract one resource.

    SOURCE: [TYPE::]REPO//NAME[:VERSION] as the OCM CLI writes it (an OCI registry, a CTF), a CTF
    or component directory, or a descriptor file. A CTF holding one component needs no //NAME.

    Every blob the component holds is checked against its resource's digest; the report shows
    each check, and a failed one makes the exit status 1 (after the report).
    """
    keys = _public_keys(public_keys)
    verify = not skip_digest_check
    try:
        loc = _location(source, plain_http=plain_http)
        if constraint and loc.version:
            raise click.UsageError(
                "give the version either in SOURCE (//NAME:VERSION) or with --version, not both"
            )
        wanted = constraint or loc.version
        if extract:
            out = Path(output_dir)

            async def extract_work(src: Any, loc: Any) -> Any:
                return await _extract(
                    src, loc, source, wanted, extract, out, force=force, verify=verify
                )

            written = asyncio.run(_with_source(loc, registry, extract_work, plain_http=plain_http))
            for p in written:
                click.echo(str(p))
            click.echo(
                f"sack8s: wrote {len(written)} file(s) of resource {extract} under {out}", err=True
            )
            return

        async def report_work(src: Any, loc: Any) -> Any:
            return await _report(src, loc, source, wanted, verify=verify, keys=keys)

        rep, failed = asyncio.run(_with_source(loc, registry, report_work, plain_http=plain_http))
    except SackError as e:
        raise BadInput(one_line(str(e))) from None
    except OSError as e:
        raise BadInput(
            f"{getattr(e, 'filename', '') or output_dir}: {e.strerror or type(e).__name__}"
        ) from None
    if as_json:
        sys.stdout.write(json.dumps(rep, indent=2, sort_keys=True) + "\n")
    else:
        from function.cli.inspection import format_text

        sys.stdout.write(format_text(rep))
    sigs = [
        f"signature {s['name']!r} failed: {s['result']}"
        for s in rep.get("signatures", [])
        if s.get("verified") is False
    ]
    if failed:
        sys.stdout.flush()
        more = f" (and {len(failed) - 1} more resource(s), shown above)" if len(failed) > 1 else ""
        more += f"; {len(sigs)} signature(s) failed too, shown above" if sigs else ""
        raise BadInput(one_line(failed[0]) + more)
    if sigs:
        sys.stdout.flush()
        more = f" (and {len(sigs) - 1} more signature(s), shown above)" if len(sigs) > 1 else ""
        raise BadInput(one_line(sigs[0]) + more)
