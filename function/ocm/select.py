"""Finding one resource of a component version by OCM identity.

Upstream's v1 controllers ignored ``extraIdentity`` and took the first resource with a
matching name; a component that ships one image per architecture then silently localized
the wrong one. Here identity is honoured, and a selector that matches several resources is
an error that lists them, so the author can add the missing ``extraIdentity``.
"""

from __future__ import annotations

from collections.abc import Mapping

from function.errors import ComponentError
from function.ocm.model import Descriptor, Resource


def find_resource(
    descriptor: Descriptor,
    name: str,
    extra_identity: Mapping[str, str] | None = None,
    *,
    where: str,
) -> Resource:
    """The one resource whose name and every given extraIdentity attribute match."""
    wanted = dict(extra_identity or {})
    matches = [
        r
        for r in descriptor.resources
        if r.name == name and all(r.extra_identity.get(k) == v for k, v in wanted.items())
    ]
    component = f"{descriptor.name}:{descriptor.version}"
    if not matches:
        available = ", ".join(sorted({r.describe() for r in descriptor.resources})) or "none"
        ident = f"name={name}" + "".join(f", {k}={v}" for k, v in sorted(wanted.items()))
        raise ComponentError(
            where,
            f"component {component} has no resource with identity {{{ident}}} "
            f"(it has: {available})",
        )
    if len(matches) > 1:
        found = "; ".join(r.describe() for r in matches)
        raise ComponentError(
            where,
            f"resource name {name!r} matches {len(matches)} resources of component {component} "
            f"({found}): add extraIdentity to pick one",
        )
    return matches[0]


def find_by_type(descriptor: Descriptor, *types: str, where: str) -> Resource:
    """The single resource of one of ``types``, for claims that leave the resource name out."""
    matches = [r for r in descriptor.resources if r.type in types]
    component = f"{descriptor.name}:{descriptor.version}"
    if len(matches) != 1:
        names = ", ".join(r.describe() for r in matches) or "none"
        raise ComponentError(
            where,
            f"component {component} has {len(matches)} resources of type {' or '.join(types)} "
            f"({names}); name the one to use",
        )
    return matches[0]
