"""The bundled examples as test cases, shared by every suite that renders them.

One list, so the schema validation (default suite), the Crossplane CLI comparison (opt-in) and
the e2e suite all check the same renders.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
COMPOSITION = EXAMPLES / "composition.yaml"
COMPOSITION_CLAIM = EXAMPLES / "composition-claim.yaml"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(path.read_text(), Loader=_Loader) if d is not None]


def load_text(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]


def dump(docs: Iterable[dict[str, Any]], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=True))
    return path


def gvk(doc: dict[str, Any]) -> tuple[str, str]:
    return (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))


@dataclass(frozen=True)
class Case:
    id: str
    xr: Path  # what `sack8s render` gets (an XR or a claim)
    composition: Path
    observed: Path | None = None
    required: Path | None = None

    @property
    def is_claim(self) -> bool:
        return bool((load(self.xr)[0].get("metadata") or {}).get("namespace"))

    def render_args(self) -> list[str]:
        """`sack8s render` arguments for this case."""
        args = ["render", str(self.xr), "--composition", str(self.composition)]
        if self.observed:
            args += ["--observed", str(self.observed)]
        if self.required:
            args += ["--required-resources", str(self.required)]
        return args


CASES = [
    Case("helm", EXAMPLES / "xr.yaml", COMPOSITION),
    Case("helm-observed", EXAMPLES / "xr.yaml", COMPOSITION, EXAMPLES / "observed" / "helm"),
    # the second reconcile: the Namespaces exist, the Flux objects wait for the gate
    Case("helm-gated", EXAMPLES / "xr.yaml", COMPOSITION, EXAMPLES / "observed" / "helm-gated"),
    Case("kustomize", EXAMPLES / "xr-kustomize.yaml", COMPOSITION),
    Case(
        "kustomize-observed",
        EXAMPLES / "xr-kustomize.yaml",
        COMPOSITION,
        EXAMPLES / "observed" / "kustomize",
    ),
    Case(
        "claim",
        EXAMPLES / "claim.yaml",
        COMPOSITION_CLAIM,
        EXAMPLES / "observed" / "claim",
        EXAMPLES / "required",
    ),
]


def shipped() -> list[Path]:
    """Every YAML file under examples/ (the offline component excepted) and package/."""
    files = [
        p
        for root in (EXAMPLES, REPO / "package")
        for p in sorted(root.rglob("*.y*ml"))
        if "component" not in p.relative_to(root).parts
    ]
    return [p for p in files if p.suffix in (".yaml", ".yml")]


def claims_side(path: Path) -> bool:
    """Claims (namespaced SACK8sComponentVersion) clash with the v2 XR kind: validate apart."""
    return any(
        d.get("kind") == "SACK8sComponentVersion" and (d.get("metadata") or {}).get("namespace")
        for d in load(path)
    )


def _first(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for d in docs if d.get("kind") == kind))


# Each broken copy, and the text the validator's complaint must contain.
BROKEN = {
    "apiVersion:ExternalSecret": "external-secrets.io/v1beta9",
    "apiVersion:Namespace": "no schema",
    "apiVersion:XR": "v1alpha2",
    "apiVersion:composition-input": "v1beta9",
    "field:ExternalSecret": "refreshIntervall",
    "field:RoleBinding": "subject",
    "field:ServiceAccount": "namspace",
    "field:XR": "componnet",
    "field:composition-input": "flx",
}


def broken_cases(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Deliberately broken copies of objects from a Helm render: each must fail validation."""
    xr = copy.deepcopy(docs[0])
    out: dict[str, dict[str, Any]] = {}

    es = _first(docs, "ExternalSecret")
    es["apiVersion"] = "external-secrets.io/v1beta9"
    out["apiVersion:ExternalSecret"] = es
    ns = _first(docs, "Namespace")
    ns["apiVersion"] = "v2"
    out["apiVersion:Namespace"] = ns
    bad_xr = copy.deepcopy(xr)
    bad_xr["apiVersion"] = "platform.example.org/v1alpha2"
    out["apiVersion:XR"] = bad_xr

    es = _first(docs, "ExternalSecret")
    es["spec"]["refreshIntervall"] = es["spec"].pop("refreshInterval")
    out["field:ExternalSecret"] = es
    rb = _first(docs, "RoleBinding")
    rb["subject"] = rb.pop("subjects")
    out["field:RoleBinding"] = rb
    sa = _first(docs, "ServiceAccount")
    sa["metadata"]["namspace"] = sa["metadata"].pop("namespace")
    out["field:ServiceAccount"] = sa
    bad_xr = copy.deepcopy(xr)
    bad_xr["spec"]["componnet"] = bad_xr["spec"].pop("component")
    out["field:XR"] = bad_xr
    comp = load(COMPOSITION)[0]
    comp["spec"]["pipeline"][0]["input"]["flx"] = comp["spec"]["pipeline"][0]["input"].pop("flux")
    out["field:composition-input"] = comp
    comp = load(COMPOSITION)[0]
    comp["spec"]["pipeline"][0]["input"]["apiVersion"] = "sack8s.fn.crossplane.io/v1beta9"
    out["apiVersion:composition-input"] = comp
    return out
