"""The SACK8sComponentVersion API: one source of truth for validation and for the XRD.

The function validates every request against these models (Crossplane does not validate a
claim against anything the function knows), and ``sack8s xrd`` generates the XRD schema from
them, so the API a service team sees and the rules the function enforces cannot drift.

There is deliberately no field that takes a literal secret value: secrets arrive only as
references into secret stores ops allows. Anything inline (``values.inline``) is not
secret and ends up in composed objects and status.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
COMPONENT_NAME = (
    r"^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$"
)


class Model(BaseModel):
    """Strict base: an unknown field is an error naming it, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ComponentRef(Model):
    """Which OCM component version to deploy, and the OCM repository that holds it."""

    name: str = Field(
        description="OCM component name, e.g. acme.org/sack8s/podinfo.",
        pattern=COMPONENT_NAME,
        max_length=255,
    )
    version: str = Field(
        description="Exact version (6.2.0) or a semver range (>=6.2.0 <7, ~6.2, ^6). The resolved "
        "version is reported in status.component.version.",
        min_length=1,
        max_length=128,
    )
    repository: str = Field(
        description="OCM repository reference as the OCM CLI writes it: "
        "oci::https://registry.example.com/base, registry.example.com/base, or "
        "oci::http://host:port/base (plain HTTP only where ops policy allows that host).",
        min_length=1,
        max_length=512,
    )


class ResourceRef(Model):
    """A resource of the component, by OCM identity."""

    name: str = Field(
        description="Resource name in the component descriptor.", min_length=1, max_length=253
    )
    extraIdentity: dict[str, str] = Field(
        default_factory=dict,
        description="Extra identity attributes; needed when several resources share the name.",
    )


class Deployable(Model):
    """The resource Flux deploys, and how."""

    resource: ResourceRef
    flavour: Literal["helm", "kustomize"] | None = Field(
        default=None,
        description="helm (a helmChart resource) or kustomize (a kustomize.ocm.fluxcd.io "
        "resource). Default: taken from the resource type.",
    )
    path: str = Field(
        default="./",
        description="Kustomize only: path inside the resource to build (relative, no '..').",
        max_length=253,
    )
    releaseName: str | None = Field(
        default=None,
        description="Helm only: the Helm release name, e.g. to keep the release a team "
        "deployed before (a DNS label of at most 53 characters). Default: the claim's name "
        "(docs/security.md, 'Helm release names'). Changing it makes Flux uninstall the old "
        "release and install the new one.",
        pattern=DNS_LABEL,
        max_length=53,
    )


class TargetNamespace(Model):
    """A namespace the service is deployed into."""

    name: str = Field(pattern=DNS_LABEL, max_length=63)
    mode: Literal["create", "adopt", "existing"] = Field(
        default="create",
        description="create: compose the Namespace, with a name of the claim's tenant (by default "
        "<claim namespace>--<suffix>; refused when one exists that this claim does not own); "
        "adopt: take over an existing namespace of the tenant no other claim owns (only where ops "
        "policy allows; deleting the claim deletes it); existing: compose only what goes inside a "
        "namespace of the tenant (the claim's own, or one ops labelled for it).",
    )


class ConfigMapValuesRef(Model):
    """Configuration values held in a ConfigMap in the claim's own namespace."""

    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253)
    key: str | None = Field(
        default=None,
        description="Data key holding the values YAML. Default: the only key.",
        max_length=253,
    )


class Values(Model):
    """Configuration values checked against the ConfigData schema. Not secret."""

    inline: dict[str, Any] | None = Field(
        default=None, description="Values, inline (visible in the claim and in composed objects)."
    )
    configMapRef: ConfigMapValuesRef | None = None


class StoreRef(Model):
    """An External Secrets store that ops policy allows."""

    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253)
    kind: Literal["SecretStore", "ClusterSecretStore"] = "ClusterSecretStore"


class RemoteRef(Model):
    """A key in an allowed secret store (checked against the policy's prefixes)."""

    key: str = Field(
        min_length=1,
        max_length=1024,
        description="Key in the secret store: plain ASCII segments (letters, digits, - _ . + = @ "
        ":) joined by '/', under a prefix ops policy allows.",
    )
    property: str | None = Field(default=None, max_length=253)
    version: str | None = Field(default=None, max_length=253)


class SecretData(Model):
    """One Secret key, taken from one remote key (or one of its properties)."""

    secretKey: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    remoteRef: RemoteRef


class ServiceSecret(Model):
    """A Secret the service needs, synchronised by External Secrets from an allowed store."""

    name: str = Field(
        pattern=DNS_SUBDOMAIN, max_length=253, description="Name of the Secret created."
    )
    namespace: str | None = Field(
        default=None,
        pattern=DNS_LABEL,
        max_length=63,
        description="Target namespace. Default: the first.",
    )
    storeRef: StoreRef
    data: list[SecretData] = Field(default_factory=list, max_length=100)
    dataFrom: list[RemoteRef] = Field(
        default_factory=list,
        max_length=20,
        description="Keys whose every property becomes a Secret key.",
    )
    type: str | None = Field(
        default=None, max_length=253, description="Secret type, default Opaque."
    )


class RegistryCredential(Model):
    """A registry credential held in a secret store, turned into a dockerconfigjson Secret."""

    storeRef: StoreRef
    remoteRef: RemoteRef
    format: Literal["usernamePassword", "dockerConfigJson"] = Field(
        default="usernamePassword",
        description="usernamePassword: the remote key has username and password properties; "
        "dockerConfigJson: the remote value is a complete docker config JSON.",
    )
    usernameProperty: str = Field(default="username", max_length=253)
    passwordProperty: str = Field(default="password", max_length=253)


class Credentials(Model):
    """Registry credentials, each held in an allowed secret store."""

    pull: RegistryCredential | None = Field(
        default=None, description="Image pull credential, placed in every target namespace."
    )
    repository: RegistryCredential | None = Field(
        default=None,
        description="Credential Flux and the OCM controllers use to read the OCM repository.",
    )


class PolicyRule(Model):
    """An RBAC rule (explicit names only: ops policy decides which are allowed)."""

    apiGroups: list[str] = Field(max_length=20)
    resources: list[str] = Field(min_length=1, max_length=50)
    verbs: list[str] = Field(min_length=1, max_length=10)
    resourceNames: list[str] = Field(default_factory=list, max_length=50)

    def to_rbac(self) -> dict[str, Any]:
        """The rule as a Role or ClusterRole writes it: the deployer Roles and Crossplane's
        ClusterRole must grant the very same rule, so both take it from here.
        """
        out: dict[str, Any] = {
            "apiGroups": list(self.apiGroups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resourceNames:
            out["resourceNames"] = list(self.resourceNames)
        return out


class Rbac(Model):
    """Extra rights for the deployer, each covered by a rule ops policy allows."""

    extraRules: list[PolicyRule] = Field(
        default_factory=list,
        max_length=20,
        description="Rules added to the deployer Role in every target namespace; each must be "
        "covered by a rule ops policy allows.",
    )


class Spec(Model):
    """SACK8sComponentVersion spec."""

    component: ComponentRef
    deploy: Deployable
    configData: ResourceRef | None = Field(
        default=None,
        description="The resource holding the ConfigData. Default: the one resource of type "
        "configdata.ocm.software, if any.",
    )
    namespaces: list[TargetNamespace] = Field(min_length=1, max_length=50)
    values: Values | None = None
    secrets: list[ServiceSecret] = Field(default_factory=list, max_length=100)
    credentials: Credentials | None = None
    rbac: Rbac | None = None

    @property
    def primary_namespace(self) -> str:
        """The first target namespace: the Flux release targets it, and service secrets and an
        XR without a claim default to it (docs/decisions.md).
        """
        return self.namespaces[0].name


# ----------------------------------------------------------------------------- status
# Deliberately alike (duplicates): the status objects are flat field lists, one model each.


class StatusDigest(Model):
    """A normalised descriptor digest, shaped like the OCM Component's status.component.digest."""

    hashAlgorithm: str
    normalisationAlgorithm: str
    value: str


class StatusComponent(Model):
    """The component version the function resolved and read."""

    name: str | None = None
    constraint: str | None = Field(
        default=None, description="The spec version this resolution answered."
    )
    version: str | None = None
    descriptorDigest: str | None = None
    normalisedDigest: StatusDigest | None = Field(
        default=None,
        description="The OCM normalised digest of the descriptor the function read "
        "(SHA-256, jsonNormalisation/v4alpha1): what the OCM Component must report in "
        "status.component.digest for the gate to open.",
    )
    repository: str | None = None
    resolvedAt: str | None = Field(
        default=None,
        description="When the tag list was last read (RFC 3339), for the re-resolve TTL.",
    )


class StatusImage(Model):
    """An image of the component, with the reference deployed."""

    resource: str
    reference: str
    extraIdentity: dict[str, str] = Field(default_factory=dict)


class StatusSubstitution(Model):
    """One value a ConfigData rule wrote into the deployed configuration."""

    rule: str
    file: str
    document: int = 0
    path: str
    value: str = Field(description="The value written, as JSON when it is not a string.")


class StatusConfigData(Model):
    """What the ConfigData did to the deployed configuration."""

    resource: str | None = None
    substitutions: list[StatusSubstitution] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    unusedValues: list[str] = Field(
        default_factory=list,
        description="Paths of claim values that no configuration rule consumes for the deployed "
        "resource: they reach nothing.",
    )


class StatusBlocked(Model):
    """The composed object that keeps the claim from being ready."""

    kind: str
    name: str
    namespace: str | None = None
    reason: str
    message: str


class StatusPullSecret(Model):
    """The image pull Secret composed from the claim's pull credential."""

    name: str = Field(description="The image pull Secret ESO writes in every target namespace.")
    namespaces: list[str] = Field(default_factory=list)
    # alike by design (duplicates): a described list of paths, as StatusConfigData.unusedValues
    writtenTo: list[str] = Field(
        default_factory=list,
        description="Where the function wrote the Secret's name into the Flux object (the one "
        "value the policy writes rather than a ConfigData rule).",
    )


class StatusDeploy(Model):
    """Where and with what the Flux objects deploy the component."""

    namespace: str | None = None
    serviceAccount: str | None = None
    fluxKind: str | None = None
    fluxName: str | None = None
    version: str | None = Field(
        default=None,
        description="The component version whose source digest and values the Flux objects carry; "
        "while the OCM gate holds a version change it stays at the previous one.",
    )
    pullSecret: StatusPullSecret | None = None


class StatusWarning(Model):
    """A finding that still composes."""

    reason: str
    message: str


class Status(Model):
    """SACK8sComponentVersion status, written by the function."""

    # Field order is the order status is written in (compose/status.py dumps this model).
    component: StatusComponent | None = None
    images: list[StatusImage] = Field(default_factory=list)
    deploy: StatusDeploy | None = None
    configData: StatusConfigData | None = None
    blockedBy: StatusBlocked | None = Field(
        default=None,
        description="The composed object that blocks readiness, and why. Empty when ready.",
    )
    warnings: list[StatusWarning] = Field(
        default_factory=list,
        description="Findings that still compose (e.g. ConfigData warnings), current as of the "
        "last reconcile; each is sent as a Warning event only when it first appears or changes.",
    )
