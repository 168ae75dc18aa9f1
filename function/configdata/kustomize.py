"""Changes on a Kustomize directory → Flux ``Kustomization`` patches.

Flux builds the directory itself, so instead of rewriting files we hand it one JSON6902
patch per (rule, document), in rule order, targeted by the object's kind and name as written
in the file (plus group/version, and a namespace only when the file sets one: Kustomize
applies patches before its namespace transformer). Map keys use ``add`` (creates or
replaces); list entries use ``replace``; keys are JSON-pointer escaped.

A patch can only find its object if Kustomize does not rename it first, and only sticks if
nothing rewrites the field afterwards; so a rule on a non-KRM file, on an object an inner
``kustomization.yaml`` renames (namePrefix/nameSuffix), or on an image field that its
``images:`` rewrites, is an error saying how to fix it.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

from function.configdata.plain import plain
from function.configdata.substitution import Change, Substitution
from function.errors import InvalidConfigData
from function.ocm.imageref import image_name

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def is_kustomization(doc: Any) -> bool:
    """Whether ``doc`` is a Kustomization or a Kustomize Component: Kustomize's own input,
    which Flux patches cannot address.
    """
    return (
        isinstance(doc, dict)
        and doc.get("kind") in ("Kustomization", "Component")
        and str(doc.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")
    )


def kustomizations_over(file: str, files: Mapping[str, Any]) -> list[str]:
    """Kustomization files in the directory of ``file`` and every ancestor, nearest first."""
    out: list[str] = []
    d = posixpath.dirname(file)
    while True:
        for k in KUSTOMIZATION_FILES:
            cand = posixpath.join(d, k) if d else k
            if cand in files:
                out.append(cand)
        if not d:
            return out
        d = posixpath.dirname(d)


def check_file(sub: Substitution, docs: list[Any]) -> None:
    """Refuse a rule on a kustomization file, before anything is written.

    Flux patches the objects Kustomize builds, never Kustomize's own input, so a value
    written there would silently do nothing.

    Args:
        sub: The substitution, for the error's rule, field and file.
        docs: The documents of ``sub.file``.

    Raises:
        InvalidConfigData: ``sub.file`` is a kustomization file.
    """
    if posixpath.basename(sub.file) in KUSTOMIZATION_FILES or any(
        is_kustomization(d) for d in docs
    ):
        raise InvalidConfigData(
            sub.where,
            f"{sub.file} is a kustomization file, not a Kubernetes object: Flux patches objects, "
            "so target the manifest that defines the object",
        )


def check_change(change: Change, doc: Any, kustomizations: Mapping[str, Any]) -> None:
    """Refuse changes a Flux patch cannot carry faithfully."""
    sub = change.sub
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not (
        isinstance(doc, dict)
        and isinstance(doc.get("apiVersion"), str)
        and isinstance(doc.get("kind"), str)
        and isinstance(meta, dict)
        and isinstance(meta.get("name"), str)
    ):
        raise InvalidConfigData(
            sub.where,
            f"document {change.document} of {sub.file} is not a Kubernetes object (needs "
            "apiVersion, kind "
            "and metadata.name): Flux can only patch objects; move the value into a manifest",
        )
    obj = f"{doc['kind']}/{meta['name']}"
    for kfile, kdoc in kustomizations.items():
        if not isinstance(kdoc, dict):
            continue
        renames = [k for k in ("namePrefix", "nameSuffix") if kdoc.get(k)]
        if renames:
            raise InvalidConfigData(
                sub.where,
                f"{kfile} sets {' and '.join(renames)}, which renames {obj} before Flux applies "
                "patches, "
                "so a patch cannot target it by the name in the file: remove the rename from "
                f"{kfile} (name the object in the manifest instead)",
            )
        if isinstance(change.old, str) and change.path.steps[-1] == "image":
            current = image_name(change.old)
            for entry in kdoc.get("images") or []:
                if isinstance(entry, dict) and entry.get("name") == current:
                    raise InvalidConfigData(
                        sub.where,
                        f"{kfile} has an images: entry for {current!r}, which rewrites path "
                        f"{change.path} "
                        f"of {obj} after the patch: remove that images: entry (the ConfigData rule "
                        "localizes the image) or drop the rule",
                    )


def _escape(step: Any) -> str:
    return str(step).replace("~", "~0").replace("/", "~1")


def _nest(steps: tuple[Any, ...], value: Any) -> Any:
    for step in reversed(steps):
        value = {step: value}
    return value


def patch_for(change: Change, doc: Any) -> dict[str, Any]:
    """One Flux Kustomization ``patches[]`` entry for one change."""
    steps = change.path.steps
    existing = len(steps) - change.created
    if change.created:
        op_steps, value = steps[: existing + 1], _nest(steps[existing + 1 :], plain(change.value))
        op = "add"
    else:
        op_steps, value = steps, plain(change.value)
        op = "replace" if isinstance(steps[-1], int) else "add"
    ops = [{"op": op, "path": "/" + "/".join(_escape(s) for s in op_steps), "value": value}]
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    target: dict[str, Any] = {}
    if group:
        target["group"] = str(group)
    target["version"] = version
    target["kind"] = str(doc["kind"])
    target["name"] = str(doc["metadata"]["name"])
    ns = doc["metadata"].get("namespace")
    if isinstance(ns, str) and ns:
        target["namespace"] = str(ns)
    return {"patch": json.dumps(ops, ensure_ascii=False), "target": target}
