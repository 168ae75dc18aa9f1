"""What every builder needs to know about one claim, computed once.

Builders (one module per composed kind) take this and return plain dicts; they never read
the request or the policy model directly for anything this already decided (names,
namespaces, labels), so a name is derived in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from function.api.claim import Spec, TargetNamespace
from function.api.policy import Policy, RegistryPolicy
from function.compose import names
from function.compose.identity import Identity
from function.ocm.model import Repository


@dataclass(frozen=True)
class Context:
    identity: Identity
    spec: Spec
    policy: Policy
    deploy_namespace: str
    repository: Repository  # the component's OCM repository as the cluster sees it
    registry: RegistryPolicy  # the policy entry for the repository host
    flavour: Literal["helm", "kustomize"]
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def targets(self) -> list[TargetNamespace]:
        return list(self.spec.namespaces)

    @property
    def primary_namespace(self) -> str:
        return self.spec.primary_namespace

    @property
    def owns_deploy_namespace(self) -> bool:
        return not self.policy.deployNamespace.shared

    def labels(self) -> dict[str, str]:
        return {**self.identity.labels(), **self.extra_labels}

    def meta(self, name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespace is not None:
            m["namespace"] = namespace
        m["labels"] = self.labels()
        m.update(extra)
        return m

    # Object names: one place, derived from the claim identity only.
    @property
    def base(self) -> str:
        return names.fit(self.identity.base, names.SUBDOMAIN_MAX - 20)

    @property
    def deployer_name(self) -> str:
        return names.fit(f"{self.identity.base}-deployer", names.SUBDOMAIN_MAX)

    @property
    def repository_secret_name(self) -> str:
        return names.fit(f"{self.identity.base}-repository", names.SUBDOMAIN_MAX)

    @property
    def pull_secret_name(self) -> str:
        return names.fit(f"{self.identity.base}-pull", names.SUBDOMAIN_MAX)

    @property
    def flux_name(self) -> str:
        # Flux writes this name into a label (helm.toolkit.fluxcd.io/name,
        # kustomize.toolkit.fluxcd.io/name) on everything it applies: label values stop at 63.
        return names.fit(self.identity.base, names.LABEL_VALUE_MAX)

    @property
    def release_name(self) -> str:
        return names.fit(self.identity.base, names.RELEASE_NAME_MAX)
