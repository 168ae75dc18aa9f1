"""Write an OCM component version into a registry at test time with ``gardener-ocm`` (PyPI).

The OCM CLI is not available on these machines (its committed fixtures stay as data); this
is the writer the tests use instead. ``gardener-ocm`` stores the descriptor as a tar layer
(``application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar``) of one manifest
that the tag names, with every ``localBlob`` as a further layer of that manifest: a layout the
function's OCI source reads, and one whose tar+gzip layer Flux's ``layerSelector`` finds.
Plain HTTP is reached through ``oci.client``'s route lookup (it assumes HTTPS otherwise), with
its auth method preset to basic (anonymous here) so that it skips its HTTPS-only ``/v2/`` probe.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Blob:
    name: str  # resource name
    type: str  # OCM resource type
    media_type: str
    data: bytes


def tgz(directory: Path) -> bytes:
    """A reproducible tar+gzip of ``directory`` (sorted entries, no mtimes or owners)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            data = path.read_bytes()
            info = tarfile.TarInfo(str(path.relative_to(directory)))
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def push(
    host: str,
    base: str,
    name: str,
    version: str,
    blobs: list[Blob],
    images: dict[str, str],
    *,
    plain_http: bool = True,
    sign: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Upload ``name:version`` to ``oci::http(s)://host/base``: ``blobs`` as localBlobs, ``images``
    (resource name -> digest-pinned reference) as external ``ociImage`` resources. ``sign``
    adds signatures to the descriptor as stored (support/signing.py ``sign``) before the
    upload. Returns the descriptor as stored (a plain dict)."""
    import oci.client
    import ocm
    import ocm.upload
    import requests

    scheme = "http" if plain_http else "https"
    client = oci.client.Client(
        session=requests.Session(),
        max_retries=0,
        routes=oci.client.OciRoutes(
            base_api_url_lookup=lambda image_reference: f"{scheme}://{host}/v2/"
        ),
    )
    repo_ctx = ocm.OciOcmRepository(baseUrl=f"{host}/{base}")
    target = repo_ctx.component_version_oci_ref(name, version)
    client.token_cache.set_auth_method(target, oci.client.AuthMethod.BASIC)
    resources = []
    for b in blobs:
        digest = f"sha256:{hashlib.sha256(b.data).hexdigest()}"
        client.put_blob(
            image_reference=target, digest=digest, octets_count=len(b.data), data=b.data
        )
        resources.append(
            ocm.Resource(
                name=b.name,
                version=version,
                type=b.type,
                relation=ocm.ResourceRelation.LOCAL,
                access=ocm.LocalBlobAccess(
                    localReference=digest, mediaType=b.media_type, size=len(b.data)
                ),
                digest=ocm.DigestSpec(
                    hashAlgorithm="SHA-256",
                    normalisationAlgorithm=ocm.NormalisationAlgorithm.GENERIC_BLOB_DIGEST,
                    value=digest.removeprefix("sha256:"),
                ),
            )
        )
    for res_name, ref in sorted(images.items()):
        resources.append(
            ocm.Resource(
                name=res_name,
                version=version,
                type="ociImage",
                relation=ocm.ResourceRelation.EXTERNAL,
                access=ocm.OciAccess(imageReference=ref),
                digest=ocm.DigestSpec.from_oci_artifact_digest(ref.rsplit("@", 1)[1]),
            )
        )
    component = ocm.Component(
        name=name,
        version=version,
        repositoryContexts=[repo_ctx],
        provider="acme.org",
        sources=[],
        componentReferences=[],
        resources=resources,
    )
    cd = ocm.ComponentDescriptor(meta=ocm.Metadata(), component=component, signatures=[])
    raw = json.loads(json.dumps(dataclasses.asdict(cd), cls=ocm.EnumJSONEncoder))
    if sign is not None:
        sign(raw)
        cd.signatures = [
            ocm.Signature(
                name=s["name"],
                digest=ocm.DigestSpec(**s["digest"]),
                signature=ocm.SignatureSpec(**s["signature"]),
            )
            for s in raw["signatures"]
        ]
    ocm.upload.upload_component_descriptor(cd, oci_client=client, on_exist="overwrite")
    return raw
