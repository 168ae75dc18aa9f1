"""The function input: the ops team's policy, set in the Composition pipeline step.

Claims are written by service teams; this input is written by ops. Every check that keeps a
claim from widening access (namespaces, registries, secret stores, RBAC) reads its limits
from here, and no claim field can loosen them. Defaults are safe: nothing is allowed that
ops did not list, except what every deployment needs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from function.api.claim import DNS_SUBDOMAIN, Model, PolicyRule

INPUT_GROUP = "sack8s.fn.crossplane.io"
INPUT_VERSION = "v1beta1"
INPUT_KIND = "Policy"

DEFAULT_FORBIDDEN = [
    "kube-*",
    "default",
    "crossplane-system",
    "flux-system",
    "external-secrets",
    "ocm-system",
]

_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]

# What charts normally ship. Explicit verbs, no wildcards, nothing that grants more access
# (no escalate/bind/impersonate, no namespaces, no serviceaccounts/token, no RBAC kinds).
DEFAULT_DEPLOYER_RULES = [
    PolicyRule(
        apiGroups=["apps"],
        resources=["deployments", "statefulsets", "daemonsets", "replicasets"],
        verbs=_RW,
    ),
    PolicyRule(apiGroups=["batch"], resources=["jobs", "cronjobs"], verbs=_RW),
    PolicyRule(
        apiGroups=[""],
        resources=[
            "services",
            "configmaps",
            "secrets",
            "serviceaccounts",
            "persistentvolumeclaims",
        ],
        verbs=_RW,
    ),
    PolicyRule(
        apiGroups=["networking.k8s.io"], resources=["ingresses", "networkpolicies"], verbs=_RW
    ),
    PolicyRule(apiGroups=["policy"], resources=["poddisruptionbudgets"], verbs=_RW),
    PolicyRule(apiGroups=["autoscaling"], resources=["horizontalpodautoscalers"], verbs=_RW),
    PolicyRule(
        apiGroups=[""], resources=["pods", "events", "endpoints"], verbs=["get", "list", "watch"]
    ),
]


class NamespacePolicy(Model):
    allowPattern: str = Field(
        default=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Regular expression (full match) every target namespace must match.",
    )
    forbidden: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FORBIDDEN),
        description="Names or shell-style patterns (kube-*) no claim may target. The defaults "
        "always apply in addition to this list.",
    )
    allowAdopt: bool = Field(
        default=False, description="Whether claims may adopt existing namespaces."
    )
    podSecurity: dict[str, str] = Field(
        default_factory=lambda: {
            "enforce": "restricted",
            "enforce-version": "latest",
            "audit": "restricted",
            "warn": "restricted",
        },
        description="Pod Security Admission labels (pod-security.kubernetes.io/<key>) on created "
        "namespaces.",
    )


class DeployNamespacePolicy(Model):
    pattern: str = Field(
        default="sack8s-{claim}",
        description="Name of the per-claim deploy namespace; {claim} is <claim namespace>-<claim "
        "name> "
        "(or the XR name). Truncated with a hash to 63 characters.",
    )
    shared: str | None = Field(
        default=None,
        description="One fixed, ops-owned deploy namespace for every claim instead (not composed).",
    )


class RegistryPolicy(Model):
    host: str = Field(description="Registry host[:port] claims may name.", min_length=1)
    plainHTTP: bool = Field(
        default=False, description="Allow plain HTTP to this host (never for claims to choose)."
    )
    caBundle: str | None = Field(
        default=None, description="PEM CA bundle the function trusts for this host."
    )
    certSecretName: str | None = Field(
        default=None,
        description="Secret (ca.crt) in the deploy namespace for Flux's certSecretRef, for a "
        "private CA.",
    )
    credentials: str | None = Field(
        default=None,
        description="Name of the pipeline step credentials entry the function uses for this host.",
    )


class MirrorPolicy(Model):
    repository: str = Field(description="OCM repository reference as claims write it.")
    path: str = Field(
        description="Local CTF or component directory served instead (offline render); relative "
        "paths are resolved from the working directory of the function."
    )


class SecretStorePolicy(Model):
    name: str
    kind: Literal["SecretStore", "ClusterSecretStore"] = "ClusterSecretStore"
    remoteKeyPrefixes: list[str] = Field(
        default_factory=list,
        description="Remote keys claims may read must start with one of these; {claimNamespace} "
        "and {claimName} are replaced. Empty: no key is allowed.",
    )


class RbacPolicy(Model):
    deployerRules: list[PolicyRule] = Field(default_factory=lambda: list(DEFAULT_DEPLOYER_RULES))
    allowedExtraRules: list[PolicyRule] = Field(
        default_factory=list,
        description="Claims' extraRules must each be covered by one of these (groups, resources, "
        "verbs).",
    )
    helmPullSecretsPath: str = Field(
        default="imagePullSecrets",
        description="Helm values path that receives [{name: <pull secret>}].",
    )


class Remediation(Model):
    retries: int = 3


class FluxInstall(Model):
    strategy: Literal["RemediateOnFailure", "RetryOnFailure"] = "RetryOnFailure"
    crds: Literal["Skip", "Create", "CreateReplace"] = "Create"
    disableWait: bool = False
    remediation: Remediation | None = None


class FluxUpgrade(Model):
    strategy: Literal["RemediateOnFailure", "RetryOnFailure"] = "RetryOnFailure"
    crds: Literal["Skip", "Create", "CreateReplace"] = "CreateReplace"
    remediation: Remediation | None = None


class FluxPolicy(Model):
    """Defaults follow Flux's recommended settings (HelmRelease docs)."""

    interval: str = "10m"
    sourceInterval: str = "5m"
    retryInterval: str = "2m"
    timeout: str = "5m"
    prune: bool = True
    wait: bool = False
    driftDetection: Literal["enabled", "warn", "disabled"] = "enabled"
    install: FluxInstall = Field(default_factory=FluxInstall)
    upgrade: FluxUpgrade = Field(default_factory=FluxUpgrade)


class SecretName(Model):
    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253)


class OcmVerification(Model):
    """One signature the OCM Component must verify (its ``spec.verify[]``) before Flux deploys."""

    signature: str = Field(
        min_length=1,
        max_length=253,
        description="Name of the signature in the component descriptor.",
    )
    publicKey: str | None = Field(
        default=None,
        max_length=65536,
        description="PEM public key or certificate (not secret); composed base64-encoded as the "
        "Component's verify[].value, so it works in every deploy namespace.",
    )
    secretRef: SecretName | None = Field(
        default=None,
        description="A Secret in the deploy namespace holding the public key under a key named "
        "like the signature (for a shared deploy namespace, or Secrets ops provision).",
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> "OcmVerification":
        if (self.publicKey is None) == (self.secretRef is None):
            raise ValueError(
                f"signature {self.signature!r}: set exactly one of publicKey and secretRef"
            )
        if self.publicKey is not None and not self.publicKey.strip().startswith("-----BEGIN "):
            raise ValueError(
                f"signature {self.signature!r}: publicKey must be PEM (-----BEGIN ...)"
            )
        return self


class OcmPolicy(Model):
    enabled: bool = Field(default=True, description="Compose OCM delivery.ocm.software objects.")
    gate: bool = Field(
        default=True,
        description="Compose Flux objects only once the OCM Component is Ready at the resolved "
        "version (and verifying every verify[] signature); until then, Flux objects keep what "
        "they deploy.",
    )
    interval: str = "10m"
    verify: list[OcmVerification] = Field(
        default_factory=list,
        description="Signatures the OCM Component verifies (Component spec.verify). The gate "
        "opens only once the Component is Ready with all of them configured. Needs enabled "
        "and gate.",
    )

    @model_validator(mode="after")
    def _verify_needs_the_gate(self) -> "OcmPolicy":
        if self.verify and not (self.enabled and self.gate):
            raise ValueError(
                "verify needs enabled and gate: only the gate makes verification guard what "
                "Flux deploys"
            )
        names = [v.signature for v in self.verify]
        if len(set(names)) != len(names):
            raise ValueError("verify lists a signature twice")
        return self


class SourcePolicy(Model):
    allowUnpinnedImages: bool = Field(
        default=False,
        description="Accept an image with neither digest nor resource digest (Warning instead of "
        "Fatal).",
    )


class ConfigDataPolicy(Model):
    unusedValues: Literal["Warning", "Fatal"] = Field(
        default="Warning",
        description="Claim values that no configuration rule of the ConfigData consumes for the "
        "deployed resource (they land nowhere): a Warning listing them (and "
        "status.configData.unusedValues), or a Fatal.",
    )
    schemaViolations: Literal["Fatal", "Warning"] = Field(
        default="Fatal",
        description="Values that break the ConfigData schema: Fatal (refused) or Warning "
        "(composed, and reported). ocm-controller v1 never enforced the schema; Warning is for "
        "teams migrating.",
    )


class Policy(Model):
    """Function input (sack8s.fn.crossplane.io/v1beta1 Policy)."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    namespaces: NamespacePolicy = Field(default_factory=NamespacePolicy)
    deployNamespace: DeployNamespacePolicy = Field(default_factory=DeployNamespacePolicy)
    registries: list[RegistryPolicy] = Field(default_factory=list)
    mirrors: list[MirrorPolicy] = Field(default_factory=list)
    secretStores: list[SecretStorePolicy] = Field(default_factory=list)
    rbac: RbacPolicy = Field(default_factory=RbacPolicy)
    flux: FluxPolicy = Field(default_factory=FluxPolicy)
    ocm: OcmPolicy = Field(default_factory=OcmPolicy)
    source: SourcePolicy = Field(default_factory=SourcePolicy)
    configData: ConfigDataPolicy = Field(default_factory=ConfigDataPolicy)
