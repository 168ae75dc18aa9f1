"""Every bundled example deploys a valid image reference, of the transfer target, pinned by digest.

``sack8s render`` runs on each example as a user runs it (offline, from the example CTF), then
the composed output is rendered by the real tools: the Helm chart of the component by Helm v4
(``helm template`` with the HelmRelease's ``spec.values``), the Kustomize directory by
kustomize (``kubectl kustomize``, the kustomize API Flux's kustomize-controller runs, with the
Kustomization's ``spec.patches`` added to the directory's kustomization as Flux adds them).
The image in the rendered Deployment must parse, name the registry the component is read from
(127.0.0.1:5000, where the example's image lives), and carry the image's digest.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import need, need_binary
from support import example_component

from function.ocm.imageref import parse_reference

REPO = Path(__file__).resolve().parents[1]
SACK8S = Path(sys.executable).with_name("sack8s")
HELM = Path(os.environ.get("SACK8S_HELM", Path.home() / ".cache" / "sack8s" / "tools" / "helm"))
REGISTRY = "127.0.0.1:5000"

EXAMPLES = {
    "helm": ("examples/xr.yaml", "examples/composition.yaml", []),
    "kustomize": ("examples/xr-kustomize.yaml", "examples/composition.yaml", []),
    "claim": (
        "examples/claim.yaml",
        "examples/composition-claim.yaml",
        ["--required-resources", "examples/required"],
    ),
}


def render(example: str) -> list[dict]:
    xr, comp, extra = EXAMPLES[example]
    exe = (
        [str(SACK8S)]
        if SACK8S.exists()
        else [sys.executable, "-c", "from function.cli import main; main()"]
    )
    p = subprocess.run(
        [
            *exe,
            "render",
            xr,
            "--composition",
            comp,
            "--observed",
            f"examples/observed/{'helm' if example == 'helm' else 'kustomize'}",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert "Warning" not in p.stderr, p.stderr  # the examples are what a careful team writes
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def one(docs: list[dict], kind: str) -> dict:
    (d,) = [d for d in docs if d.get("kind") == kind]
    return d


def assert_deployable_image(image: str) -> None:
    ref = parse_reference(image)  # what the kubelet would pull: must be a reference at all
    assert ref.registry == REGISTRY, image
    assert ref.digest == example_component.IMAGE_DIGEST, image


def chart_archive(tmp_path: Path) -> Path:
    manifest = json.loads(example_component.version().path("chart").read_text())
    (layer,) = manifest["layers"]
    out = tmp_path / "podinfo.tgz"
    out.write_bytes(example_component.blob(layer["digest"]).read_bytes())
    return out


def test_helm_example_renders_a_pinned_image_of_the_transfer_target(tmp_path):
    helm = need_binary("helm", "SACK8S_HELM") if not HELM.exists() else str(HELM)
    docs = render("helm")
    hr = one(docs, "HelmRelease")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(hr["spec"]["values"]))
    p = subprocess.run(
        [
            helm,
            "template",
            hr["spec"]["releaseName"],
            str(chart_archive(tmp_path)),
            "-f",
            str(values),
            "--namespace",
            hr["spec"]["targetNamespace"],
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    (dep,) = [d for d in yaml.safe_load_all(p.stdout) if d and d.get("kind") == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert (
        container["image"] == f"{REGISTRY}/upstream/podinfo:6.2.0@{example_component.IMAGE_DIGEST}"
    )
    assert_deployable_image(container["image"])
    assert (
        dep["spec"]["replicas"] == 2
    )  # the XR's values.replicas reaches the chart (replicaCount rule)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PODINFO_UI_MESSAGE"] == "Hello from sack8s"  # values.message too (ui.message rule)
    pulls = [
        d for d in docs if d.get("kind") == "ExternalSecret" and "-pull" in d["metadata"]["name"]
    ]
    secrets = {d["spec"]["target"]["name"] for d in pulls}
    # the chart pulls with the composed pull secret (its name is hashed per claim)
    (pull,) = hr["spec"]["values"]["imagePullSecrets"]
    assert pull["name"].startswith("podinfo-pull-") and pull["name"] in secrets, (pull, secrets)


@pytest.mark.parametrize(
    "example, replicas, message",
    [("kustomize", 2, "Hello from sack8s"), ("claim", 3, "Hello, team A")],
)
def test_kustomize_examples_render_a_pinned_image_of_the_transfer_target(
    example, replicas, message, tmp_path
):
    kubectl = need_binary("kubectl", "SACK8S_KUBECTL")
    docs = render(example)
    ks = one(docs, "Kustomization")["spec"]
    root = tmp_path / "src"
    with tarfile.open(
        fileobj=io.BytesIO(example_component.version().path("manifests-gz").read_bytes())
    ) as tar:
        tar.extractall(root, filter="data")
    kfile = root / ks["path"] / "kustomization.yaml"
    kust = yaml.safe_load(kfile.read_text())
    kust["patches"] = ks["patches"]  # what kustomize-controller does with spec.patches
    if ks.get("targetNamespace"):
        kust["namespace"] = ks["targetNamespace"]
    kfile.write_text(yaml.safe_dump(kust))
    p = subprocess.run(
        [kubectl, "kustomize", str(root / ks["path"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    need("unknown command" not in p.stderr, "kubectl has no kustomize")
    assert p.returncode == 0, p.stderr
    out = [d for d in yaml.safe_load_all(p.stdout) if d]
    dep = next(d for d in out if d["kind"] == "Deployment")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{REGISTRY}/upstream/podinfo@{example_component.IMAGE_DIGEST}"
    assert_deployable_image(container["image"])
    cm = next(d for d in out if d["kind"] == "ConfigMap")
    assert (
        dep["spec"]["replicas"] == replicas and cm["data"]["PODINFO_UI_MESSAGE"] == message
    )  # values applied


def test_the_example_ctf_is_what_make_component_builds():
    need(_has_gardener_ocm(), "gardener-ocm not importable (pip install -e '.[test]')")
    p = subprocess.run(
        [sys.executable, str(REPO / "examples/component/make-component.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr


def _has_gardener_ocm() -> bool:
    try:
        import ocm
    except ImportError:
        return False
    return True
