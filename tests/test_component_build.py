"""``sack8s component build``: a team's own component, no code to edit (issue 34, item 2).

Two components that are not podinfo (``tests/data/component-build``): a web shop as a Helm
chart built from flags, a queue worker as a Kustomize directory built from an OCM CLI
constructor file. Each is built, read back by every command (``inspect``, ``check``,
``localize``/``configure``/``mutate``, ``render --settle``), and checked for what a reader
verifies: the OCM CLI v0.9.1 layout, every resource digest equal to the SHA-256 of its blob,
the same bytes on every build. With the OCM CLI fixtures (``SACK8S_FIXTURES``), the fixture's
own inputs build the descriptor the OCM CLI wrote, up to the archives' digests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from function.cli import main

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "component-build"
SHOP, WORKER = "acme.org/team-b/shop", "acme.org/team-b/worker"
NGINX_DIGEST = "sha256:6784fb0834aa7dbbe12e3d7471e69c290df3e6ba810dc38b34ae33d3c1c05f7d"
NGINX = f"registry.team-b.example/library/nginx:1.27.3@{NGINX_DIGEST}"
BUSYBOX = "registry.team-b.example/library/busybox"


def sack8s(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def build_shop(out: Path, version: str = "1.4.0", *extra: str):
    return sack8s(
        "component",
        "build",
        "--name",
        SHOP,
        "--version",
        version,
        "--chart",
        str(DATA / "shop/chart"),
        "--config-data",
        str(DATA / "shop/config.yaml"),
        "--image",
        f"web={NGINX}",
        "--out",
        str(out),
        *extra,
    )


def build_worker(out: Path, *extra: str):
    constructor = DATA / "worker/component-constructor.yaml"
    return sack8s(
        "component", "build", "--constructor", str(constructor), "--out", str(out), *extra
    )


@pytest.fixture(scope="module")
def ctf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("team-b") / "ctf"
    for r in (build_shop(out), build_worker(out)):
        assert r.exit_code == 0, r.stderr
    return out


def blob(ctf: Path, digest: str) -> bytes:
    data = (ctf / "blobs" / f"sha256.{digest.removeprefix('sha256:')}").read_bytes()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def version_of(ctf: Path, name: str, version: str) -> tuple[dict, dict, dict]:
    """(index, descriptor manifest, descriptor) of one version, walked from its tag."""
    index = json.loads((ctf / "artifact-index.json").read_text())
    (tag,) = [
        a
        for a in index["artifacts"]
        if a["repository"] == f"component-descriptors/{name}" and a.get("tag") == version
    ]
    oci_index = json.loads(blob(ctf, tag["digest"]))
    dm = json.loads(blob(ctf, oci_index["manifests"][0]["digest"]))
    return oci_index, dm, json.loads(blob(ctf, dm["layers"][0]["digest"]))


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# ------------------------------------------------------------------------------ the layout


def test_layout_is_the_ocm_clis(ctf: Path):
    oci_index, dm, descriptor = version_of(ctf, SHOP, "1.4.0")
    assert oci_index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    first, chart = oci_index["manifests"]
    assert first["artifactType"] == "application/vnd.ocm.software.component-descriptor.v2"
    assert dm["config"]["mediaType"] == "application/vnd.ocm.software.component.config.v1+json"
    config = json.loads(blob(ctf, dm["config"]["digest"]))
    assert config == {"componentDescriptorLayer": dm["layers"][0]}
    assert (
        dm["layers"][0]["mediaType"] == "application/vnd.ocm.software.component-descriptor.v2+json"
    )
    comp = descriptor["component"]
    assert descriptor["meta"] == {"schemaVersion": "v2"}
    assert (comp["name"], comp["version"], comp["provider"]) == (SHOP, "1.4.0", "acme.org")
    assert comp["sources"] is None and comp["componentReferences"] is None
    res = {r["name"]: r for r in comp["resources"]}
    assert res["web"]["access"] == {"type": "ociArtifact", "imageReference": NGINX}
    assert res["web"]["relation"] == "external" and res["web"]["version"] == "1.27.3"
    assert res["chart"]["access"]["localReference"] == chart["digest"]
    assert json.loads(chart["annotations"]["software.ocm.artifact"]) == [
        {"identity": {"name": "chart", "version": "1.4.0"}, "kind": "resource"}
    ]
    manifest = json.loads(blob(ctf, chart["digest"]))
    assert json.loads(blob(ctf, manifest["config"]["digest"])) == {
        "name": "shop",
        "version": "1.4.0",
    }
    (layer,) = manifest["layers"]
    with tarfile.open(fileobj=io.BytesIO(blob(ctf, layer["digest"])), mode="r:gz") as tar:
        names = tar.getnames()
    assert names[0] == "shop/Chart.yaml"
    assert set(names) == {
        "shop/Chart.yaml",
        "shop/values.yaml",
        "shop/templates/deployment.yaml",
        "shop/templates/service.yaml",
    }
    # The ConfigData is a layer of the descriptor manifest, verbatim.
    (cd_layer,) = [
        d for d in dm["layers"] if d["digest"] == res["config"]["access"]["localReference"]
    ]
    assert blob(ctf, cd_layer["digest"]) == (DATA / "shop/config.yaml").read_bytes()

    _, wdm, wdesc = version_of(ctf, WORKER, "0.3.0")
    wres = {r["name"]: r for r in wdesc["component"]["resources"]}
    assert wres["manifests"]["access"]["mediaType"] == "application/x-tar+gzip"
    raw = gzip.decompress(blob(ctf, wres["manifests"]["access"]["localReference"]))
    assert raw[:4] == b"./\0\0"  # the first entry is "./", as the OCM CLI's dir input writes
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert tar.getnames() == [
            ".",
            "configmap.yaml",
            "deployment.yaml",
            "kustomization.yaml",
        ]
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_every_resource_digest_is_its_blobs(ctf: Path):
    for name, version in ((SHOP, "1.4.0"), (WORKER, "0.3.0")):
        _, _, descriptor = version_of(ctf, name, version)
        for r in descriptor["component"]["resources"]:
            d = r["digest"]
            assert (d["hashAlgorithm"], d["normalisationAlgorithm"]) == (
                "SHA-256",
                "genericBlobDigest/v1",
            )
            if r["access"]["type"] == "LocalBlob/v1":
                data = blob(ctf, r["access"]["localReference"])  # verifies the file's name
                assert hashlib.sha256(data).hexdigest() == d["value"], r["name"]
            else:  # an image: the manifest digest its reference pins
                assert r["access"]["imageReference"].endswith("@sha256:" + d["value"])


def test_builds_are_reproducible(ctf: Path, tmp_path: Path):
    again = tmp_path / "again"
    assert build_shop(again).exit_code == 0
    assert build_worker(again).exit_code == 0
    assert tree(again) == tree(ctf)
    one, two = tmp_path / "d1", tmp_path / "d2"
    for out in (one, two):
        assert build_worker(out, "--format", "directory").exit_code == 0
    assert tree(one) == tree(two)
    assert (one / "component-descriptor.json").exists()


def test_a_new_version_is_added_and_a_rebuilt_one_replaced(tmp_path: Path):
    out = tmp_path / "ctf"
    assert build_shop(out, "1.4.0").exit_code == 0
    assert build_shop(out, "1.5.0").exit_code == 0
    assert build_shop(out, "1.4.0").exit_code == 0  # rebuilt: still one tag
    index = json.loads((out / "artifact-index.json").read_text())
    tags = sorted(a["tag"] for a in index["artifacts"] if "tag" in a)
    assert tags == ["1.4.0", "1.5.0"]
    digests = [a["digest"] for a in index["artifacts"]]
    assert len(digests) == len(set(digests))
    r = sack8s("inspect", str(out))
    assert r.exit_code == 0, r.stderr
    assert re.search(r"versions\s+1\.5\.0, 1\.4\.0|versions\s+1\.4\.0, 1\.5\.0", r.stdout), r.stdout


def test_descriptor_is_the_one_the_ocm_cli_wrote(fixtures_dir: Path, tmp_path: Path):
    """The fixture's own constructor and inputs (its image reference pinned, as `ocm add`
    rewrote it): the same descriptor, byte for byte, up to the archives' digests (the CLI's
    tars carry file times, its chart manifest a creation time)."""
    inputs = fixtures_dir / "inputs"
    text = (inputs / "component-constructor-6.2.0.yaml").read_text()
    text = text.replace("${REGISTRY}", "127.0.0.1:5000").replace(
        "podinfo:6.2.0\n",
        "podinfo:6.2.0@sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1\n",
    )
    constructor = tmp_path / "constructor.yaml"
    constructor.write_text(text.replace("path: ", f"path: {inputs}/"))
    out = tmp_path / "ctf"
    r = sack8s("component", "build", "--constructor", str(constructor), "--out", str(out))
    assert r.exit_code == 0, r.stderr
    _, dm, ours = version_of(out, "acme.org/sack8s/podinfo", "6.2.0")
    theirs_bytes = (fixtures_dir / "descriptors/source-6.2.0.json").read_bytes()
    theirs = json.loads(theirs_bytes)
    # Byte for byte, once the archives' digests are swapped for the CLI's.
    ours_bytes = blob(out, dm["layers"][0]["digest"])
    for a, b in zip(ours["component"]["resources"], theirs["component"]["resources"], strict=True):
        if "localReference" in a["access"]:
            old, new = a["access"]["localReference"], b["access"]["localReference"]
            ours_bytes = ours_bytes.replace(old[7:].encode(), new[7:].encode())
    assert ours_bytes == theirs_bytes
    archives = {"chart", "manifests", "manifests-gz"}

    def masked(d: dict) -> dict:
        d = json.loads(json.dumps(d))
        for res in d["component"]["resources"]:
            if res["name"] in archives:
                res["access"]["localReference"] = res["digest"]["value"] = "archive"
        return d

    assert masked(ours) == masked(theirs)
    # The ConfigData file is stored verbatim: the same digest as the CLI's.
    assert {r["name"]: r["digest"] for r in ours["component"]["resources"]}["config"] == {
        r["name"]: r["digest"] for r in theirs["component"]["resources"]
    }["config"]


# ------------------------------------------------------------------------------ every command


def test_inspect_shows_both_components(ctf: Path):
    for name, resources in ((SHOP, ("web", "chart", "config")), (WORKER, ("worker-image",))):
        r = sack8s("inspect", f"{ctf}//{name}")
        assert r.exit_code == 0, r.stderr
        assert f"component   {name}" in r.stdout
        for res in resources:
            assert f"  {res}  " in r.stdout
    r = sack8s("inspect", f"{ctf}//{SHOP}")
    assert "files      Chart.yaml, templates/deployment.yaml, templates/service.yaml" in r.stdout


def test_check_localize_configure_mutate(ctf: Path, tmp_path: Path):
    values = tmp_path / "values.yaml"
    values.write_text("replicas: 3\nport: 8080\n")
    shop = ["--config-data", str(DATA / "shop/config.yaml"), "--component", f"{ctf}//{SHOP}"]
    r = sack8s("check", *shop, "--values", str(values))
    assert r.exit_code == 0, r.output
    assert "0 error(s), 0 warning(s)" in r.stderr

    r = sack8s("localize", *shop, "--root", str(DATA / "shop/chart"), "values.yaml")
    assert r.exit_code == 0, r.stderr
    image = yaml.safe_load(r.stdout)["image"]
    assert image["registry"] == "registry.team-b.example"
    assert image["repository"] == "library/nginx"
    assert image["tag"] == f"1.27.3@{NGINX_DIGEST}"

    worker_values = tmp_path / "worker-values.yaml"
    worker_values.write_text("queue: payments\ninterval: '10'\n")
    worker = ["--config-data", str(DATA / "worker/config.yaml")]
    r = sack8s(
        "configure",
        *worker,
        "--values",
        str(worker_values),
        "--root",
        str(DATA / "worker/kustomize"),
        "configmap.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert yaml.safe_load(r.stdout)["data"] == {"QUEUE": "payments", "INTERVAL": "10"}

    r = sack8s(
        "mutate",
        *worker,
        "--component",
        f"{ctf}//{WORKER}:0.3.0",
        "--values",
        str(worker_values),
        "--root",
        str(DATA / "worker/kustomize"),
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    container = yaml.safe_load(r.stdout)["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith(f"{BUSYBOX}@sha256:2919d017")


def _settle(xr: str, ctf: Path) -> list[dict]:
    r = sack8s(
        "render",
        str(DATA / xr),
        str(DATA / "composition.yaml"),
        "--component",
        str(ctf),
        "--settle",
    )
    assert r.exit_code == 0, r.stderr
    assert "settled after 4 reconciles" in r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def test_render_settle_the_shop(ctf: Path):
    docs = _settle("xr-shop.yaml", ctf)
    status = docs[0]["status"]
    assert status["component"]["version"] == "1.4.0"
    assert status["images"] == [{"resource": "web", "reference": NGINX}]
    (hr,) = [d for d in docs if d["kind"] == "HelmRelease"]
    values = hr["spec"]["values"]
    assert values["replicaCount"] == 3 and values["service"]["port"] == 8080
    assert values["image"]["tag"] == f"1.27.3@{NGINX_DIGEST}"
    (src,) = [d for d in docs if d["kind"] == "OCIRepository"]
    _, _, descriptor = version_of(ctf, SHOP, "1.4.0")
    chart = {r["name"]: r for r in descriptor["component"]["resources"]}["chart"]
    assert src["spec"]["ref"] == {"digest": chart["access"]["localReference"]}
    assert src["spec"]["url"] == f"oci://registry.team-b.example/ocm/component-descriptors/{SHOP}"
    assert not status.get("warnings")


def test_render_settle_the_worker(ctf: Path):
    docs = _settle("xr-worker.yaml", ctf)
    (ks,) = [d for d in docs if d["kind"] == "Kustomization"]
    patches = [json.loads(p["patch"])[0] for p in ks["spec"]["patches"]]
    assert {"op": "add", "path": "/data/QUEUE", "value": "payments"} in patches
    assert {"op": "add", "path": "/data/INTERVAL", "value": "10"} in patches
    image = next(p["value"] for p in patches if p["path"].endswith("/image"))
    assert image.startswith(f"{BUSYBOX}@sha256:2919d017")
    (src,) = [d for d in docs if d["kind"] == "OCIRepository"]
    _, dm, _ = version_of(ctf, WORKER, "0.3.0")
    assert src["spec"]["layerSelector"] == {
        "mediaType": "application/x-tar+gzip",
        "operation": "extract",
    }
    index = json.loads((ctf / "artifact-index.json").read_text())
    (tag,) = [a for a in index["artifacts"] if a.get("tag") == "0.3.0"]
    assert (
        src["spec"]["ref"]["digest"]
        == json.loads(blob(ctf, tag["digest"]))["manifests"][0]["digest"]
    )
    assert dm["layers"][1]["mediaType"] == "application/x-tar+gzip"


# ------------------------------------------------------------------------------ bad input


def test_an_image_without_digest_is_refused(tmp_path: Path):
    r = sack8s(
        "component",
        "build",
        "--name",
        SHOP,
        "--version",
        "1.0.0",
        "--chart",
        str(DATA / "shop/chart"),
        "--image",
        "web=registry.team-b.example/library/nginx:1.27.3",
        "--out",
        str(tmp_path / "ctf"),
    )
    assert r.exit_code == 1
    assert "flags.resources[0].access.imageReference" in r.stderr and "has no digest" in r.stderr
    assert not (tmp_path / "ctf").exists()  # nothing written


@pytest.mark.parametrize(
    "edit, where, what",
    [
        (("type: dir/v1", "type: git/v1"), "resources[1].input.type", "not supported"),
        (("path: kustomize\n", "path: nope\n"), "resources[1].input.path", "is not a directory"),
        (
            ("name: acme.org/team-b/worker", "name: Worker"),
            "components[0].name",
            "not a component name",
        ),
        (("name: manifests", "name: worker-image"), "resources[1].name", "is also"),
    ],
)
def test_constructor_errors_name_the_field(tmp_path: Path, edit, where, what):
    text = (DATA / "worker/component-constructor.yaml").read_text()
    assert edit[0] in text
    bad = tmp_path / "component-constructor.yaml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    for f in ("kustomize", "config.yaml"):
        (tmp_path / f).symlink_to(DATA / "worker" / f)
    r = sack8s("component", "build", "--constructor", str(bad), "--out", str(tmp_path / "ctf"))
    assert r.exit_code == 1, r.output
    assert f"{bad}: components[0]" in r.stderr
    assert where in r.stderr and what in r.stderr, r.stderr


def test_configdata_naming_a_missing_image_is_refused(tmp_path: Path):
    cd = tmp_path / "config.yaml"
    cd.write_text((DATA / "shop/config.yaml").read_text().replace("name: web", "name: webb"))
    r = sack8s(
        "component", "build", "--name", SHOP, "--version", "1.0.0",
        "--chart", str(DATA / "shop/chart"), "--config-data", str(cd),
        "--image", f"web={NGINX}", "--out", str(tmp_path / "ctf"),
    )  # fmt: skip
    assert r.exit_code == 1
    assert "localization[0].resource.name" in r.stderr and "'webb'" in r.stderr
    assert not (tmp_path / "ctf").exists()


def test_usage_and_out_errors(tmp_path: Path):
    r = sack8s("component", "build", "--out", str(tmp_path / "x"))
    assert r.exit_code == 2
    r = sack8s(
        "component", "build", "--constructor", str(DATA / "worker/component-constructor.yaml"),
        "--name", SHOP, "--out", str(tmp_path / "x"),
    )  # fmt: skip
    assert r.exit_code == 2
    other = tmp_path / "not-a-ctf"
    other.mkdir()
    (other / "file.txt").write_text("x")
    r = build_worker(other)
    assert r.exit_code == 1 and "is not a CTF" in r.stderr


def test_a_component_directory_renders_the_same_release(ctf: Path, tmp_path: Path):
    """`--format directory`: the same descriptor, read by `inspect` and `render` like the CTF."""
    out = tmp_path / "dir"
    r = build_shop(out, "1.4.0", "--format", "directory")
    assert r.exit_code == 0, r.stderr
    _, _, in_ctf = version_of(ctf, SHOP, "1.4.0")
    assert json.loads((out / "component-descriptor.json").read_bytes()) == in_ctf
    assert sack8s("inspect", str(out)).exit_code == 0
    from_dir = {d["kind"]: d for d in _settle("xr-shop.yaml", out)}
    from_ctf = {d["kind"]: d for d in _settle("xr-shop.yaml", ctf)}
    assert from_dir["HelmRelease"]["spec"] == from_ctf["HelmRelease"]["spec"]
    assert from_dir["OCIRepository"]["spec"] == from_ctf["OCIRepository"]["spec"]


def test_the_ocm_cli_builds_the_same_descriptor_from_the_same_constructor(
    ocm_bin: Path, tmp_path: Path
):
    """Opt-in (SACK8S_OCM_CLI): one constructor file, both tools. Local inputs only (an image
    access would make the OCM CLI ask a registry for its digest); the descriptors agree up to
    the archives' digests (the CLI's tars carry file times, its chart manifest a creation
    time)."""
    import subprocess

    work = tmp_path / "inputs"
    work.mkdir()
    (work / "chart").symlink_to(DATA / "shop/chart")
    (work / "kustomize").symlink_to(DATA / "worker/kustomize")
    constructor = work / "component-constructor.yaml"
    constructor.write_text(
        yaml.safe_dump(
            {
                "components": [
                    {
                        "name": "acme.org/team-b/both",
                        "version": "0.1.0",
                        "provider": {"name": "acme.org"},
                        "resources": [
                            {
                                "name": "chart",
                                "type": "helmChart",
                                "version": "0.1.0",
                                "relation": "local",
                                "input": {"type": "helm/v1", "path": "chart"},
                            },
                            {
                                "name": "manifests",
                                "type": "kustomize.ocm.fluxcd.io",
                                "version": "0.1.0",
                                "relation": "local",
                                "input": {"type": "dir/v1", "path": "kustomize", "compress": True},
                            },
                        ],
                    }
                ]
            }
        )
    )
    theirs_ctf = tmp_path / "ocm-ctf"
    p = subprocess.run(
        [
            str(ocm_bin), "add", "component-version", "--repository", f"ctf::{theirs_ctf}",
            "--constructor", str(constructor), "--temp-folder", str(tmp_path),
        ],
        cwd=work, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    ours_ctf = tmp_path / "ours"
    r = sack8s("component", "build", "--constructor", str(constructor), "--out", str(ours_ctf))
    assert r.exit_code == 0, r.stderr
    _, _, theirs = version_of(theirs_ctf, "acme.org/team-b/both", "0.1.0")
    _, _, ours = version_of(ours_ctf, "acme.org/team-b/both", "0.1.0")

    def masked(d: dict) -> dict:
        d = json.loads(json.dumps(d))
        for res in d["component"]["resources"]:
            res["access"]["localReference"] = res["digest"]["value"] = "archive"
        return d

    assert masked(ours) == masked(theirs)
    assert sack8s("inspect", str(theirs_ctf)).exit_code == 0
