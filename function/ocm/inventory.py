"""What a component source holds and which version a request means, in errors that say so.

A service team's first question about a SOURCE is "what is in there?"; the second is "why does
my string not work?". Both are answered from the same reads: the components a CTF or a
component directory holds, the versions a repository has for a component, and the version a
range resolves to. Every error names what *does* exist, so the next attempt can be right:
a CTF without a component name lists its components, a wrong name lists them too, a missing
version lists the versions (an OCI registry cannot list its components: the error says so).

All I/O goes through the :class:`~function.ocm.source.ComponentSource` seam (plus the CTF and
directory readers' listing of their own contents); used by ``sack8s inspect`` and by the
ConfigData commands' ``--component``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from function.errors import ComponentError, SourceUnavailable
from function.ocm.model import ComponentVersion
from function.ocm.source import ComponentSource
from function.ocm.versions import is_exact, parse_semver, pick_version

MAX_SHOWN = 20
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")


@dataclass(frozen=True)
class Resolution:
    """Which version of ``component`` a request means, out of ``versions`` (highest first)."""

    component: str
    versions: tuple[str, ...]
    version: str
    how: str  # "given", "constraint '>=6.2 <7'", "the only version", "the highest version"


def held_components(source: ComponentSource) -> list[str] | None:
    """The component names a local source holds; ``None`` for a registry (it cannot list them)."""
    components = getattr(source, "components", None)
    if callable(components):
        return list(components())
    return None


def describe_held(source: ComponentSource) -> str:
    held = held_components(source)
    if held is None:
        return "an OCI registry cannot list its components: name one as REPO//NAME[:VERSION]"
    shown = ", ".join(held[:MAX_SHOWN]) or "no component"
    more = f" and {len(held) - MAX_SHOWN} more" if len(held) > MAX_SHOWN else ""
    return f"it holds: {shown}{more}"


def need_component(source: ComponentSource, component: str | None, where: str) -> str:
    """``component``, or an error naming the components the source holds."""
    if component:
        return component
    held = held_components(source)
    if held is not None and len(held) == 1:
        return held[0]
    raise ComponentError(
        where, f"name the component: SOURCE//NAME[:VERSION] ({describe_held(source)})"
    )


def highest_first(versions: list[str]) -> tuple[str, ...]:
    """Semantic versions highest first, then any other tags in text order (deterministic)."""
    semver = sorted(((parse_semver(v), v) for v in set(versions) if parse_semver(v)), reverse=True)
    other = sorted(v for v in set(versions) if parse_semver(v) is None)
    return tuple(v for _, v in semver) + tuple(other)


async def resolve_version(
    source: ComponentSource,
    component: str,
    constraint: str | None,
    *,
    where: str,
    default: Literal["highest", "only"] = "highest",
) -> Resolution:
    """The version ``constraint`` (exact, a range, or ``None``) picks among the stored ones.

    Without a constraint ``default`` decides: ``highest`` takes the highest version (for
    looking around), ``only`` insists on exactly one (for commands whose result must not
    change when a version is pushed).
    """
    try:
        versions = highest_first(await source.list_versions(component))
    except SourceUnavailable:
        raise
    except ComponentError as e:
        held = held_components(source)
        if held is not None and component not in held:
            raise ComponentError(
                f"component {component}", f"not found ({describe_held(source)})"
            ) from None
        raise e from None
    if not versions:
        held = held_components(source)
        tail = describe_held(source) if held is not None else "no versions stored"
        raise ComponentError(f"component {component}", f"not found in {where} ({tail})")
    shown = ", ".join(versions[:MAX_SHOWN]) + (
        f" and {len(versions) - MAX_SHOWN} more" if len(versions) > MAX_SHOWN else ""
    )
    if constraint is None or not constraint.strip():
        if default == "only" and len(versions) != 1:
            raise ComponentError(
                f"component {component}",
                f"name the version (SOURCE//NAME:VERSION); versions there: {shown}",
            )
        how = "the only version" if len(versions) == 1 else "the highest version"
        return Resolution(component, versions, versions[0], how)
    c = constraint.strip()
    if is_exact(c):
        exact = c.lstrip("=").strip()
        if exact in versions:
            return Resolution(component, versions, exact, "given")
        try:
            picked = pick_version(list(versions), exact, where=f"component {component}")
        except ComponentError:
            raise ComponentError(
                f"component {component}", f"version {exact!r} not found (versions there: {shown})"
            ) from None
        return Resolution(component, versions, picked, "given")
    picked = pick_version(list(versions), c, where=f"component {component}")
    return Resolution(component, versions, picked, f"constraint {c!r}")


async def get_version(
    source: ComponentSource,
    component: str,
    constraint: str | None,
    *,
    where: str,
    default: Literal["highest", "only"] = "only",
) -> ComponentVersion:
    """The component version a request means. An exact version is read directly (one read, no
    listing); only when it is not there are the versions listed, for the error or for the
    other spelling (``v6.2.0`` for ``6.2.0``).
    """
    if constraint and (is_exact(constraint.strip()) or _TAG.fullmatch(constraint.strip())):
        try:
            return await source.get(component, constraint.strip().lstrip("=").strip())
        except SourceUnavailable:
            raise
        except ComponentError as first:
            try:
                res = await resolve_version(
                    source, component, constraint, where=where, default=default
                )
            except ComponentError as listing:
                # Listing failed for another reason (unreachable): the read's error says more.
                if isinstance(listing, SourceUnavailable) or "not found" not in listing.message:
                    raise first from None
                raise
            return await source.get(component, res.version)
    res = await resolve_version(source, component, constraint, where=where, default=default)
    return await source.get(component, res.version)


__all__ = [
    "Resolution",
    "describe_held",
    "get_version",
    "held_components",
    "highest_first",
    "need_component",
    "resolve_version",
]
