"""Choosing and reading the component source for a claim (the fetch half of RunFunction).

A claim names an OCM repository by reference; it may only be an OCI registry on the policy
allowlist (a claim can never make the function read a local path). Ops may map a
repository to a local CTF or directory mirror (``policy.mirrors``) for offline renders; the
mirror only replaces where the *bytes* come from, the composed objects still point at the
registry a cluster would pull from.

Version resolution is sticky: the version resolved last time is read back from the
observed XR's status, and kept while the claim's constraint is unchanged and no newer match
appears in the (TTL-cached) tag list. Every replica therefore emits the same desired state,
and a version never flips back because a tag vanished.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from function.api.claim import Spec
from function.api.policy import Policy
from function.cache import Cache, Memos, unrepeatable
from function.compose import fetchhosts
from function.compose.admission import oci_repository_reference
from function.configdata.model import parse_configdata
from function.errors import ComponentError, InvalidClaim, PolicyViolation, SackError
from function.ocm.fetch import load_resources, resolve_version
from function.ocm.location import Location, open_source, parse_location, parse_repository
from function.ocm.model import TYPE_CONFIGDATA, ComponentVersion, Repository, Resource
from function.ocm.oci import (
    AllowedHost,
    CredentialSet,
    OciSource,
    RegistryAccess,
    credentials_from_request_data,
)
from function.ocm.select import find_by_type, find_resource
from function.ocm.source import ComponentSource, LoadedComponent, resource_key


def claim_repository(spec: Spec) -> Repository:
    """The claim's OCM repository; only OCI registries are accepted from a claim."""
    where = "spec.component.repository"
    # Decided on the text alone: a claim's reference never reaches a filesystem probe.
    text = oci_repository_reference(spec.component.repository, where)
    try:
        loc = parse_repository(text)
    except SackError as e:
        raise PolicyViolation(
            where, e.message if e.where.startswith("source") else str(e)
        ) from None
    if loc.kind != "oci" or loc.repository is None:
        raise PolicyViolation(
            where, f"must be an OCI registry reference (got a {loc.kind} location)"
        )
    return loc.repository


def _same_repo(a: Location, b: Repository) -> bool:
    r = a.repository
    return bool(r) and r.host.lower() == b.host.lower() and r.base.strip("/") == b.base.strip("/")


def previous_version(spec: Spec, status: Mapping[str, Any]) -> str | None:
    prev = status.get("component") or {}
    if (
        prev.get("name") == spec.component.name
        and prev.get("constraint") == spec.component.version
        and prev.get("repository") == spec.component.repository
        and prev.get("version")
    ):
        return str(prev["version"])
    return None


def select_resources(spec: Spec, cv: ComponentVersion) -> tuple[Resource, Resource | None]:
    """The claim's deployable and ConfigData resources (None when the component ships none),
    selected once per request; the core reads them from the :class:`LoadedComponent`.
    """
    deployable = find_resource(
        cv.descriptor,
        spec.deploy.resource.name,
        spec.deploy.resource.extraIdentity,
        where="spec.deploy.resource",
    )
    if spec.configData is not None:
        cd = find_resource(
            cv.descriptor,
            spec.configData.name,
            spec.configData.extraIdentity,
            where="spec.configData",
        )
        if cd.type != TYPE_CONFIGDATA:
            raise InvalidClaim(
                "spec.configData", f"resource {cd.name} has type {cd.type}, not {TYPE_CONFIGDATA}"
            )
        return deployable, cd
    if any(r.type == TYPE_CONFIGDATA for r in cv.descriptor.resources):
        return deployable, find_by_type(
            cv.descriptor, TYPE_CONFIGDATA, where=f"component {cv.name}:{cv.version}"
        )
    return deployable, None


@dataclass
class SourceFactory:
    """Builds component sources for requests; one per process, sharing one storage cache.

    ``on_registry_get(seconds, ok)`` is handed to every registry client (latency metrics).
    ``verify_digests=False`` loads resources without checking their digests: only
    ``sack8s render --skip-digest-check`` (tests) sets it; nothing in a request can.
    """

    cache: Cache = field(default_factory=Cache)
    on_registry_get: Callable[[float, bool], None] | None = None
    verify_digests: bool = True

    def _credentials(self, policy: Policy, credentials: Mapping[str, Any]) -> CredentialSet:
        result = CredentialSet()
        for entry in policy.registries:
            if entry.credentials is None:
                continue
            if entry.credentials not in credentials:
                raise ComponentError(
                    f"input registries[{entry.host}].credentials",
                    f"the pipeline step has no credentials named {entry.credentials!r}",
                )
            got = credentials_from_request_data(
                dict(credentials[entry.credentials].credential_data.data),
                where=f"credentials {entry.credentials}",
            )
            if (
                got.default is not None
            ):  # a bare username/password Secret: bind it to this host only
                got = CredentialSet({entry.host.lower(): got.default, **got.by_host})
            result = result.merged(CredentialSet(got.by_host))
        return result

    def _mirror(self, policy: Policy, repository: Repository, base_dir: Path) -> Path | None:
        for m in policy.mirrors:
            if _same_repo(parse_repository(m.repository), repository):
                path = Path(m.path)
                return path if path.is_absolute() else base_dir / path
        return None

    def open(
        self,
        policy: Policy,
        repository: Repository,
        credentials: Mapping[str, Any],
        base_dir: Path,
    ) -> ComponentSource:
        path = self._mirror(policy, repository, base_dir)
        if path is not None:
            # Local files can change under one name: this answer is never reused as is.
            unrepeatable("served from a local mirror")
            return open_source(parse_location(str(path)), registry_repository=repository)
        hosts = [
            AllowedHost(r.host, plain_http=r.plainHTTP, ca_bundle=r.caBundle)
            for r in policy.registries
        ]
        access = RegistryAccess.build(hosts, self._credentials(policy, credentials))
        return OciSource(repository, access=access, cache=self.cache, on_get=self.on_registry_get)

    async def load(
        self,
        spec: Spec,
        policy: Policy,
        repository: Repository,
        *,
        status: Mapping[str, Any],
        credentials: Mapping[str, Any],
        base_dir: Path,
        memos: Memos | None = None,
    ) -> LoadedComponent:
        """Resolve the version, select the resources and load them, once per request; the
        policy was checked before (admission.admit).
        """
        source = self.open(policy, repository, credentials, base_dir)
        try:
            version = await resolve_version(
                source,
                spec.component.name,
                spec.component.version,
                previous=previous_version(spec, status),
                where=f"spec.component.version (component {spec.component.name})",
                memos=memos,
            )
            cv = await source.get(spec.component.name, version)
            deployable, configdata = select_resources(spec, cv)
            # Refused before anything is fetched: a location off the allowlist (the core
            # checks again, for callers that bring their own LoadedComponent).
            fetchhosts.check(policy, (deployable, configdata), f"component {cv.name}:{cv.version}")
            mirror = self._mirror(policy, repository, base_dir)
            # Everything load_resources returns is a pure function of the descriptor manifest
            # (content-addressed: it names every blob by digest) and of the selection, so it is
            # kept in the shared cache under that digest: a warm reconcile neither re-reads nor
            # re-extracts the deployable. A new descriptor (a re-pushed tag) is a new key. The
            # digest checks ran before the entry was stored (a mismatch is never cached), and the
            # descriptor under that digest declares the same resource digests: a warm reconcile
            # reuses the verified content without reading or hashing a blob again.
            key = (
                "loaded",
                ("mirror", str(mirror))
                if mirror is not None
                else ("oci", repository.host.lower(), repository.base.strip("/")),
                repository,
                cv.name,
                cv.version,
                cv.descriptor_digest,
                resource_key(deployable),
                None if configdata is None else resource_key(configdata),
                self.verify_digests,
            )

            async def fetch() -> LoadedComponent:
                return await load_resources(
                    source,
                    cv,
                    deployable=deployable,
                    configdata=configdata,
                    verify=self.verify_digests,
                )

            loaded = (
                await self.cache.immutable(key, fetch, size=_loaded_size)
                if cv.descriptor_digest
                else await fetch()
            )
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()
        return loaded


def _loaded_size(loaded: LoadedComponent) -> int:
    n = 4096 + 512 * len(loaded.component.descriptor.resources)
    for files in loaded.contents.values():
        n += sum(len(k) + len(v) + 100 for k, v in files.items())
    return n + sum(len(v) for v in loaded.blob_heads.values())


def configdata_schema(loaded: LoadedComponent, memos: Memos | None = None) -> Any:
    """The selected ConfigData's schema (None without one): what types a flat values
    ConfigMap's strings (:mod:`function.configdata.flatvalues`). Parsed as the core parses it
    (same bytes, same name, so the memo serves both and an error reads the same).
    """
    cd = loaded.configdata
    files = loaded.contents.get(resource_key(cd)) if cd is not None else None
    if cd is None or not files or len(files) != 1:
        return None
    (data,) = files.values()
    conf = parse_configdata(data, f"ConfigData (resource {cd.name})", memos).configuration
    return conf.schema_ if conf is not None else None
