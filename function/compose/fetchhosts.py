"""Where a component may send the cluster's fetchers: only to registries ops put on the allowlist.

A component descriptor is tenant-authored: any team that may publish into an allowlisted
repository can write any access into it. Three fetchers act on what the function composes:
Flux's source-controller (the ``OCIRepository``), the OCM controller (``Repository``,
``Component``, and the ``Resource``, which fetches the tracked resource through its access to
verify it) and the function itself (the deployable and the ConfigData); the kubelet pulls
images, whose allowlist is ``imageRegistries`` (:mod:`function.compose.images`).

For the resources something fetches -- the deployable and the ConfigData -- every location an
access names must be the component's own storage (a ``localBlob``) or an OCI registry on
``registries[]``, over plain HTTP only where the policy says so for that exact host. That
holds for the ``access`` and for every ``globalAccess`` inside it, even though the Flux source
never follows a ``globalAccess`` (:func:`function.ocm.access.flux_source`): a descriptor that
names ``oci://169.254.169.254/latest/meta-data`` as a second home for the chart is hostile, and
is one Fatal naming the resource and the host instead of a render that hides it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from function.api.policy import Policy
from function.errors import PolicyViolation
from function.ocm.access import LOCAL_BLOB, OCI_ARTIFACT, OCI_BLOB, normalize_access_type
from function.ocm.model import Resource

#: Schemes an OCI reference may carry; ``http`` only for a host the policy marks plainHTTP.
_TLS_SCHEMES = ("", "https", "oci")
#: How deep ``globalAccess`` may nest (one level is all OCM writes).
MAX_NESTING = 3
#: Fields of the OCI access types that name a location.
_REFERENCE_FIELDS = {OCI_ARTIFACT: "imageReference", OCI_BLOB: "ref"}


def _split(text: str) -> tuple[str, str]:
    """``(scheme, host)`` of ``[scheme://]host/path...`` (scheme lower-case, '' when absent)."""
    body = text.strip()
    scheme = ""
    if "://" in body:
        scheme, body = body.split("://", 1)
        scheme = scheme.lower()
    return scheme, body.split("/", 1)[0]


def _short(text: str) -> str:
    return repr(text[:120] + ("..." if len(text) > 120 else ""))


def _urls(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string in an access (outside ``globalAccess``) that looks like a URL."""
    if depth > 8:
        return
    if isinstance(value, str):
        if "://" in value:
            yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if k != "globalAccess":
                yield from _urls(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _urls(v, depth + 1)


def _locations(access: Mapping[str, Any], field: str, depth: int) -> Iterator[tuple[str, str]]:
    """``(field, location)`` for every location ``access`` names; ``""`` for the component's
    own storage. Raises for an access whose location cannot be told.
    """
    raw = access.get("type")
    kind = normalize_access_type(raw) if isinstance(raw, str) else ""
    if kind == LOCAL_BLOB:
        yield field, ""
    elif kind in _REFERENCE_FIELDS:
        name = _REFERENCE_FIELDS[kind]
        ref = access.get(name)
        if not isinstance(ref, str) or not ref.strip():
            raise ValueError(f"{field} ({str(raw)[:60]}) names no {name}")
        yield f"{field}.{name}", ref
    else:
        urls = list(_urls(access))
        if not urls:
            raise ValueError(
                f"{field} has type {str(raw)[:60]!r}, which names no location the policy can check"
            )
        for url in urls:
            yield f"{field} ({str(raw)[:60]})", url
    nested = access.get("globalAccess")
    if nested is not None:
        if depth >= MAX_NESTING:
            raise ValueError(f"{field}.globalAccess nests more than {MAX_NESTING} levels")
        if not isinstance(nested, Mapping):
            raise ValueError(f"{field}.globalAccess is not a mapping")
        yield from _locations(nested, f"{field}.globalAccess", depth + 1)


def check(policy: Policy, resources: Iterable[Resource | None], where: str) -> None:
    """Refuse, naming the resource and the host, any location off the component allowlist."""
    entries = {r.host.lower(): r for r in policy.registries}
    allowed = ", ".join(sorted(entries)) or "none"
    for resource in resources:
        if resource is None:
            continue
        at = f"{where} {resource.describe()}"
        try:
            found = list(_locations(resource.access, "access", 0))
        except ValueError as e:
            raise PolicyViolation(at, f"{e}: Flux and the OCM controller would fetch it") from None
        for field, location in found:
            if not location:
                continue
            scheme, host = _split(location)
            if "@" in host or not host:
                raise PolicyViolation(
                    at, f"{field} {_short(location)} names no registry host the policy can check"
                )
            entry = entries.get(host.lower())
            if entry is None:
                raise PolicyViolation(
                    at,
                    f"{field} names host {host[:100]!r} ({_short(location)}), which is not a "
                    f"component registry on the policy allowlist (registries: {allowed}); Flux "
                    "and the OCM controller fetch only from those",
                )
            if scheme == "http" and not entry.plainHTTP:
                raise PolicyViolation(
                    at,
                    f"{field} names host {host[:100]!r} over plain HTTP, which the policy does "
                    "not allow for that host (registries[].plainHTTP)",
                )
            if scheme not in (*_TLS_SCHEMES, "http"):
                raise PolicyViolation(
                    at,
                    f"{field} names host {host[:100]!r} with scheme {scheme[:20]!r}; only OCI "
                    "registries (https, or http where the policy allows it) are fetched",
                )
