"""XRDs and the function-input CRD, generated from the pydantic models.

``sack8s xrd`` prints these and ``package/`` holds committed copies; a test regenerates
them and fails on any drift, so the schema ops install is always the one the function
validates against. The API group is the ops team's choice; the function never reads it.
"""

from __future__ import annotations

from typing import Any

from function.api.claim import Spec, Status
from function.api.policy import INPUT_GROUP, INPUT_KIND, INPUT_VERSION, Policy
from function.api.schema import structural

DEFAULT_GROUP = "platform.example.org"
VERSION = "v1alpha1"
KIND = "SACK8sComponentVersion"
PLURAL = "sack8scomponentversions"
_CATEGORIES = ("crossplane", "sack8s")

_COLUMNS = [
    {"name": "COMPONENT", "type": "string", "jsonPath": ".spec.component.name"},
    {"name": "VERSION", "type": "string", "jsonPath": ".status.component.version"},
    {
        "name": "SYNCED",
        "type": "string",
        "jsonPath": ".status.conditions[?(@.type=='Synced')].status",
    },
    {
        "name": "READY",
        "type": "string",
        "jsonPath": ".status.conditions[?(@.type=='Ready')].status",
    },
    {"name": "BLOCKED-BY", "type": "string", "jsonPath": ".status.blockedBy.kind", "priority": 1},
    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _xr_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": structural(Spec), "status": structural(Status)},
    }


def _version() -> dict[str, Any]:
    return {
        "name": VERSION,
        "served": True,
        "referenceable": True,
        "schema": {"openAPIV3Schema": _xr_schema()},
        "additionalPrinterColumns": _COLUMNS,
    }


def _xrd(api_version: str, scope: str, group: str, prefix: str, **extra: Any) -> dict[str, Any]:
    """What both XRDs share: one version generated from the models, the names (the XR kind
    and plural with ``prefix``), and ``extra`` spec fields after the names.
    """
    plural = f"{prefix.lower()}{PLURAL}"
    return {
        "apiVersion": f"apiextensions.crossplane.io/{api_version}",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "scope": scope,
            "group": group,
            "names": {"kind": f"{prefix}{KIND}", "plural": plural, "categories": list(_CATEGORIES)},
            **extra,
            "versions": [_version()],
        },
    }


def xrd_cluster(group: str = DEFAULT_GROUP) -> dict[str, Any]:
    """Crossplane v2 XRD, ``scope: Cluster`` (Namespaces can only be composed by cluster-scoped
    XRs).
    """
    return _xrd("v2", "Cluster", group, "")


def xrd_legacy_claims(group: str = DEFAULT_GROUP) -> dict[str, Any]:
    """v1 XRD with ``claimNames`` (``scope: LegacyCluster``) for catalogues built on claims.

    The XR kind gets an ``X`` prefix so the claim keeps the catalogue name. Install either
    this or :func:`xrd_cluster` in one group, not both (the kinds would clash).
    """
    return _xrd("v1", "LegacyCluster", group, "X", claimNames={"kind": KIND, "plural": PLURAL})


def input_crd() -> dict[str, Any]:
    """CRD for the function input, so ``crossplane beta validate`` checks Composition steps."""
    schema = structural(Policy)
    props = dict(schema["properties"])
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    plural = INPUT_KIND.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{INPUT_GROUP}"},
        "spec": {
            "group": INPUT_GROUP,
            "names": {
                "kind": INPUT_KIND,
                "listKind": f"{INPUT_KIND}List",
                "plural": plural,
                "singular": INPUT_KIND.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": INPUT_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": schema.get("description", ""),
                            "properties": props,
                        }
                    },
                }
            ],
        },
    }


_COMPOSED_KINDS = [
    ("", ["namespaces", "serviceaccounts"]),
    ("rbac.authorization.k8s.io", ["roles", "rolebindings"]),
    ("external-secrets.io", ["externalsecrets"]),
    ("delivery.ocm.software", ["repositories", "components", "resources"]),
    ("source.toolkit.fluxcd.io", ["ocirepositories"]),
    ("helm.toolkit.fluxcd.io", ["helmreleases"]),
    ("kustomize.toolkit.fluxcd.io", ["kustomizations"]),
    ("protection.crossplane.io", ["usages", "clusterusages"]),
]
_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]


def crossplane_cluster_role(policy: Policy | None = None) -> dict[str, Any]:
    """The ClusterRole Crossplane needs to apply what the function composes.

    Aggregated into Crossplane's own role. Besides the composed kinds it holds every
    permission the composed deployer Roles grant: Kubernetes refuses to let Crossplane create
    a Role granting rights it does not hold itself (escalation prevention), and giving it
    ``escalate``/``bind`` instead would let any Composition grant anything.
    """
    policy = policy or Policy()
    rules = [{"apiGroups": [g], "resources": r, "verbs": list(_RW)} for g, r in _COMPOSED_KINDS]
    granted = list(policy.rbac.deployerRules) + list(policy.rbac.allowedExtraRules)
    rules.extend(r.to_rbac() for r in granted)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "crossplane:function-sack8s",
            "labels": {"rbac.crossplane.io/aggregate-to-crossplane": "true"},
        },
        "rules": rules,
    }
