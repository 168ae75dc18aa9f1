"""Where things are in the bundled example component (``examples/component/ctf``).

The CTF is rebuilt by ``examples/component/make-component.py`` whenever its inputs change,
which changes its digests; tests find blobs by walking the CTF from its tags instead of
hard-coding them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CTF = REPO / "examples" / "component" / "ctf"
BLOBS = CTF / "blobs"
NAME = "acme.org/sack8s/podinfo"
IMAGE_DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
IMAGE = f"127.0.0.1:5000/upstream/podinfo:6.2.0@{IMAGE_DIGEST}"


def blob(digest: str) -> Path:
    return BLOBS / f"sha256.{digest.removeprefix('sha256:')}"


def _json(digest: str) -> dict:
    return json.loads(blob(digest).read_text())


@dataclass(frozen=True)
class Version:
    index: str  # the tag's OCI index
    descriptor_manifest: str
    descriptor: Path  # the descriptor JSON blob
    resources: dict[str, dict]  # by resource name, as in the descriptor

    def local(self, name: str) -> str:
        return self.resources[name]["access"]["localReference"]

    def path(self, name: str) -> Path:
        return blob(self.local(name))


@cache
def version(v: str = "6.2.0") -> Version:
    index = json.loads((CTF / "artifact-index.json").read_text())
    (entry,) = [a for a in index["artifacts"] if a.get("tag") == v]
    children = _json(entry["digest"])["manifests"]
    (dm,) = [
        c
        for c in children
        if c.get("artifactType") == "application/vnd.ocm.software.component-descriptor.v2"
    ]
    manifest = _json(dm["digest"])
    layer = json.loads(blob(manifest["config"]["digest"]).read_text())["componentDescriptorLayer"][
        "digest"
    ]
    descriptor = json.loads(blob(layer).read_text())
    resources = {r["name"]: r for r in descriptor["component"]["resources"]}
    return Version(entry["digest"], dm["digest"], blob(layer), resources)


def chart_config(v: str = "6.2.0") -> Path:
    """The Helm config blob of the chart's OCI manifest."""
    return blob(_json(version(v).local("chart"))["config"]["digest"])
