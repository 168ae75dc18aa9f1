#!/usr/bin/env python3
"""Build the bundled example component, ``examples/component/ctf``, from ``inputs/``.

    python examples/component/make-component.py            # rewrite ctf/ (byte-reproducible)
    python examples/component/make-component.py --check    # exit 1 if ctf/ differs from a fresh build

Component ``acme.org/sack8s/podinfo`` in versions 6.2.0 and 6.3.0 (they differ in the chart
version only), laid out as the OCM CLI v0.9.1 writes a CTF (``artifact-index.json``; every object
``blobs/sha256.<hex>``; the version tag points to an OCI index whose child 0 is the descriptor
manifest and whose other child is the Helm chart). Resources, as in the OCM CLI fixtures:

| name | type | access |
|---|---|---|
| image | ociImage (external) | ociRegistry ``http://127.0.0.1:5000/upstream/podinfo:6.2.0@sha256:11342fe5…`` |
| chart | helmChart | localBlob, OCI manifest (chart ``inputs/chart/podinfo``) |
| manifests | kustomize.ocm.fluxcd.io | localBlob ``application/x-tar`` (``inputs/kustomize``) |
| manifests-gz | kustomize.ocm.fluxcd.io | localBlob ``application/x-tar+gzip`` (the same directory) |
| config | configdata.ocm.software | localBlob ``application/yaml`` (``inputs/config/config.yaml``) |

Teams build their own components with ``sack8s component build`` (``function/ocm/build.py``,
``docs/components.md``), which needs no test extra; this script keeps gardener-ocm's descriptor
model so the bundled CTF (and every digest the tests and docs quote) stays as it is. The
archives come from the same reproducible tar and gzip as ``sack8s component build``.

The image is the OCM CLI fixtures' test image (the digest is reused as data: the image itself is
in their registry, ``upstream/podinfo:6.2.0`` on 127.0.0.1:5000). The descriptor model is
gardener-ocm's (``ocm``, a test dependency), validated against its JSON schema. Archives are
built with fixed metadata (mtime 0, uid/gid 0, sorted entries) and gzip without a timestamp,
so the same inputs give the same digests on every machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import filecmp
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import ocm

from function.ocm.build import reproducible_gzip, reproducible_tar

HERE = Path(__file__).resolve().parent
INPUTS = HERE / "inputs"
CTF = HERE / "ctf"

NAME = "acme.org/sack8s/podinfo"
PROVIDER = "acme.org"
VERSIONS = ("6.2.0", "6.3.0")
REGISTRY = "127.0.0.1:5000"
IMAGE_REFERENCE = f"http://{REGISTRY}/upstream/podinfo:6.2.0"
IMAGE_DIGEST = (
    "11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"  # the fixtures' image
)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DESCRIPTOR_ARTIFACT = "application/vnd.ocm.software.component-descriptor.v2"
DESCRIPTOR_JSON = "application/vnd.ocm.software.component-descriptor.v2+json"
DESCRIPTOR_CONFIG = "application/vnd.ocm.software.component.config.v1+json"
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


class Blobs:
    """The CTF's ``blobs/``: content-addressed, written once."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "blobs"
        self.dir.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes) -> tuple[str, int]:
        hexdigest = hashlib.sha256(data).hexdigest()
        (self.dir / f"sha256.{hexdigest}").write_bytes(data)
        return f"sha256:{hexdigest}", len(data)

    def descriptor(self, media_type: str, data: bytes, **extra: object) -> dict:
        digest, size = self.put(data)
        return {"mediaType": media_type, "digest": digest, "size": size, **extra}


def _files(root: Path) -> list[tuple[str, bytes]]:
    return [
        (p.relative_to(root).as_posix(), p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def chart_archive(version: str) -> tuple[bytes, dict]:
    """The chart as ``helm package`` lays it out (``podinfo/Chart.yaml`` first), its version set."""
    root = INPUTS / "chart" / "podinfo"
    files = dict(_files(root))
    chart_yaml = files["Chart.yaml"].decode()
    lines = []
    for line in chart_yaml.splitlines():
        if line.startswith("version:"):
            line = f"version: {version}"
        elif line.startswith("appVersion:"):
            line = f'appVersion: "{version}"'
        lines.append(line)
    files["Chart.yaml"] = ("\n".join(lines) + "\n").encode()
    order = ["Chart.yaml"] + sorted(k for k in files if k != "Chart.yaml")
    meta = {
        "apiVersion": "v2",
        "name": "podinfo",
        "version": version,
        "appVersion": version,
        "type": "application",
    }
    return reproducible_gzip(reproducible_tar([(f"podinfo/{k}", files[k]) for k in order])), meta


def kustomize_archive() -> bytes:
    """The ``dir`` input's tar: a ``./`` entry, then the files (what the OCM CLI writes)."""
    return reproducible_tar([("./", None), *_files(INPUTS / "kustomize")])


def _artifact(name: str, version: str) -> dict:
    return {
        "software.ocm.artifact": json.dumps(
            [{"identity": {"name": name, "version": version}, "kind": "resource"}],
            separators=(",", ":"),
        )
    }


def _digest_spec(digest: str) -> ocm.DigestSpec:
    return ocm.DigestSpec(
        hashAlgorithm="SHA-256",
        normalisationAlgorithm=ocm.NormalisationAlgorithm.GENERIC_BLOB_DIGEST,
        value=digest.removeprefix("sha256:"),
    )


def _local(name: str, version: str, rtype: str, desc: dict) -> ocm.Resource:
    return ocm.Resource(
        name=name,
        version=version,
        type=rtype,
        relation=ocm.ResourceRelation.LOCAL,
        access=ocm.LocalBlobAccess(
            localReference=desc["digest"], mediaType=desc["mediaType"], size=desc["size"]
        ),
        digest=_digest_spec(desc["digest"]),
    )


def _no_nulls(obj: object) -> object:
    """gardener-ocm writes unset optionals (creationTime, globalAccess, referenceName) as null: drop them."""
    if isinstance(obj, dict):
        return {k: _no_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_no_nulls(v) for v in obj]
    return obj


def build_version(blobs: Blobs, version: str) -> list[dict]:
    """Write one component version's objects; its artifact-index entries."""
    layer, meta = chart_archive(version)
    chart_config = blobs.descriptor(HELM_CONFIG, _json(meta))
    chart_layer = blobs.descriptor(HELM_LAYER, layer)
    chart_manifest_bytes = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": chart_config,
            "layers": [chart_layer],
        }
    )
    chart_manifest = blobs.descriptor(
        OCI_MANIFEST, chart_manifest_bytes, annotations=_artifact("chart", version)
    )

    tar = kustomize_archive()
    manifests = blobs.descriptor(
        "application/x-tar", tar, annotations=_artifact("manifests", version)
    )
    manifests_gz = blobs.descriptor(
        "application/x-tar+gzip",
        reproducible_gzip(tar),
        annotations=_artifact("manifests-gz", version),
    )
    config = blobs.descriptor(
        "application/yaml",
        (INPUTS / "config" / "config.yaml").read_bytes(),
        annotations=_artifact("config", version),
    )

    component = ocm.Component(
        name=NAME,
        version=version,
        repositoryContexts=[],
        provider=PROVIDER,
        sources=[],
        componentReferences=[],
        resources=[
            ocm.Resource(
                name="image",
                version="6.2.0",
                type="ociImage",
                relation=ocm.ResourceRelation.EXTERNAL,
                access=ocm.OciAccess(imageReference=f"{IMAGE_REFERENCE}@sha256:{IMAGE_DIGEST}"),
                digest=_digest_spec(IMAGE_DIGEST),
            ),
            _local("chart", version, "helmChart", chart_manifest),
            _local("manifests", version, "kustomize.ocm.fluxcd.io", manifests),
            _local("manifests-gz", version, "kustomize.ocm.fluxcd.io", manifests_gz),
            _local("config", version, "configdata.ocm.software", config),
        ],
    )
    cd = ocm.ComponentDescriptor(
        meta=ocm.Metadata(schemaVersion=ocm.SchemaVersion.V2), component=component
    )
    raw = _no_nulls(json.loads(json.dumps(dataclasses.asdict(cd), cls=ocm.EnumJSONEncoder)))
    ocm.ComponentDescriptor.validate(raw)
    descriptor = blobs.descriptor(DESCRIPTOR_JSON, _json(raw))
    config_blob = blobs.descriptor(
        DESCRIPTOR_CONFIG, _json({"componentDescriptorLayer": descriptor})
    )

    annotations = {
        "org.opencontainers.image.title": f"OCM component descriptor for {NAME} in version {version}",
        "org.opencontainers.image.version": version,
        "software.ocm.componentversion": f"{NAME}:{version}",
        "software.ocm.creator": "examples/component/make-component.py",
    }
    dm_bytes = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": DESCRIPTOR_ARTIFACT,
            "config": config_blob,
            "layers": [descriptor, manifests, manifests_gz, config],
            "annotations": annotations,
        }
    )
    dm = blobs.descriptor(
        OCI_MANIFEST, dm_bytes, artifactType=DESCRIPTOR_ARTIFACT, annotations=annotations
    )
    index = blobs.descriptor(
        OCI_INDEX,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": [dm, chart_manifest],
                "annotations": annotations,
            }
        ),
    )
    repo = f"component-descriptors/{NAME}"
    return [
        {"repository": repo, "digest": chart_manifest["digest"], "mediaType": OCI_MANIFEST},
        {"repository": repo, "digest": dm["digest"], "mediaType": OCI_MANIFEST},
        {"repository": repo, "tag": version, "digest": index["digest"], "mediaType": OCI_INDEX},
    ]


def build(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    blobs = Blobs(root)
    artifacts = [a for version in VERSIONS for a in build_version(blobs, version)]
    (root / "artifact-index.json").write_bytes(_json({"schemaVersion": 1, "artifacts": artifacts}))


def same_tree(a: Path, b: Path) -> list[str]:
    """Paths that differ between two trees (missing on either side, or other bytes)."""
    fa = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()} if a.exists() else set()
    fb = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    return sorted((fa ^ fb) | {f for f in fa & fb if not filecmp.cmp(a / f, b / f, shallow=False)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare ctf/ with a fresh build instead of writing it"
    )
    parser.add_argument(
        "--out", type=Path, default=CTF, help="where to write the CTF (default: ctf/)"
    )
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp) / "ctf")
            diff = same_tree(args.out, Path(tmp) / "ctf")
        if diff:
            print(f"{args.out} differs from a fresh build: {', '.join(diff[:10])}", file=sys.stderr)
            return 1
        print(f"{args.out} is what make-component.py builds")
        return 0
    build(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
