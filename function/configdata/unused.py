"""Claim values that no configuration rule consumes.

A claim's ``values`` only reach the deployment through configuration rules whose value
refers to them (``(( replicas ))``). A value no such rule reads lands nowhere: a misspelt
key, a value meant for a file the deployable does not have (the bundled Helm example's
rules address the Kustomize files, so its ``replicas`` is dropped), or a rule the ConfigData
author forgot. Composition succeeds either way, so without this check the team never learns
why its setting has no effect.

A value is *consumed* when a rule's expression refers to it or to one of its parents
(``(( image ))`` consumes ``image.tag``), or reaches below it (``(( hosts.[0] ))`` consumes
the list ``hosts``), anywhere in the expression (``tcp://(( host )):(( port ))``,
``(( replicas * 2 ))``, both sides of ``||``) or through an expression in the defaults or
values it refers to (a default ``image: (( repo ":" tag ))`` read by a rule consumes ``repo``
and ``tag``). References resolve with upstream's spiff scoping
(:meth:`function.configdata.expressions.Document.reads`), so ``(( name ))`` in a rule reads
the rule's own ``name`` field, not the value ``name``. Values are compared as leaves:
scalars, lists and empty maps. Only the user's values are checked, never the ConfigData
defaults.

Pure functions; ``sack8s render``, ``configure``/``mutate``, ``sack8s check`` and the
function all call :func:`unused_values`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from function.cache import Memos
from function.configdata.configure import RULES, document
from function.configdata.model import ConfigData
from function.configdata.paths import format_path
from function.configdata.suggestions import did_you_mean
from function.errors import SackError

Key = tuple[str, ...]


def consumed(
    cd: ConfigData,
    values: Mapping[str, Any] | None = None,
    files: Collection[str] | None = None,
    memos: Memos | None = None,
) -> frozenset[Key]:
    """The value paths the configuration rules read; with ``files``, only rules on those files.

    What a reference reaches depends on the values (scoping, expressions among them), so they
    are part of the question. A ConfigData or values the configuration refuses read nothing
    (the configuration's own error says why).
    """
    conf = cd.configuration
    if conf is None:
        return frozenset()
    try:
        doc = document(cd, values, memos)
    except SackError:
        return frozenset()
    places = set()
    for i, rule in enumerate(conf.rules):
        if files is None or rule.file in files:
            places |= doc.reads((RULES, i, "value"))
    return frozenset(tuple(str(p) for p in loc) for loc in places if loc and loc[0] != RULES)


def leaves(values: Any, prefix: Key = ()) -> Iterator[Key]:
    """Paths of the scalars, lists and empty maps in ``values``, in key order."""
    if isinstance(values, Mapping) and (values or not prefix):
        for k in values:
            yield from leaves(values[k], (*prefix, str(k)))
    else:
        yield prefix


def unused_values(
    cd: ConfigData,
    values: Mapping[str, Any] | None,
    *,
    files: Collection[str] | None = None,
    memos: Memos | None = None,
) -> tuple[str, ...]:
    """The paths (yq form, sorted) of ``values`` that no configuration rule consumes.

    ``files``: the files of the deployable being composed; rules on other files are skipped
    by the function, so they consume nothing. ``None`` counts every rule (the CLI, which
    sees one file at a time but the whole ConfigData).
    """
    if not values:
        return ()
    refs = consumed(cd, values, files, memos)
    out = set()
    for leaf in leaves(values):
        if not any(_covers(ref, leaf) for ref in refs):
            out.add(format_path(leaf))
    return tuple(sorted(out))


def unused_hint(cd: ConfigData, unused: Collection[str]) -> str:
    """Did you mean: for unused values whose top-level key the ConfigData does not know (not
    in its defaults nor its schema's properties) but a known one is close to: the typo a schema
    without ``additionalProperties: false`` lets through (``replicsa`` → ``replicas``).
    """
    conf = cd.configuration
    if conf is None or not unused:
        return ""
    schema = conf.schema_ if isinstance(conf.schema_, Mapping) else {}
    found = schema.get("properties")
    props = found if isinstance(found, Mapping) else {}
    known = {str(k) for k in (conf.defaults or {})} | {str(k) for k in props}
    tops = sorted({path.split(".", 1)[0].split("[", 1)[0] for path in unused})
    return did_you_mean([t for t in tops if t not in known], sorted(known))


def _covers(ref: Key, leaf: Key) -> bool:
    n = min(len(ref), len(leaf))
    return ref[:n] == leaf[:n]


__all__ = ["consumed", "leaves", "unused_hint", "unused_values"]
