"""What the ConfigData commands share: reading inputs, loading a component, the transfer model.

``localize``/``configure``/``mutate`` (:mod:`function.cli.mutate`), ``check`` and ``inspect``
all read files and values under the same caps, load a component the same way (with the same
``--registry``/``--transfer-to`` meaning) and fail with the same one-line message; keeping that
here means the three commands cannot drift apart in what they accept.
"""

from __future__ import annotations

import functools
import posixpath
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from function.cli.exits import EXIT_BAD_INPUT as EXIT_ERROR
from function.errors import ComponentError, InvalidValues, SackError

# The engine, ruamel, pydantic and the component sources are imported inside the functions
# that use them (function/cli/__init__.py; the per-file PLC0415 ignore in pyproject.toml).

# function.yamlio's cap (tests/test_cli_startup.py keeps the two equal).
MAX_BYTES = 4 * 1024 * 1024


class Failure(Exception):
    """An expected error outside the engine (a file cannot be read, a bad option value)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def fail(message: str) -> NoReturn:
    click.echo(f"sack8s: error: {_one_line(message)}", err=True)
    sys.exit(EXIT_ERROR)


def log(message: str) -> None:
    click.echo(f"sack8s: {_one_line(message)}", err=True)


def read_input(path: Path, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise Failure(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise Failure(f"{what} {path}: is a directory, not a file") from None
    except OSError as e:
        raise Failure(f"{what} {path}: cannot be read ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_BYTES:
        raise Failure(f"{what} {path}: larger than the {MAX_BYTES} byte limit")
    return data


def rule_file(file: str, root: Path, as_path: str | None) -> tuple[str, Path | None]:
    """(the name the rules address, the path to read or None for stdin)."""
    if file == "-":
        if not as_path:
            raise click.UsageError(
                "FILE '-' reads stdin: name the file the rules address with --as PATH"
            )
        return _normalise(as_path), None
    path = Path(file)
    if as_path and path.is_absolute():
        return _normalise(as_path), path  # the rules address the --as name; FILE may be anywhere
    if path.is_absolute():
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            raise Failure(
                f"FILE {file} is outside --root {root}: rules name files relative to the root"
            ) from None
        name = rel.as_posix()
        full = path
    else:
        name = path.as_posix()
        full = root / path
    return _normalise(as_path or name), full


def _normalise(name: str) -> str:
    norm = posixpath.normpath(name.replace("\\", "/"))
    if norm.startswith("../") or norm == ".." or norm.startswith("/"):
        raise Failure(
            f"file {name}: must be a path inside the root (rules name files relative to it)"
        )
    return norm.removeprefix("./")


def load_values(data: bytes, name: str, key: str | None, schema: Any = None) -> dict[str, Any]:
    """A plain YAML values file, or a ConfigMap whose (``--key``) data entry is a YAML string,
    or a flat ConfigMap (one key per value, typed by the ConfigData ``schema``:
    :mod:`function.configdata.flatvalues`), as the function reads them.
    """
    from function.configdata.flatvalues import flat_values, is_flat, not_flat_reason
    from function.yamlio import load_all, load_one

    docs = load_all(data, name)
    if not docs:
        if key:
            raise InvalidValues(
                f"values {name}", f"--key {key}: the file is empty, not a ConfigMap"
            )
        return {}
    if len(docs) != 1:
        raise InvalidValues(f"values {name}", f"must hold one YAML document, found {len(docs)}")
    doc = docs[0]
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and doc.get("apiVersion") == "v1":
        data_map = doc.get("data") or {}
        if not isinstance(data_map, dict) or not data_map:
            raise InvalidValues(f"values {name}", "ConfigMap has no data entries")
        if key is None:
            if schema is not None and is_flat(data_map, schema):
                return flat_values(data_map, schema)
            if len(data_map) != 1:
                keys = ", ".join(sorted(map(str, data_map)))
                raise InvalidValues(
                    f"values {name}",
                    f"ConfigMap has several data keys ({keys}): pick one with --key, or make it "
                    "flat (one key per value: every key a top-level scalar property of the "
                    f"ConfigData schema; {not_flat_reason(data_map, schema)})",
                )
            key = next(iter(data_map))
        if key not in data_map:
            keys = ", ".join(sorted(map(str, data_map)))
            raise InvalidValues(
                f"values {name}", f"ConfigMap has no data key {key!r} (it has: {keys})"
            )
        text = data_map[key]
        if not isinstance(text, str):
            raise InvalidValues(f"values {name} (ConfigMap key {key})", "must be a YAML string")
        doc = load_one(text, f"values {name} (ConfigMap key {key})") if text.strip() else {}
        name = f"{name} (ConfigMap key {key})"
    elif key is not None:
        raise InvalidValues(
            f"values {name}", f"--key {key} given but the file is not a ConfigMap (kind: ConfigMap)"
        )
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidValues(
            f"values {name}", f"must be a map of keys to values, got {type(doc).__name__}"
        )
    return doc


def mirror_for(registry: str | None, *, plain_http: bool = False) -> Any:
    """The registry (``--registry HOST[/BASE]``) a local CTF/directory stands for, or None."""
    if not registry:
        return None
    from function.ocm.location import parse_repository

    reg = parse_repository(registry, plain_http=plain_http)
    if reg.repository is None:
        raise ComponentError(
            f"--registry {registry}", "must be an OCI registry address (host[:port][/base])"
        )
    return reg.repository


def load_component(
    source: str,
    *,
    plain_http: bool = False,
    registry: str | None = None,
    verify: bool = True,
    warn: Any = None,
) -> Any:
    """SOURCE → ComponentVersion via the component-source modules (descriptor, dir, CTF, OCI).

    Errors say what exists (:mod:`function.ocm.inventory`): the components a CTF holds, the
    versions there; a version left out is fine when there is exactly one. With ``verify``,
    the blobs the function would read (every ConfigData and deployable) are checked against
    their resource digests first, as the function checks them (:func:`verify_digests`).
    """

    async def the_version(src: Any, cv: Any) -> Any:
        if verify:
            for message in await verify_digests(src, cv):
                if warn is not None:
                    warn(message)
        return cv

    return with_component(source, the_version, plain_http=plain_http, registry=registry)


async def verify_digests(src: Any, cv: Any) -> list[str]:
    """Every ConfigData and deployable blob of ``cv`` checked against its resource digest, as
    the function checks what it loads: a mismatch raises; returns warnings for what could not
    be checked (no digest declared: the policy's ``source.requireDigests`` decides in a
    cluster). A descriptor file holds no blobs: nothing is read, nothing to check.
    """
    from function.errors import DigestMismatch
    from function.ocm import digests
    from function.ocm.access import LOCAL_BLOB, normalize_access_type
    from function.ocm.directory import DescriptorFileSource, DirectorySource
    from function.ocm.fetch import DEPLOYABLE_TYPES, read_blob
    from function.ocm.model import TYPE_CONFIGDATA

    read = [
        r
        for r in cv.descriptor.resources
        if r.type in (*DEPLOYABLE_TYPES, TYPE_CONFIGDATA)
        and normalize_access_type(str(r.access.get("type", ""))) == LOCAL_BLOB
    ]
    where = f"component {cv.name}:{cv.version}"
    if isinstance(src, DescriptorFileSource) and not isinstance(src, DirectorySource):
        return []
    warnings = []
    for r in read:
        try:
            data, media_type, where_r = await read_blob(src, cv, r)
        except DigestMismatch:
            raise
        except SackError as e:
            # this command needs only the descriptor: a blob it cannot read is reported
            warnings.append(f"{e.where}: digest not checked: {e.message}")
            continue
        check = digests.check(where_r, r, data, media_type)
        if check.status == "missing":
            warnings.append(
                f"{where} {r.describe()}: {check.detail}; the function refuses it unless the "
                "policy sets source.requireDigests: false"
            )
    return warnings


def with_component(
    source: str, then: Any, *, plain_http: bool = False, registry: str | None = None
) -> Any:
    """Open SOURCE, get the component version, and ``await then(src, cv)`` before closing it."""
    import asyncio

    from function.ocm.inventory import get_version, need_component
    from function.ocm.location import open_source, parse_location

    loc = parse_location(source, plain_http=plain_http)
    mirror = mirror_for(registry, plain_http=plain_http)
    component, version = loc.component, loc.version
    src = open_source(loc, registry_repository=mirror)

    async def get() -> Any:
        try:
            name = need_component(src, component, where=f"source {source}")
            cv = await get_version(src, name, version, where=f"source {source}", default="only")
            return await then(src, cv)
        finally:
            close = getattr(src, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(get())


@dataclass(frozen=True)
class TransferFlags:
    """``--transfer-to`` and the OCM CLI transfer flags that go with it, as given: one value,
    so the commands that take them (:func:`transfer_options`) hand them on together.
    """

    transfer_to: str | None = None
    copy_resources: bool = False
    upload_as: str | None = None


NO_TRANSFER = TransferFlags()


def transfer_for(
    flags: TransferFlags, *, registry: str | None = None, plain_http: bool = False
) -> Any:
    """The ``ocm transfer`` to simulate (``--transfer-to``), or None.

    ``--registry`` stays what it was (the registry a local CTF/directory already stands for:
    only localBlob images move); ``--transfer-to`` says where ops will transfer the component,
    so the two exclude each other. ``--copy-resources``/``--upload-as`` are the OCM CLI's own
    flags and mean nothing without a transfer.
    """
    from function.ocm.transfer import UPLOAD_AS, Transfer

    if not flags.transfer_to:
        if flags.copy_resources or flags.upload_as:
            flag = "--copy-resources" if flags.copy_resources else "--upload-as"
            raise click.UsageError(f"{flag} describes a transfer: give --transfer-to REGISTRY")
        return None
    if registry:
        raise click.UsageError(
            "--registry and --transfer-to exclude each other: after a transfer every localBlob "
            "is in the --transfer-to registry"
        )
    mode = flags.upload_as or "default"
    if mode not in UPLOAD_AS:  # click's Choice already checked; kept for direct callers
        raise click.UsageError(f"--upload-as must be one of {', '.join(UPLOAD_AS)}")
    from function.ocm.location import parse_repository

    reg = parse_repository(flags.transfer_to, plain_http=plain_http)
    if reg.repository is None or reg.component:
        raise ComponentError(
            f"--transfer-to {flags.transfer_to}",
            "must be an OCI registry address (host[:port][/prefix], as `ocm transfer` takes it)",
        )
    return Transfer(reg.repository, copy_resources=flags.copy_resources, upload_as=mode)  # type: ignore[arg-type]


def moved(cv: Any, transfer: Any) -> tuple[Any, Any]:
    """(the component as it reads after ``transfer``, the resources it could not place)."""
    if transfer is None:
        return cv, {}
    from function.ocm.transfer import transferred

    return transferred(cv, transfer)


def transfer_notes(transfer: Any, registry: str | None, cv: Any) -> list[str]:
    """Warnings that keep a team from reading an unchanged image as a localized one."""
    from function.ocm.access import LOCAL_BLOB, OCI_ARTIFACT, normalize_access_type
    from function.ocm.model import TYPE_OCI_IMAGE

    if cv is None:
        return []
    kinds = [
        normalize_access_type(str(r.access.get("type") or ""))
        for r in cv.descriptor.resources
        if r.type == TYPE_OCI_IMAGE
    ]
    notes = []
    if transfer is not None and transfer.upload_as != "default" and not transfer.copy_resources:
        notes.append(
            f"--upload-as {transfer.upload_as} without --copy-resources changes nothing: the OCM "
            "CLI copies only localBlobs then, and images stay where they are"
        )
    if registry and kinds and LOCAL_BLOB not in kinds and OCI_ARTIFACT in kinds:
        notes.append(
            f"--registry {registry} applies only to localBlob images and this component has "
            "none: its images stay where their references point; to see them after a transfer, "
            "pass --transfer-to REGISTRY[/PREFIX] --copy-resources instead"
        )
    return notes


def cli_image_table(cv: Any, *, allow_unpinned: bool, problems: Any = None) -> Any:
    """The component's image table, with the CLI's way out for unpinned images.

    Refusing an image that has neither a digest nor a resource digest is the product's promise;
    a team testing a component that is not pinned yet passes ``--allow-unpinned`` (a warning
    then says so), and the refusal names that flag.
    """
    from dataclasses import replace
    from types import MappingProxyType

    from function.ocm.images import image_table

    table = image_table(cv, allow_unpinned=allow_unpinned)
    if problems:
        table = MappingProxyType(
            {
                k: (
                    replace(e, error=problems[k], reference="", parsed=None) if k in problems else e
                )
                for k, e in table.items()
            }
        )
    if allow_unpinned or all(e.error is None for e in table.values()):
        return table
    lenient = image_table(cv, allow_unpinned=True)
    out = dict(table)
    for key, entry in table.items():
        e = entry.error
        if (
            isinstance(e, ComponentError)
            and lenient[key].error is None
            and key not in (problems or {})
        ):
            out[key] = replace(
                entry,
                error=ComponentError(
                    e.where,
                    f"{e.message}; to test the ConfigData with it anyway, pass --allow-unpinned",
                ),
            )
    return MappingProxyType(out)


#: ``--transfer-to`` and the OCM CLI transfer flags it goes with (localize, mutate, check).
_TRANSFER_OPTIONS = [
    click.option(
        "--transfer-to",
        "transfer_to",
        metavar="REGISTRY[/PREFIX]",
        help="Localize as if `ocm transfer` had put the component there (with the OCM "
        "CLI's mapping per access type; see --copy-resources, --upload-as).",
    ),
    click.option(
        "--copy-resources",
        is_flag=True,
        help="The transfer copies images too (`ocm transfer --copy-resources`); without it "
        "only localBlobs move.",
    ),
    click.option(
        "--upload-as",
        "upload_as",
        type=click.Choice(["default", "localBlob", "ociArtifact"]),
        help="How copied images are stored (`ocm transfer --upload-as`): default and "
        "localBlob inside the component, ociArtifact at REGISTRY/PREFIX/<image path>:<tag>.",
    ),
]


def transfer_options(command: Any) -> Any:
    """Add ``--transfer-to``, ``--copy-resources`` and ``--upload-as`` to a click command, passed
    to it as one ``transfer_flags`` (:class:`TransferFlags`).
    """

    @functools.wraps(command)
    def folded(
        *args: Any,
        transfer_to: str | None = None,
        copy_resources: bool = False,
        upload_as: str | None = None,
        **kw: Any,
    ) -> Any:
        flags = TransferFlags(transfer_to, copy_resources, upload_as)
        return command(*args, transfer_flags=flags, **kw)

    for option in reversed(_TRANSFER_OPTIONS):
        folded = option(folded)
    return folded
