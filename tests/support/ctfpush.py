"""Push a CTF (Common Transport Format, as the OCM CLI writes it) into an OCI registry.

Every artifact of ``artifact-index.json`` goes to ``<base>/<repository>``, byte for byte, so
the digests the CTF records stay valid: the blobs a manifest names first, then the manifest by
digest, and an index (the tagged component versions) only after the manifests it lists.
Uploads use gardener-ocm's OCI client (``oci.client``), a maintained implementation of the
distribution push protocol; it speaks HTTPS only, so the registry is a TLS one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


def push_ctf(ctf: Path, host: str, base: str, ca_file: Path) -> list[str]:
    """Push every artifact of the CTF at ``ctf`` to ``host``; returns the references pushed."""
    import oci.client
    import requests

    # The client asks requests to verify with its default bundle, which REQUESTS_CA_BUNDLE names.
    saved = os.environ.get("REQUESTS_CA_BUNDLE")
    os.environ["REQUESTS_CA_BUNDLE"] = str(ca_file)
    try:
        return _push(oci.client.Client(session=requests.Session(), max_retries=0), ctf, host, base)
    finally:
        if saved is None:
            os.environ.pop("REQUESTS_CA_BUNDLE", None)
        else:
            os.environ["REQUESTS_CA_BUNDLE"] = saved


def _push(client, ctf: Path, host: str, base: str) -> list[str]:
    blobs = ctf / "blobs"

    def blob(digest: str) -> bytes:
        return (blobs / digest.replace(":", ".", 1)).read_bytes()

    artifacts = json.loads((ctf / "artifact-index.json").read_text())["artifacts"]
    pushed = []
    # manifests before the indexes that list them
    for art in sorted(artifacts, key=lambda a: a.get("mediaType") in INDEX_TYPES):
        repo = f"{host}/{base}/{art['repository']}"
        raw = blob(art["digest"])
        doc = json.loads(raw)
        if art.get("mediaType") not in INDEX_TYPES:
            for desc in [doc["config"], *doc.get("layers", [])]:
                data = blob(desc["digest"])
                client.put_blob(f"{repo}@{desc['digest']}", desc["digest"], len(data), data)
        ref = f"{repo}:{art['tag']}" if art.get("tag") else f"{repo}@{art['digest']}"
        client.put_manifest(ref, raw)
        pushed.append(ref)
    return pushed
