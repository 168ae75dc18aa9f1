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


DEFAULT_TENANT_PATTERN = r"^{claimNamespace}(--[a-z0-9]+(-[a-z0-9]+)*)?$"
DEFAULT_TENANT_LABEL = "sack8s.io/tenant"


class NamespacePolicy(Model):
    """Which target namespaces claims may name, create or adopt."""

    allowPattern: str = Field(
        default=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Regular expression (full match) every target namespace must match, whatever "
        "its mode; {claimNamespace} (the claim's tenant) and {claimName} are replaced, "
        "regex-escaped.",
    )
    tenantPattern: str = Field(
        default=DEFAULT_TENANT_PATTERN,
        description="Regular expression (full match) for the names a claim may create (mode "
        "create, or adopt of a namespace that does not exist yet); {claimNamespace} is the claim's "
        "tenant (its namespace), {claimName} its name, both regex-escaped. The default, "
        "<tenant>--<suffix> with no '--' in the suffix, gives every name exactly one tenant.",
    )
    acceptAmbiguousPattern: bool = Field(
        default=False,
        description="Accept a tenantPattern or allowPattern that does not start with "
        "{claimNamespace} followed by the separator '--' (so one name could fit two tenants). "
        "Off by default: such a policy is refused. When on, every claim gets a Warning naming "
        "the ambiguity.",
    )
    tenantLabel: str = Field(
        default=DEFAULT_TENANT_LABEL,
        description="Label ops put on a namespace they hand to a tenant (value: the tenant, i.e. "
        "the claims' namespace). existing and adopt reach only the claim's own namespace and "
        "namespaces carrying this label with the claim's tenant; created namespaces get it too.",
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        max_length=316,
    )
    forbidden: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FORBIDDEN),
        description="Names or shell-style patterns (kube-*) no claim may target. The defaults "
        "always apply in addition to this list.",
    )
    allowAdopt: bool = Field(
        default=False,
        description="Whether claims may adopt existing namespaces (only their tenant's, never one "
        "another claim owns, never the claim's own namespace; deleting the claim deletes an "
        "adopted namespace).",
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
    """Where the per-claim Flux and OCM objects live."""

    pattern: str = Field(
        default="sack8s-{claim}",
        description="Name of the per-claim deploy namespace; {claim} (exactly once) becomes <claim "
        "namespace>-<claim name> cut to fit, then '-' and a 100-bit hash of both, so the name is "
        "unique per claim and at most 63 characters. Target namespaces matching the pattern (with "
        "{claim} as a wildcard) are reserved: no claim may create or use them.",
    )
    shared: str | None = Field(
        default=None,
        description="One fixed, ops-owned deploy namespace for every claim instead (not composed). "
        "No deployer gets any right in it; Helm keeps release state in the claim's first target "
        "namespace instead.",
    )


class RegistryPolicy(Model):
    """An OCM repository host claims may name, and how the function reaches it."""

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


class ImageRegistryPolicy(Model):
    """A registry the component's images may be pulled from."""

    host: str = Field(
        description="Registry host[:port] images may be pulled from (exact match).", min_length=1
    )
    pullCredential: bool = Field(
        default=False,
        description="Key the claim's credentials.pull to this host in the pull secret. Never set "
        "it for a registry ops do not run: the kubelet hands the credential to whoever serves the "
        "host.",
    )


class MirrorPolicy(Model):
    """A local copy served in place of an OCM repository (offline render)."""

    repository: str = Field(description="OCM repository reference as claims write it.")
    path: str = Field(
        description="Local CTF or component directory served instead (offline render); relative "
        "paths are resolved from the working directory of the function."
    )


class SecretStorePolicy(Model):
    """A secret store claims may read from, and the keys they may read."""

    name: str
    kind: Literal["SecretStore", "ClusterSecretStore"] = "ClusterSecretStore"
    remoteKeyPrefixes: list[str] = Field(
        default_factory=list,
        description="Remote keys claims may read must lie under one of these, compared in whole "
        "'/'-separated segments (apps/team-a covers apps/team-a/db, never apps/team-ab/db; with a "
        "trailing '/', only keys below it); {claimNamespace} (the claim's tenant) and {claimName} "
        "are replaced. Keys are plain ASCII (letters, digits, - _ . + = @ :), no empty, '.' or "
        "'..' segments. Empty: no key is allowed.",
    )


class RbacPolicy(Model):
    """The deployer's rights, and the extra rules claims may ask for."""

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
    """How often Flux retries a failed Helm action."""

    retries: int = 3


class FluxInstall(Model):
    """Flux's Helm install settings."""

    strategy: Literal["RemediateOnFailure", "RetryOnFailure"] = "RetryOnFailure"
    crds: Literal["Skip", "Create", "CreateReplace"] = "Create"
    disableWait: bool = False
    remediation: Remediation | None = None


class FluxUpgrade(Model):
    """Flux's Helm upgrade settings."""

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
    """A Secret, by name."""

    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253)


class OcmVerification(Model):
    """One signature the function verifies before composing anything (and the OCM Component
    verifies, as its ``spec.verify[]``, when OCM objects are composed).
    """

    signature: str = Field(
        min_length=1,
        max_length=253,
        description="Name of the signature in the component descriptor.",
    )
    publicKey: str | None = Field(
        default=None,
        max_length=65536,
        description="PEM RSA public key or certificate (not secret). The function verifies the "
        "signature with it; composed base64-encoded as the Component's verify[].value, so it "
        "works in every deploy namespace.",
    )
    secretRef: SecretName | None = Field(
        default=None,
        description="Refused: the function verifies every signature itself before it composes "
        "anything, and a Secret in a deploy namespace cannot be read before that namespace is "
        "composed. Public keys are not secret: give the key as publicKey.",
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> OcmVerification:
        if self.secretRef is not None:
            raise ValueError(
                f"signature {self.signature!r}: secretRef is not supported: the function "
                "verifies signatures itself before composing anything and reads the key from "
                "the policy (a Secret in the deploy namespace cannot exist before the first "
                "reconcile composes that namespace); public keys are not secret, give it as "
                "publicKey"
            )
        if self.publicKey is None:
            raise ValueError(f"signature {self.signature!r}: set publicKey")
        if not self.publicKey.strip().startswith("-----BEGIN "):
            raise ValueError(
                f"signature {self.signature!r}: publicKey must be PEM (-----BEGIN ...)"
            )
        return self


class OcmPolicy(Model):
    """Whether OCM objects are composed, and what they must verify before Flux deploys."""

    enabled: bool = Field(default=True, description="Compose OCM delivery.ocm.software objects.")
    gate: bool = Field(
        default=True,
        description="Compose Flux objects only once the OCM Component is Ready at the resolved "
        "version and reports the normalised descriptor digest the function computed (and "
        "verifies every verify[] signature); until then, Flux objects keep what they deploy.",
    )
    interval: str = "10m"
    verify: list[OcmVerification] = Field(
        default_factory=list,
        description="Signatures every component must carry. The function verifies each one "
        "(RSASSA-PKCS1-V1_5 or RSASSA-PSS over the descriptor digest it computes) before "
        "composing anything, with or without OCM objects; the OCM Component verifies them too "
        "(Component spec.verify) and, with the gate, Flux waits for it.",
    )

    @model_validator(mode="after")
    def _unique_signatures(self) -> OcmPolicy:
        names = [v.signature for v in self.verify]
        if len(set(names)) != len(names):
            raise ValueError("verify lists a signature twice")
        return self


class SourcePolicy(Model):
    """How strictly the component's content must be pinned by digest."""

    allowUnpinnedImages: bool = Field(
        default=False,
        description="Accept an image with neither digest nor resource digest (Warning instead of "
        "Fatal).",
    )
    requireDigests: bool = Field(
        default=True,
        description="Refuse (Fatal) a resource the function reads and deploys (the deployable, the "
        "ConfigData) that declares no digest, since its content cannot be verified; false: a "
        "Warning. A declared digest is always checked: a mismatch is always Fatal.",
    )


class ConfigDataPolicy(Model):
    """How hard the ConfigData's findings fail a claim: Warning or Fatal."""

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
    imagePairs: Literal["Fatal", "Warning"] = Field(
        default="Fatal",
        description="A ConfigData whose localization rules write an invalid or unlocalized "
        "reference into a repository:tag pair (a bare digest as the tag; a repository without "
        "the registry of an image that has one, and no registry rule): Fatal, naming the rule, "
        "or Warning (while teams fix their ConfigData).",
    )
    duplicateKeys: Literal["Warning", "Fatal"] = Field(
        default="Warning",
        description="A ConfigData map that defines one key twice: a Warning naming both lines "
        "(the later value is used, as ocm-controller v1 did), or a Fatal (strict).",
    )


class Policy(Model):
    """Function input (sack8s.fn.crossplane.io/v1beta1 Policy)."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    namespaces: NamespacePolicy = Field(default_factory=NamespacePolicy)
    deployNamespace: DeployNamespacePolicy = Field(default_factory=DeployNamespacePolicy)
    registries: list[RegistryPolicy] = Field(
        default_factory=list, description="OCM repositories (component registries) claims may name."
    )
    imageRegistries: list[ImageRegistryPolicy] | None = Field(
        default=None,
        description="Registries the component's images may come from. Default: the hosts in "
        "registries, each accepting the pull credential. An image from any other host is refused.",
    )
    mirrors: list[MirrorPolicy] = Field(default_factory=list)
    secretStores: list[SecretStorePolicy] = Field(default_factory=list)
    rbac: RbacPolicy = Field(default_factory=RbacPolicy)
    flux: FluxPolicy = Field(default_factory=FluxPolicy)
    ocm: OcmPolicy = Field(default_factory=OcmPolicy)
    source: SourcePolicy = Field(default_factory=SourcePolicy)
    configData: ConfigDataPolicy = Field(default_factory=ConfigDataPolicy)
