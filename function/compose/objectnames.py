"""Every name the function derives for one claim, in one place (docs/decisions.md, "Names").

Each name is ``<readable>-<hash>``: the readable part (the claim name and the object's role)
is for people and is cut to fit; the hash (:func:`function.compose.names.digest`, 100 bits)
covers the claim's identity, the object's role, and the namespace or secret the object is
for. So every object of one apiVersion and kind has its own name, whatever its namespace
(Crossplane v2.2.4 sorts resourceRefs namespace-blind and loops otherwise), and no two claims
share one. Names stay within 63 characters (the Flux objects' names end up in labels), the
Helm release name within 53; that one is the claim's own name where that cannot collide
(:meth:`ObjectNames.release`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from function.compose import names
from function.compose.identity import Identity

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class ObjectNames:
    """Every object name derived for one claim: ``<readable>-<hash of identity and role>``."""

    identity: Identity

    def _name(self, role: str, *scope: str, limit: int = names.NAME_MAX) -> str:
        return names.hashed(
            f"{self.identity.name}-{role}", self.identity.digest(role, *scope), limit
        )

    @property
    def serviceaccount(self) -> str:
        """The deployer ServiceAccount."""
        return self._name("deployer")

    def role(self, namespace: str) -> str:
        """The deployer's Role (and its RoleBinding) in a target namespace."""
        return self._name("deployer", namespace)

    @property
    def helm_storage_role(self) -> str:
        """The Role (and RoleBinding) on Helm's release Secrets in a per-claim deploy namespace."""
        return self._name("helm-storage")

    @property
    def repository_secret(self) -> str:
        """The Secret with the OCM repository credential (deploy namespace)."""
        return self._name("repository")

    @property
    def pull_secret(self) -> str:
        """The image pull Secret: one name in every target namespace (charts reference one name)."""
        return self._name("pull")

    def pull_externalsecret(self, namespace: str) -> str:
        """The ExternalSecret writing the pull Secret in ``namespace``."""
        return self._name("pull", namespace)

    def service_externalsecret(self, namespace: str, secret: str) -> str:
        """The ExternalSecret of service secret ``secret`` in ``namespace``."""
        return names.hashed(
            f"{self.identity.name}-{secret}", self.identity.digest("secret", namespace, secret)
        )

    @property
    def deployment(self) -> str:
        """OCM Repository/Component/Resource, OCIRepository, HelmRelease/Kustomization and the
        Helm release: one object of each kind per claim, so one name (within the 53 of Helm).
        """
        return names.hashed(
            self.identity.name, self.identity.digest("deployment"), names.RELEASE_NAME_MAX
        )

    def release(self, target_namespace: str) -> str:
        """The Helm release name when the claim names none: the claim's own name where no other
        claim can deploy a release of that name into ``target_namespace``, else
        :attr:`deployment` (docs/security.md, "Helm release names").

        Readable for a claim (or namespaced XR) whose release goes into a namespace other than
        its own: such a namespace belongs to exactly one tenant (its label, or the name pattern
        while it is free), whose claims all live in one namespace and so have distinct names.
        Hashed for a release into the claim's own namespace (ops may hand that namespace to
        another tenant too, whose claims could share the name), for an XR without a claim (its
        name may equal a claim's of the tenant it acts for), and for a name that is no DNS
        label of at most 53 characters.
        """
        name = self.identity.name
        if (
            self.identity.is_claim
            and target_namespace != self.identity.namespace
            and len(name) <= names.RELEASE_NAME_MAX
            and _DNS_LABEL.fullmatch(name)
        ):
            return name
        return self.deployment

    def usage(self, key: str, of_kind: str) -> str:
        """The Usage protecting the object under composition key ``key``."""
        return names.hashed(
            f"{self.identity.name}-{of_kind.lower()}", self.identity.digest("usage", key)
        )

    def cluster_usage(self, target_namespace: str) -> str:
        """The ClusterUsage keeping the deploy namespace until ``target_namespace`` is gone
        (cluster-scoped: unique across claims through the claim's identity in the hash).
        """
        return names.hashed(
            f"{self.identity.name}-deploy-namespace",
            self.identity.digest("clusterusage", target_namespace),
        )
