"""Write a component version from a team's own inputs: ``sack8s component build``.

A service team has a chart or a manifests directory, a ConfigData file and the images they
deploy; the OCM CLI (``ocm add component-version --constructor``) turns those into a
component, but it is one more tool to install. This writes the same thing with the project's
own OCM vocabulary (:mod:`function.ocm.layout`), from the same **component constructor file**
the OCM CLI reads (``components[].resources[]`` with ``input`` ``helm/v1``, ``dir/v1``,
``file/v1`` or ``access`` ``ociArtifact``), or from flags that describe one.

The layout is the OCM CLI v0.9.1's (``../shared/fixtures/ocm-cli-v0.9.1/FACTS.md``):

* CTF: ``artifact-index.json`` and ``blobs/sha256.<hex>``; the tag ``<version>`` of
  ``component-descriptors/<name>`` names an OCI index whose child 0 is the descriptor manifest
  (config ``component.config.v1+json``, layer 0 the descriptor as plain JSON, then every
  non-OCI localBlob as a layer) and whose further children are the localBlobs that are OCI
  artifacts (the Helm chart, a standard Helm OCI manifest).
* The descriptor as the CLI writes it: ``meta.schemaVersion: v2``, keys sorted, ``null`` for
  empty lists, access types ``LocalBlob/v1`` and ``ociArtifact``, every resource with its
  digest ``{SHA-256, genericBlobDigest/v1, <hex>}``: the SHA-256 of the blob for a localBlob
  (for the chart, of its manifest), the image manifest digest for an image.

Differences from the CLI, all for reproducibility (the same inputs give the same digests on
every machine): archives have fixed metadata (mtime 0, uid/gid 0, sorted entries; gzip
without a timestamp), the chart manifest has no ``org.opencontainers.image.created``
annotation, and ``helm/v1``/``dir/v1``/``file/v1`` paths are relative to the constructor
file (the CLI resolves ``helm/v1`` against the working directory). An image must be pinned by
digest in the constructor: nothing here reaches a registry (the CLI would ask the registry
for the digest).

A **component directory** (``--format directory``) holds the same descriptor as
``component-descriptor.json`` and the same blobs; :mod:`function.ocm.directory` reads it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from function.errors import ComponentError
from function.ocm.ctf import INDEX_FILE
from function.ocm.descriptor import COMPONENT_NAME_RE, VERSION_RE
from function.ocm.imageref import parse_reference
from function.ocm.layout import (
    ARTIFACT_TYPE_DESCRIPTOR,
    HELM_CHART_LAYER,
    MT_COMPONENT_CONFIG,
    MT_OCI_INDEX,
    MT_OCI_MANIFEST,
    REPO_PREFIX,
    TAR_GZIP,
    TAR_PLAIN,
    encode_tag,
)
from function.ocm.model import TYPE_CONFIGDATA, TYPE_HELM_CHART, TYPE_KUSTOMIZE, TYPE_OCI_IMAGE
from function.yamlio import load_all

MT_DESCRIPTOR_JSON = ARTIFACT_TYPE_DESCRIPTOR + "+json"
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
CREATOR = "sack8s component build"
RESOURCE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
INPUT_TYPES = ("helm", "dir", "file")
IMAGE_ACCESS_TYPES = ("ociArtifact", "ociArtifact/v1", "ociRegistry", "OCIImage/v1")
MAX_INPUT_BYTES = 256 * 1024 * 1024
MAX_INPUT_FILES = 10_000


class BuildError(ComponentError):
    reason = "ComponentBuildFailed"


# --------------------------------------------------------------------------- what to build


@dataclass(frozen=True)
class Input:
    type: str  # helm | dir | file
    path: Path
    compress: bool = False
    media_type: str = ""


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    type: str
    version: str
    relation: str
    where: str  # the constructor field (or flag) it came from
    input: Input | None = None
    image: str = ""  # imageReference, for an ociArtifact access


# Deliberately alike (duplicates): what to build, beside model.Descriptor, what was read.
@dataclass(frozen=True)
class ComponentSpec:
    name: str
    version: str
    provider: str
    resources: tuple[ResourceSpec, ...]
    where: str


def _str(doc: Mapping[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or not value:
        raise BuildError(f"{where}.{key}", "must be a non-empty string")
    return value


def _provider(doc: Mapping[str, Any], where: str) -> str:
    p = doc.get("provider")
    if isinstance(p, Mapping):
        return _str(p, "name", f"{where}.provider")
    if isinstance(p, str) and p:
        return p
    raise BuildError(f"{where}.provider", "must name the provider (provider: {name: acme.org})")


def _input(doc: Any, base: Path, where: str) -> Input:
    if not isinstance(doc, Mapping):
        raise BuildError(where, "must be a mapping with type and path")
    unknown = sorted(set(doc) - {"type", "path", "compress", "mediaType"})
    if unknown:
        raise BuildError(
            f"{where}.{unknown[0]}", "is not supported (type, path, compress, mediaType)"
        )
    kind = _str(doc, "type", where).split("/")[0].lower()
    if kind not in INPUT_TYPES:
        raise BuildError(
            f"{where}.type", f"{doc['type']!r} is not supported (helm/v1, dir/v1, file/v1)"
        )
    path = Path(_str(doc, "path", where))
    path = path if path.is_absolute() else base / path
    compress = doc.get("compress", False)
    if not isinstance(compress, bool):
        raise BuildError(f"{where}.compress", "must be true or false")
    mt = doc.get("mediaType", "")
    if not isinstance(mt, str):
        raise BuildError(f"{where}.mediaType", "must be a string")
    if kind == "helm" and (compress or mt):
        raise BuildError(where, "a helm/v1 input takes only a path (the chart directory)")
    if kind in ("helm", "dir") and not path.is_dir():
        raise BuildError(f"{where}.path", f"{path} is not a directory")
    if kind == "file" and not path.is_file():
        raise BuildError(f"{where}.path", f"{path} is not a file")
    return Input(kind, path, compress, mt)


def _resource(doc: Any, base: Path, version: str, where: str) -> ResourceSpec:
    if not isinstance(doc, Mapping):
        raise BuildError(where, "must be a mapping")
    name = _str(doc, "name", where)
    if not RESOURCE_NAME_RE.match(name):
        raise BuildError(f"{where}.name", f"{name!r} must be a DNS label (a-z, 0-9, -)")
    rtype = _str(doc, "type", where)
    rversion = str(doc.get("version") or version)
    if not VERSION_RE.match(rversion):
        raise BuildError(f"{where}.version", f"{rversion!r} is not a version")
    relation = str(doc.get("relation") or ("external" if "access" in doc else "local"))
    if relation not in ("local", "external"):
        raise BuildError(f"{where}.relation", "must be local or external")
    if ("input" in doc) == ("access" in doc):
        raise BuildError(where, "needs exactly one of input (a local file) or access (an image)")
    if "input" in doc:
        got = _input(doc["input"], base, f"{where}.input")
        return ResourceSpec(name, rtype, rversion, relation, where, input=got)
    access = doc["access"]
    if not isinstance(access, Mapping) or access.get("type") not in IMAGE_ACCESS_TYPES:
        raise BuildError(
            f"{where}.access.type",
            "only an ociArtifact access (an image, imageReference pinned by digest) is supported",
        )
    ref = _str(access, "imageReference", f"{where}.access")
    _image_digest(ref, f"{where}.access.imageReference")
    return ResourceSpec(name, rtype, rversion, relation, where, image=ref)


def _image_digest(ref: str, where: str) -> str:
    written = re.sub(r"^https?://", "", ref)
    parsed = parse_reference(written, where=where)
    if not parsed.digest:
        raise BuildError(
            where,
            f"{ref[:200]!r} has no digest: pin it (REFERENCE@sha256:<manifest digest>); the "
            "descriptor carries the image's digest and the build reaches no registry",
        )
    return parsed.digest


def parse_constructor(data: bytes, path: Path) -> list[ComponentSpec]:
    """A component constructor file as the OCM CLI reads it: ``components[]`` (or one component
    at the top level), each with ``name``, ``version``, ``provider`` and ``resources[]``.
    """
    where = str(path)
    docs = load_all(data, where)
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise BuildError(where, "must hold one YAML mapping (components: [...])")
    doc = docs[0]
    items = doc.get("components") if "components" in doc else [doc]
    if not isinstance(items, list) or not items:
        raise BuildError(f"{where}: components", "must be a non-empty list")
    out = []
    for i, c in enumerate(items):
        at = f"{where}: components[{i}]"
        if not isinstance(c, Mapping):
            raise BuildError(at, "must be a mapping")
        out.append(component_spec(c, path.parent, at))
    return out


def component_spec(doc: Mapping[str, Any], base: Path, where: str) -> ComponentSpec:
    name = _str(doc, "name", where)
    if len(name) > 255 or not COMPONENT_NAME_RE.match(name):
        raise BuildError(
            f"{where}.name", f"{name!r} is not a component name (a DNS domain, then a path)"
        )
    version = _str(doc, "version", where)
    if not VERSION_RE.match(version):
        raise BuildError(f"{where}.version", f"{version!r} is not a version")
    unsupported = [k for k in ("sources", "componentReferences") if doc.get(k)]
    if unsupported:
        raise BuildError(f"{where}.{unsupported[0]}", "is not supported by sack8s component build")
    items = doc.get("resources")
    if not isinstance(items, list) or not items:
        raise BuildError(f"{where}.resources", "must be a non-empty list")
    resources = tuple(
        _resource(r, base, version, f"{where}.resources[{i}]") for i, r in enumerate(items)
    )
    seen: dict[str, str] = {}
    for r in resources:
        if r.name in seen:
            raise BuildError(f"{r.where}.name", f"{r.name!r} is also {seen[r.name]}")
        seen[r.name] = r.where
    return ComponentSpec(name, version, _provider(doc, where), resources, where)


# --------------------------------------------------------------------------- archives


def reproducible_tar(entries: list[tuple[str, bytes | None]]) -> bytes:
    """A tar with fixed metadata (mtime 0, uid/gid 0, no owner names); ``None`` is a directory."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def reproducible_gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _files(root: Path, where: str) -> list[tuple[str, bytes]]:
    """Every regular file under ``root`` (sorted), refusing links out and oversized trees."""
    out: list[tuple[str, bytes]] = []
    total = 0
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            raise BuildError(where, f"{p} is a symbolic link (archives hold regular files only)")
        if not p.is_file():
            continue
        data = p.read_bytes()
        total += len(data)
        if total > MAX_INPUT_BYTES or len(out) >= MAX_INPUT_FILES:
            raise BuildError(where, f"{root} holds more than {MAX_INPUT_BYTES} bytes or files")
        out.append((p.relative_to(root).as_posix(), data))
    return out


def _chart(root: Path, where: str) -> tuple[bytes, dict[str, Any]]:
    """The chart as ``helm package`` lays it out (``<name>/Chart.yaml`` first) and its name and
    version (what the OCM CLI writes as the Helm config).
    """
    files = dict(_files(root, where))
    if "Chart.yaml" not in files:
        raise BuildError(f"{where}.path", f"{root} has no Chart.yaml (not a Helm chart)")
    docs = load_all(files["Chart.yaml"], str(root / "Chart.yaml"))
    meta = docs[0] if len(docs) == 1 and isinstance(docs[0], Mapping) else {}
    name, version = meta.get("name"), meta.get("version")
    if not isinstance(name, str) or not RESOURCE_NAME_RE.match(name):
        raise BuildError(f"{root / 'Chart.yaml'}: name", "must be a chart name (a DNS label)")
    if not isinstance(version, str) or not version:
        raise BuildError(f"{root / 'Chart.yaml'}: version", "must be the chart's version")
    order = ["Chart.yaml", *sorted(k for k in files if k != "Chart.yaml")]
    return reproducible_gzip(reproducible_tar([(f"{name}/{k}", files[k]) for k in order])), {
        "name": name,
        "version": version,
    }


# --------------------------------------------------------------------------- writing


def _json(obj: Any) -> bytes:
    """Compact JSON, keys in the order given (the CLI writes Go structs in field order)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _sorted_json(obj: Any) -> bytes:
    """Compact JSON, keys sorted (the CLI writes descriptors from maps: Go sorts map keys)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


@dataclass
class Blobs:
    """Content-addressed blobs, kept in memory until the whole build has succeeded."""

    data: dict[str, bytes] = field(default_factory=dict)

    def put(self, media_type: str, data: bytes, **extra: Any) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.data[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data), **extra}


def _artifact(r: ResourceSpec) -> dict[str, str]:
    return {
        "software.ocm.artifact": json.dumps(
            [{"identity": {"name": r.name, "version": r.version}, "kind": "resource"}],
            separators=(",", ":"),
        )
    }


def _digest_spec(hexdigest: str) -> dict[str, str]:
    return {
        "hashAlgorithm": "SHA-256",
        "normalisationAlgorithm": "genericBlobDigest/v1",
        "value": hexdigest,
    }


def _annotations(c: ComponentSpec, what: str) -> dict[str, str]:
    return {
        "org.opencontainers.image.title": f"OCM Component Descriptor {what} for {c.name} in "
        f"version {c.version}",
        "org.opencontainers.image.version": c.version,
        "software.ocm.componentversion": f"{c.name}:{c.version}",
        "software.ocm.creator": CREATOR,
    }


@dataclass(frozen=True)
class Built:
    """One component version written: where its tag points, and its descriptor."""

    name: str
    version: str
    index: str  # the tag's OCI index digest
    descriptor_manifest: str
    descriptor: dict[str, Any]
    artifacts: tuple[dict[str, Any], ...]  # its artifact-index entries


def build_version(c: ComponentSpec, blobs: Blobs) -> Built:
    """Every object of one component version into ``blobs``; its index entries."""
    resources: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    children: list[dict[str, Any]] = []
    for r in c.resources:
        entry: dict[str, Any] = {
            "name": r.name,
            "relation": r.relation,
            "type": r.type,
            "version": r.version,
        }
        if r.image:
            digest = _image_digest(r.image, f"{r.where}.access.imageReference")
            entry["access"] = {"type": "ociArtifact", "imageReference": r.image}
            entry["digest"] = _digest_spec(digest.removeprefix("sha256:"))
            resources.append(entry)
            continue
        if r.input is None:  # parse_constructor gives every resource an input or an image
            raise BuildError(r.where, "needs an input or an image access")
        where = f"{r.where}.input"
        if r.input.type == "helm":
            layer, meta = _chart(r.input.path, where)
            config = blobs.put(HELM_CONFIG, _json(meta))
            chart_layer = blobs.put(HELM_CHART_LAYER, layer)
            manifest = _json(
                {
                    "schemaVersion": 2,
                    "mediaType": MT_OCI_MANIFEST,
                    "config": config,
                    "layers": [chart_layer],
                }
            )
            desc = blobs.put(MT_OCI_MANIFEST, manifest, annotations=_artifact(r))
            children.append(desc)
        elif r.input.type == "dir":
            data = reproducible_tar([("./", None), *_files(r.input.path, where)])
            mt = TAR_PLAIN
            if r.input.compress:
                data, mt = reproducible_gzip(data), TAR_GZIP
            desc = blobs.put(r.input.media_type or mt, data, annotations=_artifact(r))
            layers.append(desc)
        else:
            data = r.input.path.read_bytes()
            if len(data) > MAX_INPUT_BYTES:
                raise BuildError(where, f"{r.input.path} is larger than {MAX_INPUT_BYTES} bytes")
            mt = r.input.media_type or "application/octet-stream"
            if r.input.compress:
                data, mt = reproducible_gzip(data), mt + "+gzip"
            desc = blobs.put(mt, data, annotations=_artifact(r))
            layers.append(desc)
        entry["access"] = {
            "localReference": desc["digest"],
            "mediaType": desc["mediaType"],
            "type": "LocalBlob/v1",
        }
        entry["digest"] = _digest_spec(desc["digest"].removeprefix("sha256:"))
        resources.append(entry)

    descriptor = {
        "component": {
            "componentReferences": None,
            "name": c.name,
            "provider": c.provider,
            "repositoryContexts": None,
            "resources": resources,
            "sources": None,
            "version": c.version,
        },
        "meta": {"schemaVersion": "v2"},
    }
    layer0 = blobs.put(MT_DESCRIPTOR_JSON, _sorted_json(descriptor))
    config = blobs.put(MT_COMPONENT_CONFIG, _json({"componentDescriptorLayer": layer0}))
    notes = _annotations(c, "OCI Artifact Manifest")
    dm = blobs.put(
        MT_OCI_MANIFEST,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": MT_OCI_MANIFEST,
                "artifactType": ARTIFACT_TYPE_DESCRIPTOR,
                "config": config,
                "layers": [layer0, *layers],
                "annotations": notes,
            }
        ),
        annotations=notes,
        artifactType=ARTIFACT_TYPE_DESCRIPTOR,
    )
    index = blobs.put(
        MT_OCI_INDEX,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": MT_OCI_INDEX,
                "manifests": [dm, *children],
                "annotations": _annotations(c, "OCI Artifact Manifest Index"),
            }
        ),
    )
    repo = REPO_PREFIX + c.name
    artifacts = [
        {"repository": repo, "digest": d["digest"], "mediaType": MT_OCI_MANIFEST}
        for d in (*children, dm)
    ]
    artifacts.append(
        {
            "repository": repo,
            "tag": encode_tag(c.version),
            "digest": index["digest"],
            "mediaType": MT_OCI_INDEX,
        }
    )
    return Built(c.name, c.version, index["digest"], dm["digest"], descriptor, tuple(artifacts))


def _existing_index(out: Path) -> list[dict[str, Any]]:
    path = out / INDEX_FILE
    if not path.exists():
        if out.exists() and any(out.iterdir()):
            raise BuildError(str(out), "exists and is not a CTF (no artifact-index.json)")
        return []
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BuildError(str(path), f"cannot be read as a CTF index ({e})") from None
    arts = doc.get("artifacts") if isinstance(doc, Mapping) else None
    if not isinstance(arts, list):
        raise BuildError(str(path), "has no artifacts list")
    return [a for a in arts if isinstance(a, Mapping)]


def write_ctf(components: list[ComponentSpec], out: Path) -> list[Built]:
    """Add the component versions to the CTF at ``out`` (created if missing).

    A version already in the CTF is replaced (its tag moves; blobs are content-addressed, so
    nothing else changes). Nothing is written unless every version builds.
    """
    blobs = Blobs()
    built = [build_version(c, blobs) for c in components]
    existing = _existing_index(out)
    replaced = {(b.artifacts[-1]["repository"], b.artifacts[-1]["tag"]) for b in built}
    keep = [a for a in existing if (a.get("repository"), a.get("tag")) not in replaced]
    digests = {(a.get("repository"), a.get("digest")) for a in keep}
    new = [
        a
        for b in built
        for a in b.artifacts
        if "tag" in a or (a["repository"], a["digest"]) not in digests
    ]
    (out / "blobs").mkdir(parents=True, exist_ok=True)
    for digest, data in sorted(blobs.data.items()):
        path = out / "blobs" / ("sha256." + digest.removeprefix("sha256:"))
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
    index = {"schemaVersion": 1, "artifacts": [*keep, *new]}
    (out / INDEX_FILE).write_bytes(_json(index))
    return built


def write_directory(component: ComponentSpec, out: Path) -> Built:
    """One component version as a component directory.

    ``component-descriptor.json`` and ``blobs/sha256.<hex>`` for every localBlob (and a chart
    manifest's config and layer).
    """
    blobs = Blobs()
    built = build_version(component, blobs)
    if out.exists() and any(p for p in out.iterdir() if p.name not in ("blobs",)):
        if not (out / "component-descriptor.json").exists():
            raise BuildError(str(out), "exists and is not a component directory")
    (out / "blobs").mkdir(parents=True, exist_ok=True)
    local = {
        r["access"]["localReference"]
        for r in built.descriptor["component"]["resources"]
        if r["access"].get("type") == "LocalBlob/v1"
    }
    children: set[str] = set()
    for ref in local:  # a chart's manifest needs its config and layer next to it
        manifest = json.loads(blobs.data[ref]) if blobs.data[ref][:1] == b"{" else {}
        for d in [manifest.get("config") or {}, *(manifest.get("layers") or [])]:
            if d.get("digest"):
                children.add(d["digest"])
    for digest in sorted(local | children):
        (out / "blobs" / ("sha256." + digest.removeprefix("sha256:"))).write_bytes(
            blobs.data[digest]
        )
    (out / "component-descriptor.json").write_bytes(_sorted_json(built.descriptor))
    return built


def resource_kinds(c: ComponentSpec) -> dict[str, list[str]]:
    """Resource names by role, for the build summary and the ConfigData check."""
    out: dict[str, list[str]] = {"images": [], "deployables": [], "configdata": []}
    for r in c.resources:
        if r.image:
            out["images"].append(r.name)
        elif r.type == TYPE_CONFIGDATA:
            out["configdata"].append(r.name)
        else:
            out["deployables"].append(r.name)
    return out


def flags_spec(
    *,
    name: str,
    version: str,
    provider: str,
    chart: list[tuple[str, Path]],
    manifests: list[tuple[str, Path]],
    config_data: tuple[str, Path] | None,
    images: list[tuple[str, str]],
) -> ComponentSpec:
    """The component the flags describe, as a constructor would (the same checks)."""
    resources: list[dict[str, Any]] = []
    for rname, ref in images:
        tag = parse_reference(re.sub(r"^https?://", "", ref), where=f"--image {rname}").tag
        resources.append(
            {
                "name": rname,
                "type": TYPE_OCI_IMAGE,
                "version": tag if tag and VERSION_RE.match(tag) else version,
                "relation": "external",
                "access": {"type": "ociArtifact", "imageReference": ref},
            }
        )
    for rname, path in chart:
        resources.append(
            {
                "name": rname,
                "type": TYPE_HELM_CHART,
                "input": {"type": "helm/v1", "path": str(path)},
            }
        )
    for rname, path in manifests:
        resources.append(
            {
                "name": rname,
                "type": TYPE_KUSTOMIZE,
                "input": {"type": "dir/v1", "path": str(path), "compress": True},
            }
        )
    if config_data is not None:
        rname, path = config_data
        resources.append(
            {
                "name": rname,
                "type": TYPE_CONFIGDATA,
                "input": {"type": "file/v1", "path": str(path), "mediaType": "application/yaml"},
            }
        )
    doc = {"name": name, "version": version, "provider": {"name": provider}, "resources": resources}
    return component_spec(doc, Path.cwd(), "flags")
