"""In-process render: the same RunFunction ``crossplane render`` would call, without a server.

Service teams and ops can see what a claim composes on a laptop with only Python. The loop
mirrors ``crossplane render`` (crank v2.2.4): send the XR and observed resources, resolve
requirements from the given files for up to five rounds, stop at the first Fatal, and
print the desired composed resources in a stable order (by composition-resource name, keys
sorted), each carrying its ``crossplane.io/composition-resource-name`` annotation.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml import YAML
from ruamel.yaml.representer import SafeRepresenter

from function.edge.structs import plain, to_dict
from function.errors import SackError
from function.yaml11 import needs_quotes
from function.yamlio import load_all

if TYPE_CHECKING:
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    from function.edge.fn import FunctionRunner

# The Crossplane SDK, protobuf messages and function.edge.fn (gRPC, the pydantic models) are
# imported in the functions that run the function: the YAML helpers here serve `sack8s xrd`
# and tests too.
INPUT_GROUP = "sack8s.fn.crossplane.io"  # function.api.policy.INPUT_GROUP (a test keeps them equal)

ANNOTATION_RESOURCE_NAME = "crossplane.io/composition-resource-name"
MAX_REQUIREMENT_ROUNDS = 5


class RenderError(SackError):
    reason = "RenderFailed"


def _sorted(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _sorted(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    return v


class _Representer(SafeRepresenter):
    """Strings a YAML 1.1 reader (kubectl, Helm, sigs.k8s.io/yaml) would retype are quoted."""

    def represent_str(self, data: str) -> Any:
        return self.represent_scalar(
            "tag:yaml.org,2002:str", data, style="'" if needs_quotes(data) else None
        )


_Representer.add_representer(str, _Representer.represent_str)


def dump_yaml(docs: Iterable[Mapping[str, Any]]) -> str:
    y = YAML(typ="safe", pure=True)
    y.Representer = _Representer
    y.default_flow_style = False
    y.width = 4096
    out = io.StringIO()
    y.explicit_start = True
    y.dump_all([_sorted(plain(dict(d))) for d in docs], out)
    return out.getvalue()


def load_docs(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for p in paths:
        path = Path(p)
        files = (
            sorted(f for f in path.rglob("*") if f.suffix in (".yaml", ".yml", ".json"))
            if path.is_dir()
            else [path]
        )
        for f in files:
            try:
                data = f.read_bytes()
            except OSError as e:
                raise RenderError(str(f), f"cannot be read ({e.strerror})") from None
            for d in load_all(data, str(f)):
                if not isinstance(d, dict):
                    raise RenderError(str(f), "holds a YAML document that is not an object")
                docs.append(d)
    return docs


def claim_to_xr(doc: dict[str, Any]) -> dict[str, Any]:
    """A namespaced claim becomes the XR Crossplane would create for it (claimRef and labels
    set).
    """
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    if not ns:
        return doc
    name = meta.get("name", "")
    xr = {
        "apiVersion": doc.get("apiVersion"),
        "kind": "X" + str(doc.get("kind", "")),
        "metadata": {
            "name": name,
            "labels": {
                **(meta.get("labels") or {}),
                "crossplane.io/claim-name": name,
                "crossplane.io/claim-namespace": ns,
            },
        },
        "spec": {
            **(doc.get("spec") or {}),
            "claimRef": {
                "apiVersion": doc.get("apiVersion"),
                "kind": doc.get("kind"),
                "name": name,
                "namespace": ns,
            },
        },
    }
    if "status" in doc:
        xr["status"] = doc["status"]
    return xr


def our_step(comp: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    steps = ((comp.get("spec") or {}).get("pipeline")) or []
    ours = [
        s
        for s in steps
        if str((s.get("input") or {}).get("apiVersion", "")).startswith(INPUT_GROUP + "/")
    ]
    if len(ours) != 1:
        raise RenderError(
            where,
            f"needs exactly one pipeline step whose input is a {INPUT_GROUP} Policy, found "
            f"{len(ours)}",
        )
    return ours[0]


def input_from_composition(comp: Mapping[str, Any], where: str) -> dict[str, Any]:
    return dict(our_step(comp, where)["input"])


def step_credentials(
    step: Mapping[str, Any], secrets: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The step's ``credentials[]`` resolved as Crossplane does: each name gets the Secret its
    ``secretRef`` names (by namespace and name), renamed to the credential's name.
    """
    out = []
    secrets = list(secrets)
    for cred in step.get("credentials") or []:
        ref = cred.get("secretRef") or {}
        for sec in secrets:
            meta = sec.get("metadata") or {}
            if meta.get("name") == ref.get("name") and meta.get(
                "namespace", ref.get("namespace")
            ) == ref.get("namespace"):
                out.append({**sec, "metadata": {**meta, "name": cred.get("name")}})
    return out


def _credentials(docs: Iterable[Mapping[str, Any]]) -> dict[str, fnv1.Credentials]:
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    out: dict[str, fnv1.Credentials] = {}
    for d in docs:
        name = (d.get("metadata") or {}).get("name", "")
        data = {k: base64.b64decode(v) for k, v in (d.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (d.get("stringData") or {}).items()})
        out[name] = fnv1.Credentials(credential_data=fnv1.CredentialData(data=data))
    return out


def _matches(doc: Mapping[str, Any], sel: fnv1.ResourceSelector) -> bool:
    meta = doc.get("metadata") or {}
    if doc.get("apiVersion") != sel.api_version or doc.get("kind") != sel.kind:
        return False
    if sel.namespace and meta.get("namespace") != sel.namespace:
        return False
    if sel.HasField("match_name"):
        return meta.get("name") == sel.match_name
    labels = meta.get("labels") or {}
    return all(labels.get(k) == v for k, v in sel.match_labels.labels.items())


@dataclass
class Rendered:
    xr: dict[str, Any]
    resources: list[dict[str, Any]]
    results: list[fnv1.Result] = field(default_factory=list)
    fatal: fnv1.Result | None = None
    composite_ready: bool | None = None  # the function's override of the XR's readiness
    unready: list[str] = field(default_factory=list)  # composed keys not READY_TRUE

    def yaml(self) -> str:
        return dump_yaml([self.xr, *self.resources])


async def render(
    xr: dict[str, Any],
    function_input: Mapping[str, Any] | None,
    *,
    observed: Iterable[Mapping[str, Any]] = (),
    required: Iterable[Mapping[str, Any]] = (),
    credentials: Iterable[Mapping[str, Any]] = (),
    runner: FunctionRunner | None = None,
) -> Rendered:
    from crossplane.function import resource as sdkresource
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    from function.edge.fn import FunctionRunner

    runner = runner or FunctionRunner()
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "sack8s-render"
    sdkresource.update(req.observed.composite, xr)
    for obj in observed:
        key = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESOURCE_NAME)
        if key:
            sdkresource.update(req.observed.resources[key], dict(obj))
    if function_input is not None:
        req.input.update(dict(function_input))
    for name, cred in _credentials(credentials).items():
        req.credentials[name].CopyFrom(cred)
    required = list(required)
    rsp = fnv1.RunFunctionResponse()
    for _ in range(MAX_REQUIREMENT_ROUNDS):
        rsp = await runner.RunFunction(req, None)
        wanted = rsp.requirements.resources
        if all(k in req.required_resources for k in wanted):
            break
        for k, sel in wanted.items():
            items = [d for d in required if _matches(d, sel)]
            req.required_resources[k].CopyFrom(fnv1.Resources(items=[_resource(d) for d in items]))
    fatal = next((r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)
    out_xr = {
        "apiVersion": xr.get("apiVersion"),
        "kind": xr.get("kind"),
        "metadata": {"name": (xr.get("metadata") or {}).get("name")},
    }
    status = to_dict(rsp.desired.composite.resource).get("status")
    if status:
        out_xr["status"] = status
    if rsp.conditions:
        conds = [
            {
                "type": c.type,
                "status": fnv1.Status.Name(c.status).removeprefix("STATUS_CONDITION_").title(),
                "reason": c.reason,
                "message": c.message,
            }
            for c in rsp.conditions
        ]
        out_xr.setdefault("status", {})["conditions"] = conds
    resources = []
    for key in sorted(rsp.desired.resources):
        obj = to_dict(rsp.desired.resources[key].resource)
        obj.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_RESOURCE_NAME] = key
        resources.append(obj)
    override = {fnv1.READY_TRUE: True, fnv1.READY_FALSE: False}.get(rsp.desired.composite.ready)
    unready = sorted(k for k, r in rsp.desired.resources.items() if r.ready != fnv1.READY_TRUE)
    return Rendered(out_xr, resources, list(rsp.results), fatal, override, unready)


def _resource(doc: Mapping[str, Any]) -> fnv1.Resource:
    from crossplane.function import resource as sdkresource
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    r = fnv1.Resource()
    sdkresource.update(r, dict(doc))
    return r


ANNOTATION_COMPOSITE = "crossplane.io/composite"
CLAIM_LABELS = ("crossplane.io/claim-name", "crossplane.io/claim-namespace")


def composed_metadata(
    xr: Mapping[str, Any], resources: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The composed objects with the metadata Crossplane (and ``crossplane render``) adds.

    As crank v2.2.4's ``SetComposedResourceMetadata``: ``generateName`` ``<xr>-`` when the
    object has no name, the XR's namespace for a namespaced XR, the ``crossplane.io/composite``
    label (the XR's own composite label for a nested XR), the claim labels, and the XR as
    controller owner (``uid`` empty: the XR is not stored anywhere). The function never sets
    these itself: Crossplane does, on every composed object.
    """
    meta = xr.get("metadata") or {}
    xr_labels = meta.get("labels") or {}
    prefix = xr_labels.get(ANNOTATION_COMPOSITE) or meta.get("name", "")
    claim = (xr.get("spec") or {}).get("claimRef") or {}
    if all(xr_labels.get(k) for k in CLAIM_LABELS):
        claim_labels = {k: xr_labels[k] for k in CLAIM_LABELS}
    elif claim:
        claim_labels = {
            "crossplane.io/claim-namespace": claim.get("namespace", ""),
            "crossplane.io/claim-name": claim.get("name", ""),
        }
    else:
        claim_labels = {}
    owner = {
        "apiVersion": xr.get("apiVersion"),
        "kind": xr.get("kind"),
        "name": meta.get("name", ""),
        "uid": str(meta.get("uid", "")),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    out = []
    for obj in resources:
        o = dict(obj)
        m = dict(o.get("metadata") or {})
        if not m.get("name") and not m.get("generateName"):
            m["generateName"] = f"{prefix}-"
        if meta.get("namespace"):
            m["namespace"] = meta["namespace"]
        m["labels"] = {**(m.get("labels") or {}), ANNOTATION_COMPOSITE: prefix, **claim_labels}
        refs = [
            r
            for r in m.get("ownerReferences") or []
            if not (isinstance(r, Mapping) and r.get("controller"))
        ]
        m["ownerReferences"] = [*refs, owner]
        o["metadata"] = m
        out.append(o)
    return out


def result_documents(results: Iterable[fnv1.Result], step: str) -> list[dict[str, Any]]:
    """Warning and Normal results as ``crossplane render -r`` prints them (crank v2.2.4)."""
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1

    return [
        {
            "apiVersion": "render.crossplane.io/v1beta1",
            "kind": "Result",
            "step": step,
            "severity": fnv1.Severity.Name(r.severity),
            "message": r.message,
        }
        for r in results
        if r.severity != fnv1.SEVERITY_FATAL
    ]


CONDITION_TIME = "2024-01-01T00:00:00Z"  # crank's conditionTime(): a fixed, required timestamp


def crossplane_xr(rendered: Rendered) -> dict[str, Any]:
    """The XR as ``crossplane render`` prints it: its ``Ready`` condition first (Available, or
    Creating while a composed object is not ready: crank v2.2.4's rule, honouring the
    function's composite readiness), then the function's conditions, every one stamped with
    crank's fixed ``lastTransitionTime``.
    """
    if rendered.composite_ready is False:
        ready: dict[str, Any] = {"type": "Ready", "status": "False", "reason": "Creating"}
    elif rendered.composite_ready is None and rendered.unready:
        first = rendered.unready[:3]
        more = len(rendered.unready) - len(first)
        names = ", ".join(first) + (f", and {more} more" if more else "")
        ready = {
            "type": "Ready",
            "status": "False",
            "reason": "Creating",
            "message": f"Unready resources: {names}",
        }
    else:
        ready = {"type": "Ready", "status": "True", "reason": "Available"}
    xr = dict(rendered.xr)
    status = dict(xr.get("status") or {})
    conditions = [ready, *(status.get("conditions") or [])]
    status["conditions"] = [
        {**{k: v for k, v in c.items() if v != ""}, "lastTransitionTime": CONDITION_TIME}
        for c in conditions
    ]
    xr["status"] = status
    return xr
