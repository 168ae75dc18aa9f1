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
from function.compose.identity import Identity
from function.compose.objectnames import ObjectNames
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

    @property
    def helm_storage_namespace(self) -> str:
        """Where Helm keeps release state: the per-claim deploy namespace; with a shared one, the
        first target namespace (no deployer may touch Secrets in a shared namespace).
        """
        return self.deploy_namespace if self.owns_deploy_namespace else self.primary_namespace

    def meta(self, name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespace is not None:
            m["namespace"] = namespace
        m["labels"] = self.labels()
        m["annotations"] = self.identity.annotations()
        m.update(extra)
        return m

    # Object names: one place (objectnames.py), derived from the claim identity only. The
    # one-line properties below repeat a shape deliberately: each is the name builders use.
    @property
    def names(self) -> ObjectNames:
        return ObjectNames(self.identity)

    @property
    def deployer_name(self) -> str:
        return self.names.serviceaccount

    @property
    def repository_secret_name(self) -> str:
        return self.names.repository_secret

    @property
    def pull_secret_name(self) -> str:
        return self.names.pull_secret

    @property
    def flux_name(self) -> str:
        # Flux writes this name into a label (helm.toolkit.fluxcd.io/name,
        # kustomize.toolkit.fluxcd.io/name) on everything it applies: label values stop at 63.
        return self.names.deployment

    @property
    def release_name(self) -> str:
        """``spec.deploy.releaseName``, else the claim's name where no other claim can use it
        in the target namespace (:meth:`ObjectNames.release`; docs/security.md).
        """
        return self.spec.deploy.releaseName or self.names.release(self.primary_namespace)
