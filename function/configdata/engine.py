"""The pure engine: ConfigData + component + values → ordered substitutions → changed files.

Upstream ran localization first and configuration second, each in rule order; a later
substitution on the same path wins and its trace shows the earlier one's value as ``old``.
No file or network I/O happens here: callers pass bytes in and get text and changes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from function.configdata.configure import plan_configuration
from function.configdata.localize import plan_localization
from function.configdata.model import ConfigData
from function.configdata.substitution import Change, Substitution
from function.configdata.yamlfile import YamlFile, apply, dump_file, load_file
from function.ocm.access import ImageTable
from function.ocm.model import ComponentVersion


@dataclass(frozen=True)
class Plan:
    substitutions: tuple[Substitution, ...]
    warnings: tuple[str, ...] = ()


def plan(
    cd: ConfigData,
    *,
    component: ComponentVersion | None = None,
    values: Mapping[str, Any] | None = None,
    localize: bool = True,
    configure: bool = True,
    images: ImageTable | None = None,
    only_file: str | None = None,
) -> Plan:
    """Every substitution the ConfigData asks for, localization first (upstream order).

    ``images``: the request's resolved image references (default: computed from ``component``).
    """
    subs: list[Substitution] = []
    warnings: list[str] = []
    if localize and cd.localization:
        if component is None:
            raise ValueError("localization needs a component")
        loc = plan_localization(cd, component, images, only_file=only_file)
        subs.extend(loc.substitutions)
        warnings.extend(loc.warnings)
    if configure:
        subs.extend(plan_configuration(cd, values))
    return Plan(tuple(subs), tuple(warnings))


@dataclass(frozen=True)
class FileResult:
    text: str
    changes: tuple[Change, ...]
    not_applicable: tuple[Substitution, ...]


def apply_to_file(
    text: bytes | str, file: str, substitutions: Iterable[Substitution]
) -> FileResult:
    """Apply the substitutions that address ``file`` to its text; the rest are returned
    unapplied.
    """
    f: YamlFile = load_file(text, file)
    changes: list[Change] = []
    other: list[Substitution] = []
    for sub in substitutions:
        if sub.file != file:
            other.append(sub)
            continue
        changes.append(apply(f, sub))
    return FileResult(dump_file(f) if changes else _as_text(text), tuple(changes), tuple(other))


def _as_text(text: bytes | str) -> str:
    return text.decode("utf-8") if isinstance(text, bytes) else text
