"""Claim values that no configuration rule consumes.

A claim's ``values`` only reach the deployment through configuration rules whose value
refers to them (``(( replicas ))``). A value no such rule reads lands nowhere: a misspelt
key, a value meant for a file the deployable does not have (the bundled Helm example's
rules address the Kustomize files, so its ``replicas`` is dropped), or a rule the ConfigData
author forgot. Composition succeeds either way, so without this check the team never learns
why its setting has no effect.

A value is *consumed* when a rule's reference reaches it or one of its parents
(``(( image ))`` consumes ``image.tag``), or when a reference reaches below it
(``(( hosts.0 ))`` consumes the list ``hosts``). Values are compared as leaves: scalars,
lists and empty maps. Only the user's values are checked, never the ConfigData defaults.

Pure functions; ``sack8s render``, ``configure``/``mutate``, ``sack8s check`` and the
function all call :func:`unused_values`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from function.configdata.model import ConfigData
from function.configdata.paths import format_path

# The reference form configure.evaluate accepts: a whole-value (( dotted.path )).
_EXPR = re.compile(r"^\(\((.*)\)\)$", re.S)
_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.(?:[A-Za-z_][A-Za-z0-9_-]*|[0-9]+))*")

Key = tuple[str, ...]


def references(value: Any) -> Iterator[Key]:
    """Every ``(( dotted.path ))`` in a rule value, also inside literal maps and lists."""
    if isinstance(value, str):
        m = _EXPR.match(value.strip())
        if m and _REF.fullmatch(m.group(1).strip()):
            yield tuple(m.group(1).strip().split("."))
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from references(v)
    elif isinstance(value, list):
        for v in value:
            yield from references(v)


def consumed(cd: ConfigData, files: Collection[str] | None = None) -> frozenset[Key]:
    """The value paths the configuration rules read; with ``files``, only rules on those files."""
    conf = cd.configuration
    if conf is None:
        return frozenset()
    return frozenset(
        ref
        for rule in conf.rules
        if files is None or rule.file in files
        for ref in references(rule.value)
    )


def leaves(values: Any, prefix: Key = ()) -> Iterator[Key]:
    """Paths of the scalars, lists and empty maps in ``values``, in key order."""
    if isinstance(values, Mapping) and (values or not prefix):
        for k in values:
            yield from leaves(values[k], (*prefix, str(k)))
    else:
        yield prefix


def unused_values(
    cd: ConfigData, values: Mapping[str, Any] | None, *, files: Collection[str] | None = None
) -> tuple[str, ...]:
    """The paths (yq form, sorted) of ``values`` that no configuration rule consumes.

    ``files``: the files of the deployable being composed; rules on other files are skipped
    by the function, so they consume nothing. ``None`` counts every rule (the CLI, which
    sees one file at a time but the whole ConfigData).
    """
    if not values:
        return ()
    refs = consumed(cd, files)
    out = set()
    for leaf in leaves(values):
        if not any(_covers(ref, leaf) for ref in refs):
            out.add(format_path(leaf))
    return tuple(sorted(out))


def _covers(ref: Key, leaf: Key) -> bool:
    n = min(len(ref), len(leaf))
    return ref[:n] == leaf[:n]


__all__ = ["consumed", "leaves", "references", "unused_values"]
