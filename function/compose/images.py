"""The image allowlist: which registries a component's images may come from, and which of
them may receive the platform's pull credential (docs/security.md, "What the allowlists govern").

``registries`` governs where the function reads *components* from; ``imageRegistries``
governs where the cluster pulls *images* from (default: the component registries). Every
reference the function writes -- status images and every value the ConfigData localization
writes -- goes through :func:`allowed_reference`, so an image on a public host, a link-local
address, Docker Hub (a short name) or another port of an allowed host is one Fatal naming the
resource and the host. The pull secret is keyed only to hosts the policy marks
``pullCredential`` (the kubelet sends the credential to whoever serves a host it is keyed to).
"""

from __future__ import annotations

from typing import Iterable

from function.api.claim import Spec
from function.api.policy import Policy
from function.errors import PolicyViolation
from function.ocm.access import localized_reference, parse_image_reference
from function.ocm.model import ComponentVersion, Resource

DOCKER_HUB = "docker.io"


def allowed_hosts(policy: Policy) -> tuple[str, ...]:
    if policy.imageRegistries is None:
        return tuple(sorted({r.host.lower() for r in policy.registries}))
    return tuple(sorted({r.host.lower() for r in policy.imageRegistries}))


def pull_credential_hosts(policy: Policy) -> tuple[str, ...]:
    if policy.imageRegistries is None:
        return allowed_hosts(policy)
    return tuple(sorted({r.host.lower() for r in policy.imageRegistries if r.pullCredential}))


def host_of(reference: str, where: str) -> str:
    return parse_image_reference(reference, where).host.lower() or DOCKER_HUB


def allowed_reference(
    cv: ComponentVersion, resource: Resource, *, allow_unpinned: bool = False, hosts: tuple[str, ...] = ()
) -> str:
    """:func:`function.ocm.access.localized_reference`, refused unless its host is in ``hosts``.

    Module-level and keyword-only so a ``functools.partial`` of it stays a hashable memo key
    (function/configdata/deploy.py).
    """
    ref = localized_reference(cv, resource, allow_unpinned=allow_unpinned)
    where = f"component {cv.name}:{cv.version} {resource.describe()}"
    written = parse_image_reference(ref, where).host.lower()
    host = written or DOCKER_HUB
    if host not in hosts:
        shown = ", ".join(hosts) or "none"
        what = host if written else f"{DOCKER_HUB} (a Docker Hub short name)"
        raise PolicyViolation(
            where, f"image {ref} comes from {what}, which is not an allowed image registry (imageRegistries: {shown})"
        )
    return ref


def pull_secret_hosts(spec: Spec, policy: Policy, image_hosts: Iterable[str], repository_host: str) -> list[str]:
    """The hosts the pull secret is keyed to: the component's image hosts that may receive the
    pull credential, else the component registry when it may; never an empty set."""
    may = set(pull_credential_hosts(policy))
    hosts = sorted({h.lower() for h in image_hosts} & may)
    if not hosts and repository_host.lower() in may:
        hosts = [repository_host.lower()]
    if spec.credentials and spec.credentials.pull and not hosts:
        raise PolicyViolation(
            "spec.credentials.pull",
            "no registry the component's images come from may receive the pull credential "
            "(policy imageRegistries[].pullCredential)",
        )
    return hosts
