"""What every builder needs to know about one claim, computed once.

Builders (one module per composed kind) take this and return plain dicts; they never read
the request or the policy model directly for anything this already decided (names,
namespaces, labels), so a name is derived in exactly one place.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from function.api.claim import Spec, TargetNamespace
from function.api.policy import Policy, RegistryPolicy
from function.compose.identity import Identity
from function.compose.objectnames import ObjectNames
from function.ocm.model import Repository


@dataclass(frozen=True)
class Context:
    """What every builder needs about one claim, decided once (identity, spec, policy, the deploy
    namespace, the admitted repository and its registry entry, the flavour).
    """

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
        """The claim's target namespaces, in claim order."""
        return list(self.spec.namespaces)

    @property
    def primary_namespace(self) -> str:
        """The first target namespace (:attr:`Spec.primary_namespace`)."""
        return self.spec.primary_namespace

    @property
    def owns_deploy_namespace(self) -> bool:
        """Whether the deploy namespace is this claim's own (not a shared one ops provides)."""
        return not self.policy.deployNamespace.shared

    @functools.cached_property
    def _labels(self) -> dict[str, str]:
        return {**self.identity.labels(), **self.extra_labels}

    def labels(self) -> dict[str, str]:
        """The labels on every composed object: ownership marks plus any extra labels (a new
        dict each call: builders add to it).
        """
        return dict(self._labels)

    @property
    def helm_storage_namespace(self) -> str:
        """Where Helm keeps release state: the per-claim deploy namespace; with a shared one, the
        first target namespace (no deployer may touch Secrets in a shared namespace).
        """
        return self.deploy_namespace if self.owns_deploy_namespace else self.primary_namespace

    def meta(self, name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
        """Metadata for a composed object, with this claim's labels and annotations.

        Args:
            name: The object's name.
            namespace: Its namespace; None for a cluster-scoped object.
            extra: Further metadata fields, added last.
        """
        m: dict[str, Any] = {"name": name}
        if namespace is not None:
            m["namespace"] = namespace
        m["labels"] = dict(self._labels)
        m["annotations"] = self.identity.annotations()
        m.update(extra)
        return m

    # Object names: one place (objectnames.py), derived from the claim identity only;
    # builders read them there (``ctx.names.deployment``), under one name each.
    @functools.cached_property
    def names(self) -> ObjectNames:
        """Every derived object name (objectnames.py), derived once per context."""
        return ObjectNames(self.identity)

    @property
    def release_name(self) -> str:
        """``spec.deploy.releaseName``, else the claim's name where no other claim can use it
        in the target namespace (:meth:`ObjectNames.release`; docs/security.md).
        """
        return self.spec.deploy.releaseName or self.names.release(self.primary_namespace)
