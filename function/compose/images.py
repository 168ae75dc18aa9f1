"""The policy's side of the image allowlist: which registries a component's images may come
from, and which of them may receive the platform's pull credential (docs/security.md, "What the
allowlists govern").

``registries`` governs where the function reads *components* from; ``imageRegistries``
governs where the cluster pulls *images* from (default: the component registries). The core
narrows the image table to :func:`allowed_hosts` with :func:`function.ocm.images.allowlisted`,
so every reference the function writes -- status images and every value the ConfigData
localization writes -- is on the allowlist: an image on a public host, a link-local address,
Docker Hub (a short name) or another port of an allowed host is one Fatal naming the
resource and the host. The pull secret is keyed only to hosts the policy marks
``pullCredential`` (the kubelet sends the credential to whoever serves a host it is keyed to).
"""

from __future__ import annotations

from collections.abc import Iterable

from function.api.claim import Spec
from function.api.policy import Policy
from function.errors import PolicyViolation
from function.ocm.images import DOCKER_HUB


def allowed_hosts(policy: Policy) -> tuple[str, ...]:
    """The registries images may come from (lower case, sorted)."""
    if policy.imageRegistries is None:
        return tuple(sorted({r.host.lower() for r in policy.registries}))
    return tuple(sorted({r.host.lower() for r in policy.imageRegistries}))


def pull_credential_hosts(policy: Policy) -> tuple[str, ...]:
    """The image registries that may receive the pull credential (lower case, sorted)."""
    if policy.imageRegistries is None:
        return allowed_hosts(policy)
    return tuple(sorted({r.host.lower() for r in policy.imageRegistries if r.pullCredential}))


def pull_secret_hosts(
    spec: Spec, policy: Policy, image_hosts: Iterable[str], repository_host: str
) -> list[str]:
    """The hosts the pull secret is keyed to: the component's image hosts that may receive the
    pull credential, else the component registry when it may; never an empty set.
    """
    may = set(pull_credential_hosts(policy))
    hosts = sorted({(h.lower() or DOCKER_HUB) for h in image_hosts} & may)
    if not hosts and repository_host.lower() in may:
        hosts = [repository_host.lower()]
    if spec.credentials and spec.credentials.pull and not hosts:
        raise PolicyViolation(
            "spec.credentials.pull",
            "no registry the component's images come from may receive the pull credential "
            "(policy imageRegistries[].pullCredential)",
        )
    return hosts
