"""``sack8s localize`` / ``configure`` / ``mutate``: the ConfigData engine on one file.

Service teams run these locally or in CI to see exactly what the function will do to their
manifests: stdout is only the mutated file (comments, order and quoting kept), so it can be
diffed or piped; stderr carries logs (``-v``: every substitution, old → new, and every rule
that does not apply to FILE). Exit 0 on success, 1 with one line naming rule, field and
file on bad input, 2 on a usage error (:mod:`function.cli.exits`). This is the only module
of the ConfigData tooling that touches files, stdin or the network.
"""

from __future__ import annotations

import asyncio
import posixpath
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from function.cli.exits import EPILOG
from function.cli.exits import EXIT_BAD_INPUT as EXIT_ERROR
from function.configdata.engine import apply_to_file, plan
from function.configdata.model import parse_configdata
from function.configdata.substitution import describe
from function.configdata.suggestions import suggestions
from function.configdata.unused import unused_values
from function.configdata.yamlfile import load_file
from function.errors import ComponentError, InvalidValues, SackError
from function.ocm.inventory import get_version, need_component
from function.ocm.location import open_source, parse_location, parse_repository
from function.yamlio import MAX_BYTES, load_all, load_one


class Failure(Exception):
    """An expected error outside the engine (a file cannot be read, a bad option value)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fail(message: str) -> NoReturn:
    click.echo(f"sack8s: error: {_one_line(message)}", err=True)
    sys.exit(EXIT_ERROR)


def _log(message: str) -> None:
    click.echo(f"sack8s: {_one_line(message)}", err=True)


def _read(path: Path, what: str) -> bytes:
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


def _rule_file(file: str, root: Path, as_path: str | None) -> tuple[str, Path | None]:
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


def load_values(data: bytes, name: str, key: str | None) -> dict[str, Any]:
    """A plain YAML values file, or a ConfigMap whose (``--key``) data entry is a YAML string."""
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
            if len(data_map) != 1:
                keys = ", ".join(sorted(map(str, data_map)))
                raise InvalidValues(
                    f"values {name}",
                    f"ConfigMap has several data keys ({keys}): pick one with --key",
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
    reg = parse_repository(registry, plain_http=plain_http)
    if reg.repository is None:
        raise ComponentError(
            f"--registry {registry}", "must be an OCI registry address (host[:port][/base])"
        )
    return reg.repository


def load_component(source: str, *, plain_http: bool = False, registry: str | None = None) -> Any:
    """SOURCE → ComponentVersion via the component-source modules (descriptor, dir, CTF, OCI).

    Errors say what exists (:mod:`function.ocm.inventory`): the components a CTF holds, the
    versions there; a version left out is fine when there is exactly one.
    """
    loc = parse_location(source, plain_http=plain_http)
    mirror = mirror_for(registry, plain_http=plain_http)
    component, version = loc.component, loc.version
    src = open_source(loc, registry_repository=mirror)

    async def get() -> Any:
        try:
            name = need_component(src, component, where=f"source {source}")
            return await get_version(src, name, version, where=f"source {source}", default="only")
        finally:
            close = getattr(src, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(get())


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
    values_file: str | None = None,
    key: str | None = None,
    schema_violations: str = "Fatal",
) -> None:
    localize = component is not None
    configure = values_file is not None
    try:
        root_path = Path(root)
        name, full = _rule_file(file, root_path, as_path)
        cd_path = Path(config_data)
        cd = parse_configdata(_read(cd_path, "--config-data"), f"ConfigData {cd_path.name}")
        values = (
            load_values(_read(Path(values_file), "--values"), values_file, key)
            if values_file
            else None
        )
        if full is None:
            text = sys.stdin.buffer.read(MAX_BYTES + 1)
            if len(text) > MAX_BYTES:
                raise Failure(f"stdin: larger than the {MAX_BYTES} byte limit")
        else:
            text = _read(full, "FILE")
        cv = (
            load_component(component, plain_http=plain_http, registry=registry)
            if localize
            else None
        )
        p = plan(
            cd,
            component=cv,
            only_file=name,
            values=values,
            localize=localize,
            configure=configure,
            schema_violations="Warning" if schema_violations.lower() == "warning" else "Fatal",
        )
        try:
            result = apply_to_file(text, name, p.substitutions)
        except SackError as e:
            if not as_path:
                raise
            read = "stdin" if full is None else str(full)
            raise type(e)(e.where, f"{e.message} (FILE {read}, read as --as {name})") from None
        hints = (
            suggestions(load_file(result.text, name).docs, result.changes) if result.changes else ()
        )
        unused = unused_values(cd, values) if configure else ()
    except Failure as e:
        _fail(str(e))
    except SackError as e:
        _fail(str(e))
    if verbose:
        for i, rule in enumerate(cd.localization if localize else []):
            if rule.file != name:
                _log(
                    f"not applicable: ConfigData localization[{i}] addresses file {rule.file}, "
                    f"not {name}"
                )
        for sub in result.not_applicable:
            _log(f"not applicable: ConfigData {sub.rule} addresses file {sub.file}, not {name}")
        for change in result.changes:
            _log(describe(change))
    for finding in p.findings + result.findings:
        _log(f"warning: {finding.message}")
    for change in result.changes:
        if change.sub.warning:
            _log(f"warning: {change.sub.warning}")
    for hint in hints:
        _log(f"warning: {hint.message}")
    if unused:
        _log(
            f"warning: {len(unused)} value(s) reach no configuration rule of the ConfigData "
            f"(for any file), so they are never applied: {', '.join(unused)}"
        )
    if not result.changes:
        _log(
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
        "images).",
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
    click.option(
        "--schema-violations",
        "schema_violations",
        type=click.Choice(["Fatal", "Warning"], case_sensitive=False),
        default="Fatal",
        show_default=True,
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


COMMANDS = [localize, configure, mutate]
