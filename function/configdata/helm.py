"""Changes on a Helm chart → the composed HelmRelease's ``spec.values``.

We never rewrite the chart: Flux pulls it by digest. A substitution on the chart's
``values.yaml`` becomes the same path under ``spec.values``, and only the substituted keys are
written (copying the whole values.yaml would freeze chart defaults into the XR). Helm merges
maps but *replaces* lists, so a path through a list index carries the whole list, as
values.yaml has it after the substitution.

A file holding a Flux ``HelmRelease`` (upstream's Helm example ships ``helm_release.yaml``)
is accepted too: its ``spec.values.*`` paths map onto ours. Any other path there, and any
rule on a template or other chart file, is an error saying what to target instead.

A carried list keeps what Helm would have read in values.yaml: Helm reads it as YAML 1.1
(sigs.k8s.io/yaml), so an untouched plain ``no`` in it stays ``false`` and ``0777`` stays 511
(:func:`helm_plain`), where the engine's own YAML 1.2 reading would have said ``"no"`` and 777.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.scalarint import ScalarInt
from ruamel.yaml.scalarstring import ScalarString

from function.configdata.paths import Path, get
from function.configdata.plain import plain
from function.configdata.substitution import Change, Substitution
from function.errors import InvalidConfigData
from function.yaml11 import goyaml_v2

VALUES_FILE = "values.yaml"


def is_helm_release(doc: Any) -> bool:
    """Whether ``doc`` is a Flux HelmRelease: a chart may ship one, and rules may target its
    ``spec.values`` (any API version of ``helm.toolkit.fluxcd.io``).
    """
    return (
        isinstance(doc, dict)
        and doc.get("kind") == "HelmRelease"
        and str(doc.get("apiVersion", "")).startswith("helm.toolkit.fluxcd.io/")
    )


def file_role(file: str, docs: list[Any]) -> str:
    """``values`` or ``helmrelease``; anything else in a chart is an error."""
    if file == VALUES_FILE:
        return "values"
    if docs and all(is_helm_release(d) for d in docs):
        return "helmrelease"
    return "other"


def check_substitution(sub: Substitution, role: str) -> None:
    """Refuse, before anything is written, what cannot become HelmRelease values."""
    if role == "other":
        raise InvalidConfigData(
            sub.where,
            f"{sub.file} is a chart file other than values.yaml: the function does not render or "
            "rewrite chart templates; target values.yaml with the path of the value the template "
            "reads",
        )
    if role == "helmrelease":
        steps = sub.path.steps
        if len(steps) < 3 or steps[0] != "spec" or steps[1] != "values":
            raise InvalidConfigData(
                sub.where,
                f"path {sub.path} in a HelmRelease file: only spec.values.* maps onto the composed "
                "HelmRelease (the function writes the rest of it itself)",
            )


def helm_plain(node: Any) -> Any:
    """Round-trip YAML as Helm reads it: plain scalars typed by go-yaml v2 (YAML 1.1)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            key = goyaml_v2(k) if type(k) is str else plain(k)
            out[
                ("true" if key else "false")
                if isinstance(key, bool)
                else key
                if isinstance(key, str)
                else str(k)
            ] = helm_plain(v)
        return out
    if isinstance(node, list | tuple):
        return [helm_plain(v) for v in node]
    if type(node) is str:  # a plain scalar (quoted and block ones are ScalarStrings)
        return goyaml_v2(node)
    if isinstance(node, ScalarString):
        return str(node)
    if isinstance(node, ScalarInt) and type(node) is ScalarInt and not isinstance(node, bool):
        width = getattr(node, "_width", None) or 0
        digits = str(abs(int(node)))
        if (
            width > len(digits) and int(node) >= 0
        ):  # written with leading zeros: Go reads it as octal
            text = digits.zfill(width)
            return int(text, 8) if set(text) <= set("01234567") else float(text)
    return plain(node)


def values_steps(change: Change, role: str) -> tuple[Any, ...]:
    """The change's path inside the Helm values: a HelmRelease path drops ``spec.values``.

    Args:
        change: A change resolved in ``values.yaml`` or in a HelmRelease.
        role: What the file is to Helm (:func:`file_role`).

    Returns:
        The steps below the values' root.
    """
    return change.path.steps[2:] if role == "helmrelease" else change.path.steps


def add_to_values(values: dict[str, Any], change: Change, role: str, doc: Any) -> None:
    """Merge one change into the HelmRelease values overlay (``doc`` is the changed document)."""
    steps = values_steps(change, role)
    root_steps = change.path.steps[: len(change.path.steps) - len(steps)]
    node = values
    for i, step in enumerate(steps):
        if isinstance(step, int):
            raise InvalidConfigData(
                change.sub.where, f"path {change.path}: Helm values must be a map at the top"
            )
        last = i == len(steps) - 1
        nxt = None if last else steps[i + 1]
        if last:
            node[step] = plain(change.value)
            return
        if isinstance(nxt, int):
            # Helm replaces lists: carry the whole (substituted) list.
            node[step] = helm_plain(get(doc, Path(tuple(root_steps) + tuple(steps[: i + 1]))))
            return
        child = node.get(step)
        if not isinstance(child, dict):
            child = {}
            node[step] = child
        node = child
