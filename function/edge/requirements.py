"""What the function needs to read from the cluster: Namespaces and the values ConfigMap.

Crossplane resolves required resources between calls: the function declares them on every
call and learns the result on the next. A requirement whose name is absent from the request
is not resolved yet; present with no items means the object does not exist. Only then can
``create`` refuse a Namespace someone else owns, ``existing`` and ``adopt`` insist it is the
claim's tenant's, and the deploy namespace be refused when it was derived for another claim.

The values ConfigMap is always read from the claim's own namespace (for an XR without a
claim, from its first target namespace): the API has no namespace field for it, so a claim
cannot read another team's data through the function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.api.claim import Spec
from function.api.policy import Policy
from function.cache import Memos
from function.compose import names
from function.compose.admission import owned_deploy_namespace
from function.compose.identity import Identity, owner_of
from function.configdata.flatvalues import flat_values, is_flat, not_flat_reason
from function.edge.structs import to_dict
from function.errors import InvalidClaim, InvalidValues, PolicyViolation
from function.yamlio import load_one

VALUES = "values-configmap"
RELEASES = "helm-releases"
HELM_API = "helm.toolkit.fluxcd.io/v2"


def namespace_requirement(name: str) -> str:
    return f"namespace-{name}"


def values_namespace(spec: Spec, identity: Identity) -> str:
    return identity.namespace or spec.primary_namespace


@dataclass
class Requirements:
    namespaces: list[str]
    configmap: tuple[str, str] | None  # (namespace, name)
    release: str | None = None  # LABEL_RELEASE of a release name the claim chose

    def declare(self, rsp: fnv1.RunFunctionResponse) -> None:
        for ns in self.namespaces:
            response.require_resources(
                rsp, namespace_requirement(ns), "v1", "Namespace", match_name=ns
            )
        if self.configmap:
            ns, name = self.configmap
            response.require_resources(
                rsp, VALUES, "v1", "ConfigMap", match_name=name, namespace=ns
            )
        if self.release:  # every namespace: whoever else installs this release name there
            response.require_resources(
                rsp,
                RELEASES,
                HELM_API,
                "HelmRelease",
                match_labels={names.LABEL_RELEASE: self.release},
            )

    def collect(self, req: fnv1.RunFunctionRequest) -> Resolved | None:
        """What the cluster holds, or None while any requirement is still unresolved."""
        found: dict[str, Mapping[str, Any] | None] = {}
        for ns in self.namespaces:
            key = namespace_requirement(ns)
            if key not in req.required_resources:
                return None
            items = req.required_resources[key].items
            found[ns] = to_dict(items[0].resource) if items else None
        configmap = None
        if self.configmap:
            if VALUES not in req.required_resources:
                return None
            items = req.required_resources[VALUES].items
            configmap = to_dict(items[0].resource) if items else None
        releases: list[Mapping[str, Any]] = []
        if self.release:
            if RELEASES not in req.required_resources:
                return None
            releases = [to_dict(i.resource) for i in req.required_resources[RELEASES].items]
        return Resolved(found, configmap, self.configmap, releases=releases)


@dataclass
class Resolved:
    namespaces: dict[str, Mapping[str, Any] | None]
    configmap: Mapping[str, Any] | None
    configmap_ref: tuple[str, str] | None = None
    _values: Any = field(default=None, repr=False)
    releases: list[Mapping[str, Any]] = field(default_factory=list)

    def check_release_name(self, spec: Spec, identity: Identity) -> None:
        """A release name the claim chose is refused while another claim's HelmRelease installs
        that name into the same target namespace (docs/security.md, "Helm release names").
        """
        for obj in self.releases:
            if identity.owns(obj):
                continue
            meta = obj.get("metadata") or {}
            where = f"{meta.get('namespace')}/{meta.get('name')}"
            who = owner_of(obj) or "another owner"
            raise PolicyViolation(
                "spec.deploy.releaseName",
                f"release {spec.deploy.releaseName!r} in namespace {spec.primary_namespace!r} "
                f"is already installed by {who} (HelmRelease {where}): choose another name",
            )

    def values(
        self,
        spec: Spec,
        identity: Identity,
        schema: Callable[[], Any] | None = None,
        memos: Memos | None = None,
    ) -> Mapping[str, Any] | None:
        """The claim's configuration values: inline, or parsed from its ConfigMap.

        ``schema`` gives the ConfigData schema (only asked for when a ConfigMap with no key
        named may be a flat one, :mod:`function.configdata.flatvalues`).
        """
        v = spec.values
        if v is None:
            return None
        if v.inline is not None and v.configMapRef is not None:
            raise InvalidClaim("spec.values", "set either inline or configMapRef, not both")
        if v.inline is not None:
            return v.inline
        if v.configMapRef is None:
            return None
        ns, name = self.configmap_ref or (values_namespace(spec, identity), v.configMapRef.name)
        where = f"spec.values.configMapRef (ConfigMap {ns}/{name})"
        if self.configmap is None:
            raise InvalidValues(where, "not found")
        data = self.configmap.get("data") or {}
        key = v.configMapRef.key
        if key is None:
            the_schema = schema() if schema is not None and data else None
            if the_schema is not None and is_flat(data, the_schema):
                return flat_values(data, the_schema)
            if len(data) != 1:
                flat = (
                    f"; a flat ConfigMap (one key per value) needs every key to be a top-level "
                    f"scalar property of the ConfigData schema: {not_flat_reason(data, the_schema)}"
                    if data
                    else ""
                )
                raise InvalidValues(
                    where, f"has {len(data)} data keys; set spec.values.configMapRef.key{flat}"
                )
            key = next(iter(data))
        if key not in data:
            shown = ", ".join(sorted(data)[:10]) or "none"
            raise InvalidValues(where, f"has no data key {key!r} (keys: {shown})")
        parsed = load_one(data[key], f"{where} key {key}", memos=memos)
        if not isinstance(parsed, dict):
            raise InvalidValues(f"{where} key {key}", "must hold a YAML mapping of values")
        return parsed


def requirements_for(spec: Spec, identity: Identity, policy: Policy | None = None) -> Requirements:
    """The target Namespaces, the deploy namespace the claim composes (with ``policy``), the
    tenant namespace a claimless XR's ``sack8s.io/tenant`` label names, and the values
    ConfigMap.
    """
    cm = None
    if spec.values and spec.values.configMapRef:
        cm = (values_namespace(spec, identity), spec.values.configMapRef.name)
    wanted = {ns.name for ns in spec.namespaces}
    if identity.tenant_from_label:  # a claimless XR's tenant label must name a live namespace
        wanted.add(identity.tenant)
    deploy = owned_deploy_namespace(policy, identity) if policy is not None else None
    if deploy:
        wanted.add(deploy)
    chosen = spec.deploy.releaseName
    release = names.release_label(spec.primary_namespace, chosen) if chosen else None
    return Requirements(sorted(wanted), cm, release)
