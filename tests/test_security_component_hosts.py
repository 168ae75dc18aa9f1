"""Hostile components (issue 31, item 7): other hosts, the filesystem, escapes into composed objects.

A component is tenant-authored: any team allowed to publish into an allowlisted repository can
write any descriptor, chart or Kustomize directory. Each case publishes such a component (a
copy of the bundled CTF, re-hashed by ``support.ctfedit`` so the real reader's digest checks
pass; the registry cases push it into a real ``docker-registry``) and renders the bundled
claim against it through RunFunction. Each asserts either one bounded refusal that names the
resource, the host or the file and entry at fault (CPU time measured, never wall time), or a
render in which the hostile part was neutralised, with the allowlist and tenancy invariants
of ``support.invariants`` checked on every composed object.

The classes, and where the product answers them:

* other hosts -- an ``access``/``globalAccess`` naming a host off ``registries[]`` or a plain
  HTTP the policy does not allow for that host (``function.compose.fetchhosts``); the Flux
  source is always the component's own repository, where the function read
  (``function.ocm.access.flux_source``); images off ``imageRegistries``;
* filesystem -- a kustomization or Helm dependency that leaves the deployable
  (``function.compose.selfcontained``), also reported by ``sack8s check``;
* escapes into composed objects -- descriptor identity fields that would rename the resource
  the OCM controller tracks (``function.compose.ocmobjects.tracked_identity``), descriptor
  strings aimed at the OCIRepository's fields.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import hashlib
import io
import json
import posixpath
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from crossplane.function import logging as sdklogging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import REPO, example
from support import ctfedit, example_component
from support.invariants import check_render
from support.settle import converge

from function.cache import Cache
from function.cli import main as cli_main
from function.compose import selfcontained
from function.edge.fn import FunctionRunner
from function.edge.render import Rendered, load_docs, render
from function.edge.sources import SourceFactory

CPU_SECONDS = 5.0  # a refusal is cheap: benign renders take 0.05-0.5 s of CPU
METADATA = "169.254.169.254"
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def _quiet():
    sdklogging.configure(sdklogging.Level.DISABLED)


# -- building hostile components -------------------------------------------------------------


def _put(ctf: Path, data: bytes) -> tuple[str, int]:
    hexd = hashlib.sha256(data).hexdigest()
    (ctf / "blobs" / f"sha256.{hexd}").write_bytes(data)
    return f"sha256:{hexd}", len(data)


def _targz(files: dict[str, str], prefix: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def _res(descriptor: dict[str, Any], name: str) -> dict[str, Any]:
    (res,) = [r for r in descriptor["component"]["resources"] if r["name"] == name]
    return res


def bundled_chart_files() -> dict[str, str]:
    """The bundled chart's files (top directory stripped), from its OCI manifest's layer."""
    manifest = json.loads(example_component.version().path("chart").read_bytes())
    layer = example_component.blob(manifest["layers"][0]["digest"]).read_bytes()
    out = {}
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[m.name.split("/", 1)[1]] = tar.extractfile(m).read().decode()  # type: ignore[union-attr]
    return out


def bundled_kustomize_files() -> dict[str, str]:
    root = example_component.REPO / "examples/component/inputs/kustomize"
    return {p.name: p.read_text() for p in sorted(root.iterdir()) if p.is_file()}


def hostile(
    dest: Path,
    *,
    edit: Callable[[dict[str, Any]], None] | None = None,
    chart: dict[str, str] | None = None,
    kustomize: dict[str, str] | None = None,
) -> Path:
    """A copy of the bundled CTF whose 6.2.0 has ``edit`` applied to its descriptor, and
    optionally another chart or another Kustomize directory (re-hashed up to the tag)."""

    def change(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        new: dict[str, tuple[str, int]] = {}
        if chart is not None:
            res = _res(descriptor, "chart")
            old = res["access"]["localReference"]
            manifest = json.loads((ctf / "blobs" / f"sha256.{old.split(':')[1]}").read_bytes())
            layer = _put(ctf, _targz(chart, "podinfo/"))
            manifest["layers"][0].update(digest=layer[0], size=layer[1])
            new[old] = _put(ctf, json.dumps(manifest).encode())
            res["access"]["localReference"] = new[old][0]
            res["digest"]["value"] = new[old][0].split(":")[1]
        if kustomize is not None:
            res = _res(descriptor, "manifests-gz")
            old = res["access"]["localReference"]
            new[old] = _put(ctf, _targz(kustomize, "./"))
            res["access"]["localReference"] = new[old][0]
            res["digest"]["value"] = new[old][0].split(":")[1]
        if edit is not None:
            edit(descriptor)
        return new

    return ctfedit.rewritten(dest, change)


def claim(ctf: Path, flavour: str = "helm") -> tuple[dict[str, Any], dict[str, Any]]:
    xr, policy = example()
    if flavour == "kustomize":
        (xr,) = load_docs([REPO / "examples/xr-kustomize.yaml"])
    xr["spec"]["component"]["version"] = "6.2.0"
    policy["mirrors"][0]["path"] = str(ctf)
    return xr, policy


def run(xr: dict[str, Any], policy: dict[str, Any]) -> Rendered:
    started = time.process_time()
    out = asyncio.run(
        render(xr, policy, runner=FunctionRunner(sources=SourceFactory(cache=Cache())))
    )
    spent = time.process_time() - started
    assert spent < CPU_SECONDS, f"a hostile component cost {spent:.1f} s of CPU"
    return out


def refused(out: Rendered, *parts: str) -> str:
    fatals = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1, [(r.reason, r.message) for r in out.results]
    assert out.resources == [], "a refusal composes nothing (never a partial desired state)"
    msg = fatals[0].message
    assert fatals[0].reason != "InternalError", msg
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


def settled(xr: dict[str, Any], policy: dict[str, Any]) -> Rendered:
    """Every reconcile until the Flux objects are composed; invariants checked on each."""
    renders, _ = asyncio.run(
        converge(xr, policy, runner=FunctionRunner(sources=SourceFactory(cache=Cache())))
    )
    for out in renders:
        check_render(out, xr, policy)
    last = renders[-1]
    assert any(o["kind"] == "OCIRepository" for o in last.resources), "no Flux source composed"
    return last


def by_kind(out: Rendered, kind: str) -> dict[str, Any]:
    (obj,) = [o for o in out.resources if o["kind"] == kind]
    return obj


def _global(resource: str, access: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, resource)["access"]["globalAccess"] = access

    return edit


# -- other hosts -------------------------------------------------------------------------------

OTHER_HOSTS = {
    "chart-globalaccess-metadata": (
        "chart",
        {"type": "ociArtifact", "imageReference": f"{METADATA}/latest/meta-data@{DIGEST}"},
        METADATA,
    ),
    "chart-globalaccess-oci-scheme": (
        "chart",
        {"type": "ociArtifact/v1", "imageReference": f"oci://{METADATA}/latest/meta-data:1"},
        METADATA,
    ),
    "chart-globalaccess-public": (
        "chart",
        {"type": "OCIImage/v1", "imageReference": f"ghcr.io/evil/chart:6.2.0@{DIGEST}"},
        "ghcr.io",
    ),
    "chart-globalaccess-other-port": (
        "chart",
        {"type": "ociArtifact", "imageReference": f"http://127.0.0.1:5001/source/chart@{DIGEST}"},
        "127.0.0.1:5001",
    ),
    "chart-globalaccess-ociblob": (
        "chart",
        {"type": "ociBlob", "ref": f"{METADATA}/x", "digest": DIGEST},
        METADATA,
    ),
    "chart-globalaccess-wget": (
        "chart",
        {"type": "wget", "url": f"http://{METADATA}/latest/meta-data"},
        METADATA,
    ),
    "manifests-globalaccess": (
        "manifests-gz",
        {"type": "ociArtifact", "imageReference": f"{METADATA}/k@{DIGEST}"},
        METADATA,
    ),
    "configdata-globalaccess": (
        "config",
        {"type": "s3", "bucket": "b", "endpoint": f"https://{METADATA}:443/"},
        METADATA,
    ),
    "nested-globalaccess": (
        "chart",
        {
            "type": "localBlob",
            "localReference": DIGEST,
            "mediaType": "application/octet-stream",
            "globalAccess": {"type": "ociArtifact", "imageReference": f"{METADATA}/x@{DIGEST}"},
        },
        METADATA,
    ),
}


@pytest.mark.parametrize("case", list(OTHER_HOSTS))
def test_access_naming_another_host_is_refused(tmp_path: Path, case: str) -> None:
    resource, access, host = OTHER_HOSTS[case]
    flavour = "kustomize" if resource == "manifests-gz" else "helm"
    xr, policy = claim(hostile(tmp_path / "ctf", edit=_global(resource, access)), flavour)
    refused(run(xr, policy), f"resource {resource}", host, "registries")


def test_globalaccess_without_a_location_is_refused(tmp_path: Path) -> None:
    xr, policy = claim(hostile(tmp_path / "ctf", edit=_global("chart", {"type": "npm"})))
    refused(run(xr, policy), "resource chart", "'npm'", "names no location")


def test_chart_stored_on_another_host_is_refused_naming_it(tmp_path: Path) -> None:
    """The deployable's own access off the component: named, and nothing is fetched from it."""

    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "chart")["access"] = {
            "type": "ociArtifact",
            "imageReference": f"http://{METADATA}/latest/meta-data@{DIGEST}",
        }

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    refused(run(xr, policy), "resource chart", METADATA)


def test_plain_http_globalaccess_to_a_tls_host_is_refused(tmp_path: Path) -> None:
    """Plain HTTP only where the policy says so for that exact host."""
    access = {"type": "ociArtifact", "imageReference": f"http://registry.example.com/c@{DIGEST}"}
    xr, policy = claim(hostile(tmp_path / "ctf", edit=_global("chart", access)))
    policy["registries"].append({"host": "registry.example.com"})
    refused(run(xr, policy), "resource chart", "registry.example.com", "plain HTTP")


def test_globalaccess_on_the_allowlist_is_not_followed(tmp_path: Path) -> None:
    """Flux fetches what the function read -- the local copy in the component repository --
    never the globalAccess, and no setting of the claim's registry (insecure) leaks to it."""
    access = {"type": "ociArtifact", "imageReference": f"registry.example.com/mirror@{DIGEST}"}
    xr, policy = claim(hostile(tmp_path / "ctf", edit=_global("chart", access)))
    policy["registries"].append({"host": "registry.example.com"})
    out = settled(xr, policy)
    src = by_kind(out, "OCIRepository")["spec"]
    assert src["url"] == "oci://127.0.0.1:5000/source/component-descriptors/acme.org/sack8s/podinfo"
    assert src["ref"] == {"digest": chart_reference(policy)}
    assert src["insecure"] is True  # the policy allows plain HTTP to 127.0.0.1:5000 only


def chart_reference(policy: dict[str, Any]) -> str:
    """The chart's localReference in the component the mirror serves (read back, not assumed)."""
    descriptor = ctfedit.bundled_descriptor(ctf=Path(policy["mirrors"][0]["path"]))
    return _res(descriptor, "chart")["access"]["localReference"]


def test_image_globalaccess_to_the_metadata_service_is_refused(tmp_path: Path) -> None:
    access = {
        "type": "localBlob",
        "localReference": DIGEST,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "globalAccess": {"type": "ociArtifact", "imageReference": f"{METADATA}/img@{DIGEST}"},
    }

    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "image")["access"] = access

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    refused(run(xr, policy), "resource image", METADATA)


def test_the_tls_settings_come_from_the_policy_entry_for_the_host(tmp_path: Path) -> None:
    """A TLS registry: no insecure, the host's certSecretRef; a globalAccess to the same host
    over plain HTTP is refused, the same host over TLS is accepted and not followed."""
    xr, policy = claim(hostile(tmp_path / "ctf"))
    xr["spec"]["component"]["repository"] = "oci::https://registry.example.com/source"
    policy["registries"] = [{"host": "registry.example.com", "certSecretName": "registry-ca"}]
    policy["mirrors"][0]["repository"] = "oci::https://registry.example.com/source"
    policy["imageRegistries"] = [{"host": "127.0.0.1:5000", "pullCredential": True}]
    out = settled(xr, policy)
    src = by_kind(out, "OCIRepository")["spec"]
    assert "insecure" not in src and src["certSecretRef"] == {"name": "registry-ca"}
    assert src["url"].startswith("oci://registry.example.com/source/")
    repo = by_kind(out, "Repository")["spec"]["repositorySpec"]
    assert repo["baseUrl"] == "https://registry.example.com"

    access = {"type": "ociArtifact", "imageReference": f"http://registry.example.com/x@{DIGEST}"}
    xr2, policy2 = claim(hostile(tmp_path / "ctf2", edit=_global("chart", access)))
    xr2["spec"]["component"] = xr["spec"]["component"]
    policy2.update(registries=policy["registries"], imageRegistries=policy["imageRegistries"])
    policy2["mirrors"][0]["repository"] = policy["mirrors"][0]["repository"]
    refused(run(xr2, policy2), "resource chart", "registry.example.com", "plain HTTP")


# -- escapes into composed objects -----------------------------------------------------------


def test_descriptor_extra_identity_cannot_rename_the_tracked_resource(tmp_path: Path) -> None:
    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "chart")["extraIdentity"] = {"name": "config", "arch": "amd64"}

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    out = settled(xr, policy)
    ref = by_kind(out, "Resource")["spec"]["resource"]["byReference"]["resource"]
    assert ref == {"name": "chart", "arch": "amd64"}, ref


def test_claim_extra_identity_wins_and_is_kept(tmp_path: Path) -> None:
    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "chart")["extraIdentity"] = {"arch": "amd64", "variant": "x"}

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    xr["spec"]["deploy"]["resource"] = {"name": "chart", "extraIdentity": {"arch": "amd64"}}
    out = settled(xr, policy)
    ref = by_kind(out, "Resource")["spec"]["resource"]["byReference"]["resource"]
    assert ref == {"name": "chart", "arch": "amd64", "variant": "x"}, ref


@pytest.mark.parametrize(
    "local_reference",
    [
        "sha256:" + "a" * 64 + "\ninsecure: true",
        "sha256:../../../etc/passwd",
        "sha512:" + "a" * 64,
    ],
)
def test_local_reference_cannot_write_into_the_flux_source(
    tmp_path: Path, local_reference: str
) -> None:
    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "chart")["access"]["localReference"] = local_reference

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    refused(run(xr, policy), "resource chart")


def test_the_flux_source_never_carries_a_tag(tmp_path: Path) -> None:
    """A chart whose descriptor names a tag-like version still gets a digest-pinned source."""

    def edit(descriptor: dict[str, Any]) -> None:
        _res(descriptor, "chart")["version"] = "latest"
        _res(descriptor, "chart")["access"]["referenceName"] = "evil/chart:latest"

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    src = by_kind(settled(xr, policy), "OCIRepository")["spec"]
    assert set(src["ref"]) == {"digest"} and src["ref"]["digest"].startswith("sha256:")


@pytest.mark.parametrize("field,value", [("name", "acme.org/sack8s/other"), ("version", "9.9.9")])
def test_a_descriptor_stored_under_another_identity_is_refused(
    tmp_path: Path, field: str, value: str
) -> None:
    """The OCM Component names what the claim resolved; a descriptor cannot rename it."""

    def edit(descriptor: dict[str, Any]) -> None:
        descriptor["component"][field] = value

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    refused(run(xr, policy), value)


def test_repository_contexts_in_the_descriptor_are_ignored(tmp_path: Path) -> None:
    """Where the component says it was stored never reaches the OCM Repository."""

    def edit(descriptor: dict[str, Any]) -> None:
        descriptor["component"]["repositoryContexts"] = [
            {"type": "OCIRegistry", "baseUrl": f"http://{METADATA}", "subPath": "latest"}
        ]

    xr, policy = claim(hostile(tmp_path / "ctf", edit=edit))
    out = settled(xr, policy)
    spec = by_kind(out, "Repository")["spec"]["repositorySpec"]
    assert spec == {"type": "OCIRegistry", "baseUrl": "http://127.0.0.1:5000", "subPath": "source"}
    assert METADATA not in json.dumps(out.resources)


# -- filesystem: Kustomize ---------------------------------------------------------------------

KUSTOMIZATION = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    "  - deployment.yaml\n  - configmap.yaml\n"
)

KUSTOMIZE_CASES = {
    "https-resource": (
        {"kustomization.yaml": KUSTOMIZATION + "  - https://evil.example.com/base.yaml\n"},
        ("kustomization.yaml", "resources[2]", "remote"),
    ),
    "github-base": (
        {"kustomization.yaml": KUSTOMIZATION + "  - github.com/evil/repo//base?ref=v1\n"},
        ("kustomization.yaml", "resources[2]", "remote"),
    ),
    "ssh-base": (
        {"kustomization.yaml": KUSTOMIZATION + "  - git@github.com:evil/repo.git\n"},
        ("kustomization.yaml", "resources[2]", "remote"),
    ),
    "host-like-base": (
        {"kustomization.yaml": KUSTOMIZATION + "  - evil.example.com/org/repo\n"},
        ("kustomization.yaml", "resources[2]", "names no file or directory"),
    ),
    "legacy-bases": (
        {"kustomization.yaml": KUSTOMIZATION + "bases:\n  - https://evil.example.com/b\n"},
        ("kustomization.yaml", "bases[0]", "remote"),
    ),
    "parent-directory": (
        {"kustomization.yaml": KUSTOMIZATION + "  - ../../../etc\n"},
        ("kustomization.yaml", "resources[2]", "outside the deployable"),
    ),
    "absolute-path": (
        {"kustomization.yaml": KUSTOMIZATION + "  - /etc/kubernetes/admin.conf\n"},
        ("kustomization.yaml", "resources[2]", "outside the deployable"),
    ),
    "patch-outside": (
        {"kustomization.yaml": KUSTOMIZATION + "patches:\n  - path: ../secret.yaml\n"},
        ("kustomization.yaml", "patches[0].path", "outside the deployable"),
    ),
    "generator-file-outside": (
        {
            "kustomization.yaml": KUSTOMIZATION
            + "secretGenerator:\n  - name: s\n    files:\n      - key=/var/run/secrets/token\n"
        },
        ("kustomization.yaml", "secretGenerator[0].files[0]", "outside the deployable"),
    ),
    "helm-chart-repo": (
        {
            "kustomization.yaml": KUSTOMIZATION
            + "helmCharts:\n  - name: x\n    repo: https://charts.evil.example.com\n"
        },
        ("kustomization.yaml", "helmCharts[0].repo", "outside the deployable"),
    ),
    "nested-component": (
        {
            "kustomization.yaml": KUSTOMIZATION + "components:\n  - extra\n",
            "extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
            "kind: Component\nresources:\n  - https://evil.example.com/c.yaml\n",
        },
        ("extra/kustomization.yaml", "resources[0]", "remote"),
    ),
    "nested-overlay-escape": (
        {
            "kustomization.yaml": KUSTOMIZATION + "  - base\n",
            "base/kustomization.yaml": "resources:\n  - ../../outside\n",
        },
        ("base/kustomization.yaml", "resources[0]", "outside the deployable"),
    ),
}


@pytest.mark.parametrize("case", list(KUSTOMIZE_CASES))
def test_kustomize_reference_leaving_the_deployable_is_refused(tmp_path: Path, case: str) -> None:
    changed, parts = KUSTOMIZE_CASES[case]
    files = {**bundled_kustomize_files(), **changed}
    xr, policy = claim(hostile(tmp_path / "ctf", kustomize=files), "kustomize")
    refused(run(xr, policy), "resource manifests-gz", *parts)


def test_kustomize_local_references_render(tmp_path: Path) -> None:
    """The control: local bases, components, patches and generators inside the deployable."""
    files = {
        **bundled_kustomize_files(),
        "kustomization.yaml": KUSTOMIZATION
        + "  - base\ncomponents:\n  - extra\npatches:\n  - path: patch.yaml\n"
        "configMapGenerator:\n  - name: g\n    files:\n      - data=files/data.txt\n",
        "base/kustomization.yaml": "resources:\n  - ../shared/sa.yaml\n",
        "shared/sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: podinfo\n",
        "extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
        "kind: Component\n",
        "patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n",
        "files/data.txt": "hello\n",
    }
    xr, policy = claim(hostile(tmp_path / "ctf", kustomize=files), "kustomize")
    settled(xr, policy)


@pytest.mark.parametrize(
    "entry,remote",
    [
        ("https://evil.example.com/x.yaml", True),
        ("git::https://evil.example.com/repo.git", True),
        ("ssh://git@evil.example.com/repo", True),
        ("git@github.com:org/repo.git", True),
        ("github.com/org/repo/base?ref=v1", True),
        ("example.com/org/repo//base", True),
        ("deployment.yaml", False),
        ("./base", False),
        ("../base", False),
    ],
)
def test_remote_forms(entry: str, remote: bool) -> None:
    assert selfcontained.is_remote(entry) is remote


def test_a_path_without_a_kustomization_checks_every_nested_one() -> None:
    """kustomize-controller generates a kustomization over such a directory and takes in every
    subdirectory that has one, so each is checked."""
    files = {
        "app/deployment.yaml": b"kind: Deployment\n",
        "app/extra/kustomization.yaml": b"resources:\n  - https://evil.example.com/x.yaml\n",
        "other/kustomization.yaml": b"resources:\n  - https://elsewhere.example.com/y.yaml\n",
    }
    problems = selfcontained.kustomize_problems(files, "./app")
    assert [(p.file, p.entry) for p in problems] == [
        ("app/extra/kustomization.yaml", "resources[0]")
    ]
    everything = selfcontained.kustomize_problems(files, None)  # sack8s check: every root
    assert {p.file for p in everything} == {
        "app/extra/kustomization.yaml",
        "other/kustomization.yaml",
    }


def test_inline_entries() -> None:
    """An inline patch is data (a URL in an annotation is fine); an inline plugin
    configuration naming a URL is refused, naming the entry."""
    files = {
        "kustomization.yaml": (
            b"patchesStrategicMerge:\n"
            b"  - |\n    apiVersion: apps/v1\n    kind: Deployment\n"
            b"    metadata: {name: x, annotations: {docs: 'https://example.com'}}\n"
            b"generators:\n"
            b"  - |\n    apiVersion: builtin\n    kind: HelmChartInflationGenerator\n"
            b"    metadata: {name: x}\n    repo: https://charts.evil.example.com\n"
        )
    }
    found = selfcontained.kustomize_problems(files, "./")
    assert [(p.file, p.entry) for p in found] == [("kustomization.yaml", "generators[0]")]


def test_many_entries_and_files_stay_cheap() -> None:
    """Each entry is one lookup: 20,000 entries over 20,000 files is not 400 million scans
    (about 20 s of CPU when each entry scanned the file list)."""
    n = 20000
    files = {f"d{i}/m.yaml": b"kind: ConfigMap\n" for i in range(n)}
    entries = "".join(f"  - d{i}\n" for i in range(n))
    files["kustomization.yaml"] = f"resources:\n{entries}".encode()
    chart = {f"charts/c{i}-1.0.0.tgz": b"" for i in range(n)}
    deps = "".join(
        f"  - name: c{i}\n    version: 1.0.0\n    repository: https://x.example.com\n"
        for i in range(0, n, 20)
    )
    chart["Chart.yaml"] = f"apiVersion: v2\nname: p\nversion: 1.0.0\ndependencies:\n{deps}".encode()
    started = time.process_time()
    assert selfcontained.kustomize_problems(files, "./") == []
    assert selfcontained.helm_problems(chart) == []
    spent = time.process_time() - started
    assert spent < CPU_SECONDS, f"{spent:.1f} s of CPU"


_ENTRY = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["deployment.yaml", "./configmap.yaml", "base", "../x", "/etc/passwd"]),
    st.builds(
        "{}{}{}".format,
        st.sampled_from(["https://", "git@", "github.com/", "ssh://", "", "../", "/"]),
        st.text(alphabet="abc./-_?=:@", max_size=20),
        st.sampled_from(["", "?ref=v1", "//sub", ".git"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(_ENTRY, max_size=6),
    field=st.sampled_from(["resources", "bases", "components", "crds", "transformers"]),
)
def test_every_entry_is_inside_or_reported(entries: list[str], field: str) -> None:
    """Whatever an entry says, the walk answers with data (never an exception), and an entry
    that is remote, absolute or leaves the deployable is always reported, by index."""
    files = {
        "deployment.yaml": b"kind: Deployment\n",
        "configmap.yaml": b"kind: ConfigMap\n",
        "base/kustomization.yaml": b"resources: []\n",
    }
    doc = json.dumps({field: entries})
    found = selfcontained.kustomize_problems({**files, "kustomization.yaml": doc.encode()}, "./")
    reported = {p.entry for p in found if p.file == "kustomization.yaml"}
    for i, entry in enumerate(entries):
        inline = field == "transformers" and (
            "\n" in entry.strip() or entry.strip().startswith(("{", "[")) or ": " in entry
        )
        leaves = entry.startswith("/") or posixpath.normpath(entry or ".").startswith("..")
        if (selfcontained.is_remote(entry) or leaves) and not inline:
            assert f"{field}[{i}]" in reported, (entry, found)


def test_kustomization_cycles_terminate() -> None:
    files = {
        "kustomization.yaml": b"resources:\n  - a\n",
        "a/kustomization.yaml": b"resources:\n  - ../b\n",
        "b/kustomization.yaml": b"resources:\n  - ../a\n",
    }
    assert selfcontained.kustomize_problems(files, "./") == []


# -- filesystem: Helm dependencies -------------------------------------------------------------

CHART_YAML = "apiVersion: v2\nname: podinfo\ntype: application\nversion: 6.2.0\nappVersion: 6.2.0\n"
SUBCHART = "apiVersion: v2\nname: sub\nversion: 1.0.0\n"


@pytest.mark.parametrize(
    "changed,parts",
    [
        (
            {
                "Chart.yaml": CHART_YAML + "dependencies:\n  - name: evil\n    version: 1.0.0\n"
                "    repository: https://charts.evil.example.com\n"
            },
            ("Chart.yaml", "dependencies[0] (evil)", "charts.evil.example.com"),
        ),
        (
            {
                "Chart.yaml": CHART_YAML + "dependencies:\n  - name: evil\n    version: 1.0.0\n"
                f"    repository: oci://{METADATA}/charts\n"
            },
            ("Chart.yaml", "dependencies[0] (evil)", METADATA),
        ),
        (
            {
                "Chart.yaml": CHART_YAML + "dependencies:\n  - name: evil\n    version: 1.0.0\n"
                "    repository: file://../../outside\n"
            },
            ("Chart.yaml", "dependencies[0] (evil)", "outside the chart"),
        ),
        (
            {
                "Chart.yaml": CHART_YAML.replace("apiVersion: v2", "apiVersion: v1"),
                "requirements.yaml": "dependencies:\n  - name: evil\n    version: 1.0.0\n"
                "    repository: '@stable'\n",
            },
            ("requirements.yaml", "dependencies[0] (evil)", "@stable"),
        ),
        (
            {
                "charts/sub/Chart.yaml": SUBCHART + "dependencies:\n  - name: deeper\n"
                "    version: 1.0.0\n    repository: https://charts.evil.example.com\n"
            },
            ("charts/sub/Chart.yaml", "dependencies[0] (deeper)", "charts.evil.example.com"),
        ),
    ],
    ids=["https", "oci-metadata", "file-outside", "requirements-v1", "vendored-subchart-dep"],
)
def test_helm_dependency_outside_the_chart_is_refused(
    tmp_path: Path, changed: dict[str, str], parts: tuple[str, ...]
) -> None:
    files = {**bundled_chart_files(), **changed}
    xr, policy = claim(hostile(tmp_path / "ctf", chart=files))
    refused(run(xr, policy), "resource chart", *parts)


def test_vendored_helm_dependencies_render(tmp_path: Path) -> None:
    """Vendored in charts/ (whatever repository: says) and file:// inside: nothing is fetched."""
    files = {
        **bundled_chart_files(),
        "Chart.yaml": CHART_YAML + "dependencies:\n"
        "  - name: sub\n    version: 1.0.0\n    repository: https://charts.example.com\n"
        "  - name: local\n    version: 1.0.0\n    repository: file://charts/local\n",
        "charts/sub/Chart.yaml": SUBCHART,
        "charts/local/Chart.yaml": SUBCHART.replace("sub", "local"),
    }
    xr, policy = claim(hostile(tmp_path / "ctf", chart=files))
    settled(xr, policy)


# -- sack8s check says the same before publishing ----------------------------------------------


def test_check_reports_remote_references(tmp_path: Path) -> None:
    root = tmp_path / "kustomize"
    files = {
        **bundled_kustomize_files(),
        "kustomization.yaml": KUSTOMIZATION + "  - https://evil.example.com/base.yaml\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    cd = tmp_path / "cd.yaml"
    cd.write_text(ctfedit.bundled_configdata())
    result = CliRunner().invoke(
        cli_main, ["check", "--config-data", str(cd), "--root", str(root)], catch_exceptions=False
    )
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("error: deployable")]
    assert len(lines) == 1, result.stdout
    assert "kustomization.yaml: resources[2]:" in lines[0] and "remote base" in lines[0]


# -- a real registry ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_registry(tmp_path_factory: pytest.TempPathFactory):
    """Debian's docker-registry holding, under two bases, the bundled component and the same
    component with a chart globalAccess to the metadata service: pushed over TLS (and served
    so), and the same storage served over plain HTTP behind a counting proxy."""
    from support.ctfpush import push_ctf
    from support.faultproxy import FaultProxy
    from support.oci_env import need_gardener_ocm, registry_bin
    from support.registry import RegistryServer
    from support.tlsca import make_pki

    need_gardener_ocm()
    binary = registry_bin()
    root = tmp_path_factory.mktemp("hostile-registry")
    pki = make_pki(root / "pki", name="sack8s hostile-component registry CA")
    tls = RegistryServer(
        binary, root / "tls", tls_cert=pki.cert_file, tls_key=pki.key_file, ca_file=pki.ca_file
    ).start()
    plain = proxy = None
    try:
        push_ctf(hostile(root / "benign"), tls.host, "benign", pki.ca_file)
        access = {"type": "ociArtifact", "imageReference": f"{METADATA}/latest/meta-data@{DIGEST}"}
        push_ctf(
            hostile(root / "evil", edit=_global("chart", access)), tls.host, "evil", pki.ca_file
        )
        plain = RegistryServer(binary, root / "plain", storage=tls.root).start()
        proxy = FaultProxy("127.0.0.1", plain.port).start()
        yield tls, pki, proxy, ctfedit.bundled_descriptor(ctf=root / "benign")
    finally:
        if proxy is not None:
            proxy.stop()
        if plain is not None:
            plain.stop()
        tls.stop()


def _registry_claim(
    host: str, base: str, *, ca: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    xr, policy = example()
    xr["spec"]["component"]["version"] = "6.2.0"
    scheme = "https" if ca else "http"
    xr["spec"]["component"]["repository"] = f"oci::{scheme}://{host}/{base}"
    policy["mirrors"] = []
    entry: dict[str, Any] = {"host": host}
    entry.update({"caBundle": ca, "certSecretName": "reg-ca"} if ca else {"plainHTTP": True})
    policy["registries"] = [entry]
    policy["imageRegistries"] = [{"host": "127.0.0.1:5000", "pullCredential": True}]
    return xr, policy


@pytest.mark.registry
def test_registry_hostile_component_is_refused_and_the_benign_one_renders(
    hostile_registry: Any,
) -> None:
    tls, pki, _, _ = hostile_registry
    ca = pki.ca_file.read_text()
    xr, policy = _registry_claim(tls.host, "evil", ca=ca)
    refused(run(xr, policy), "resource chart", METADATA, "registries")

    xr, policy = _registry_claim(tls.host, "benign", ca=ca)
    out = settled(xr, policy)
    src = by_kind(out, "OCIRepository")["spec"]
    assert src["url"] == f"oci://{tls.host}/benign/component-descriptors/acme.org/sack8s/podinfo"
    assert "insecure" not in src and src["certSecretRef"] == {"name": "reg-ca"}
    # the same claim after the team re-published the hostile version: refused, not redirected
    evil = copy.deepcopy(xr)
    evil["spec"]["component"]["repository"] = f"oci::https://{tls.host}/evil"
    refused(run(evil, policy), "resource chart", METADATA)


@pytest.mark.registry
def test_registry_refusal_fetches_none_of_the_component_content(hostile_registry: Any) -> None:
    """Refused on the descriptor alone: neither the chart nor the ConfigData is read from the
    registry. The control (the benign component, the same blobs, through the same counting
    proxy) reads both, so the assertion can fail."""
    _, _, proxy, descriptor = hostile_registry
    blobs = {_res(descriptor, name)["access"]["localReference"] for name in ("chart", "config")}

    def fetched() -> set[str]:
        return {r.path.rsplit("/", 1)[1] for r in proxy.requests} & blobs

    proxy.clear()
    xr, policy = _registry_claim(proxy.host, "benign")
    out = run(xr, policy)
    assert out.fatal is None, out.fatal.message
    assert fetched() == blobs

    proxy.clear()
    xr, policy = _registry_claim(proxy.host, "evil")
    refused(run(xr, policy), "resource chart", METADATA)
    assert proxy.requests, "the descriptor was read through the proxy"
    assert fetched() == set()
