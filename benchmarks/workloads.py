"""Benchmark workloads: an OCM component version per size, written into a real registry.

A workload is ``(namespaces, secrets, images, rules)``. For each, :func:`build` makes

* a component descriptor (OCM v2 JSON, as the OCM CLI v0.9.1 writes it) with ``images``
  ``ociImage`` resources (``ociArtifact`` access, ``127.0.0.1:5000/x/img-<i>:1.0@sha256:…``),
  a Kustomize resource (``localBlob`` ``application/x-tar+gzip``: ``images`` Deployment
  manifests plus a ``kustomization.yaml``) and a ConfigData resource (``application/yaml``)
  with ``rules`` rules: one ``image`` localization rule per Deployment, the rest
  configuration rules writing values (``(( settings.sK ))``) into the Deployments;
* the XR (cluster-scoped v2 SACK8sComponentVersion) asking for ``namespaces`` namespaces and
  ``secrets`` service secrets spread over them, and inline values;
* the policy (function input) allowing that registry, store and prefixes.

:func:`push` stores the component with the OCI layout the OCM CLI uses (FACTS.md §3): the
tag points to an OCI index whose child with ``artifactType``
``application/vnd.ocm.software.component-descriptor.v2`` is the descriptor manifest; its
config (``application/vnd.ocm.software.component.config.v1+json``) names the descriptor
layer (plain JSON); the tar+gzip and the ConfigData are further layers of that manifest.
Uploads use the plain registry API (monolithic ``POST``/``PUT`` blob upload, ``PUT``
manifest), over loopback HTTP.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import urllib.request
from dataclasses import dataclass, field
from typing import Any

COMPONENT = "bench.example.org/sack8s/svc"
VERSION = "1.0.0"
BASE = "bench"
IMAGE_HOST = "127.0.0.1:5000"

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.ocm.software.component.config.v1+json"
MT_DESCRIPTOR = "application/vnd.ocm.software.component-descriptor.v2+json"
AT_DESCRIPTOR = "application/vnd.ocm.software.component-descriptor.v2"
MT_TGZ = "application/x-tar+gzip"
MT_YAML = "application/yaml"


@dataclass(frozen=True)
class Size:
    namespaces: int
    secrets: int
    images: int
    rules: int

    def scaled(self, f: int) -> Size:
        return Size(self.namespaces * f, self.secrets * f, self.images * f, self.rules * f)


SIZES: dict[str, Size] = {
    "small": Size(1, 1, 1, 3),
    "medium": Size(3, 5, 10, 20),
    "large": Size(20, 50, 100, 300),
}
#: Scaling series: every dimension ×1, ×2, ×5, ×10 (the ×10 point equals "large").
SCALING_BASE = Size(2, 5, 10, 30)
SCALING_FACTORS = (1, 2, 5, 10)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _deployment(i: int) -> str:
    return f"""# generated benchmark manifest {i}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc-{i}
  labels:
    app: svc-{i}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: svc-{i}
  template:
    metadata:
      labels:
        app: svc-{i}
    spec:
      containers:
        - name: svc
          image: example.org/upstream/img-{i}:1.0
          ports:
            - name: http
              containerPort: 8080
"""


def _tgz(files: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _configdata(size: Size) -> str:
    lines = [
        "apiVersion: config.ocm.software/v1alpha1",
        "kind: ConfigData",
        "metadata:",
        "  name: svc-config",
        "localization:",
    ]
    for i in range(size.images):
        lines += [
            f"  - name: img-{i}",
            f"    file: deploy-{i}.yaml",
            "    image: spec.template.spec.containers[0].image",
            "    resource:",
            f"      name: img-{i}",
        ]
    n_conf = max(0, size.rules - size.images)
    lines += ["configuration:", "  defaults:", "    replicas: 1", "    settings:"]
    lines += [f"      s{k}: value-{k}" for k in range(n_conf)] or ["      {}"]
    lines += [
        "  schema:",
        "    type: object",
        "    additionalProperties: false",
        "    properties:",
        "      replicas:",
        "        type: integer",
        "        minimum: 0",
        "      settings:",
        "        type: object",
        "        additionalProperties:",
        "          type: string",
        "  rules:",
    ]
    for k in range(n_conf):
        i = k % size.images
        if k < size.images:
            lines += [
                "    - value: (( replicas ))",
                f"      file: deploy-{i}.yaml",
                "      path: spec.replicas",
            ]
        else:
            lines += [
                f"    - value: (( settings.s{k} ))",
                f"      file: deploy-{i}.yaml",
                f"      path: metadata.labels.r{k}",
            ]
    if not n_conf:
        lines[-1] = "  rules: []"
    return "\n".join(lines) + "\n"


@dataclass
class Component:
    size: Size
    descriptor: bytes
    tgz: bytes
    configdata: bytes
    files: dict[str, str] = field(default_factory=dict)
    version: str = VERSION


def image_digest(i: int) -> str:
    return sha(f"benchmark image {i}".encode())


def build_component(size: Size, version: str = VERSION, mark: str = "") -> Component:
    files = {f"deploy-{i}.yaml": _deployment(i) for i in range(size.images)}
    if version != VERSION:  # another version of the same component: other manifest bytes
        files["deploy-0.yaml"] += f"# {COMPONENT} {version}\n"
    if mark:  # another component's content (its own digests, nothing shared in the caches)
        files["deploy-0.yaml"] += f"# {mark}\n"
    files["kustomization.yaml"] = (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
        + "".join(f"  - deploy-{i}.yaml\n" for i in range(size.images))
    )
    tgz = _tgz(files)
    cd = _configdata(size).encode()

    def digest_of(d: str) -> dict[str, str]:
        return {
            "hashAlgorithm": "SHA-256",
            "normalisationAlgorithm": "genericBlobDigest/v1",
            "value": d.split(":", 1)[1],
        }

    resources: list[dict[str, Any]] = []
    for i in range(size.images):
        dg = image_digest(i)
        resources.append(
            {
                "access": {
                    "imageReference": f"{IMAGE_HOST}/x/img-{i}:1.0@{dg}",
                    "type": "ociArtifact",
                },
                "digest": digest_of(dg),
                "name": f"img-{i}",
                "relation": "external",
                "type": "ociImage",
                "version": "1.0",
            }
        )
    resources.append(
        {
            "access": {"localReference": sha(tgz), "mediaType": MT_TGZ, "type": "LocalBlob/v1"},
            "digest": digest_of(sha(tgz)),
            "name": "manifests",
            "relation": "local",
            "type": "kustomize.ocm.fluxcd.io",
            "version": version,
        }
    )
    resources.append(
        {
            "access": {"localReference": sha(cd), "mediaType": MT_YAML, "type": "LocalBlob/v1"},
            "digest": digest_of(sha(cd)),
            "name": "config",
            "relation": "local",
            "type": "configdata.ocm.software",
            "version": version,
        }
    )
    desc = {
        "component": {
            "componentReferences": None,
            "name": COMPONENT,
            "provider": "bench.example.org",
            "repositoryContexts": None,
            "resources": resources,
            "sources": None,
            "version": version,
        },
        "meta": {"schemaVersion": "v2"},
    }
    return Component(
        size, json.dumps(desc, separators=(",", ":")).encode(), tgz, cd, files, version
    )


def base_of(size: Size) -> str:
    return f"{BASE}/n{size.namespaces}-s{size.secrets}-i{size.images}-r{size.rules}"


# -- the registry API --------------------------------------------------------------------


def _req(
    method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> Any:
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    return urllib.request.urlopen(req, timeout=30)


def put_blob(host: str, repo: str, data: bytes) -> str:
    digest = sha(data)
    try:
        _req("HEAD", f"http://{host}/v2/{repo}/blobs/{digest}")
        return digest
    except urllib.error.HTTPError:
        pass
    with _req("POST", f"http://{host}/v2/{repo}/blobs/uploads/", b"") as r:
        loc = r.headers["Location"]
    if loc.startswith("/"):
        loc = f"http://{host}{loc}"
    sep = "&" if "?" in loc else "?"
    with _req(
        "PUT", f"{loc}{sep}digest={digest}", data, {"Content-Type": "application/octet-stream"}
    ) as r:
        assert r.status in (201, 204), r.status
    return digest


def put_manifest(host: str, repo: str, ref: str, doc: dict[str, Any], media_type: str) -> str:
    data = json.dumps(doc, separators=(",", ":")).encode()
    with _req(
        "PUT", f"http://{host}/v2/{repo}/manifests/{ref}", data, {"Content-Type": media_type}
    ) as r:
        assert r.status == 201, r.status
    return sha(data)


def push(host: str, comp: Component, base: str) -> str:
    """Store ``comp`` under ``oci::http://host/base``; returns the descriptor-manifest digest."""
    repo = f"{base}/component-descriptors/{COMPONENT}"
    d_desc = put_blob(host, repo, comp.descriptor)
    d_tgz = put_blob(host, repo, comp.tgz)
    d_cd = put_blob(host, repo, comp.configdata)
    config = json.dumps(
        {
            "componentDescriptorLayer": {
                "mediaType": MT_DESCRIPTOR,
                "digest": d_desc,
                "size": len(comp.descriptor),
            }
        },
        separators=(",", ":"),
    ).encode()
    d_cfg = put_blob(host, repo, config)

    def art(name: str) -> dict[str, str]:
        return {
            "software.ocm.artifact": json.dumps(
                [{"identity": {"name": name, "version": comp.version}, "kind": "resource"}],
                separators=(",", ":"),
            )
        }

    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "artifactType": AT_DESCRIPTOR,
        "config": {"mediaType": MT_CONFIG, "digest": d_cfg, "size": len(config)},
        "layers": [
            {"mediaType": MT_DESCRIPTOR, "digest": d_desc, "size": len(comp.descriptor)},
            {
                "mediaType": MT_TGZ,
                "digest": d_tgz,
                "size": len(comp.tgz),
                "annotations": art("manifests"),
            },
            {
                "mediaType": MT_YAML,
                "digest": d_cd,
                "size": len(comp.configdata),
                "annotations": art("config"),
            },
        ],
        "annotations": {
            "software.ocm.componentversion": f"{COMPONENT}:{comp.version}",
            "software.ocm.creator": "sack8s benchmarks",
        },
    }
    mdata = json.dumps(manifest, separators=(",", ":")).encode()
    d_man = put_manifest(host, repo, sha(mdata), manifest, MT_MANIFEST)
    index = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [
            {
                "mediaType": MT_MANIFEST,
                "digest": d_man,
                "size": len(mdata),
                "artifactType": AT_DESCRIPTOR,
            }
        ],
        "annotations": {
            "software.ocm.componentversion": f"{COMPONENT}:{comp.version}",
            "software.ocm.creator": "sack8s benchmarks",
        },
    }
    put_manifest(host, repo, comp.version, index, MT_INDEX)
    return d_man


# -- XR and policy -------------------------------------------------------------------------


def xr_for(size: Size, host: str, base: str, name: str = "bench") -> dict[str, Any]:
    namespaces = [
        {"name": f"{name}--ns-{i}", "mode": "create"} for i in range(size.namespaces)
    ]  # the tenant's space
    secrets = [
        {
            "name": f"sec-{j}",
            "namespace": f"{name}--ns-{j % size.namespaces}",
            "storeRef": {"name": "bench-vault", "kind": "ClusterSecretStore"},
            "data": [
                {
                    "secretKey": "PASSWORD",
                    "remoteRef": {"key": f"bench/{name}/sec-{j}", "property": "password"},
                }
            ],
        }
        for j in range(size.secrets)
    ]
    return {
        "apiVersion": "platform.example.org/v1alpha1",
        "kind": "SACK8sComponentVersion",
        "metadata": {"name": name},
        "spec": {
            "component": {
                "name": COMPONENT,
                "version": f">={VERSION} <2",
                "repository": f"oci::http://{host}/{base}",
            },
            "deploy": {"resource": {"name": "manifests"}},
            "namespaces": namespaces,
            "values": {
                "inline": {
                    "replicas": 3,
                    "settings": {"s0": "from-the-claim"} if size.rules > size.images else {},
                }
            },
            "secrets": secrets,
        },
    }


def policy_for(host: str) -> dict[str, Any]:
    return {
        "apiVersion": "sack8s.fn.crossplane.io/v1beta1",
        "kind": "Policy",
        "registries": [{"host": host, "plainHTTP": True}, {"host": IMAGE_HOST, "plainHTTP": True}],
        "secretStores": [
            {"name": "bench-vault", "kind": "ClusterSecretStore", "remoteKeyPrefixes": ["bench/"]}
        ],
        "ocm": {"enabled": True, "gate": False},
    }
