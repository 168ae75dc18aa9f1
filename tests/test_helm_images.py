# ruff: noqa: F811  (pytest fixtures imported from support.oci_env are redefined as arguments)
"""Helm without helm-controller: what the chart renders with the composed values (issue 17, item 4).

helm-controller cannot be built here, so for every Helm example this does what it would do
with the composed objects: ``helm pull`` the chart at the OCIRepository's digest from the
registry (``--plain-http`` exactly where the composed source is ``insecure``, i.e. where the
policy allows plain HTTP), then ``helm template`` it with the HelmRelease's ``spec.values``,
and checks every container and init container image: a reference by the distribution grammar,
in the registry the component's image was transferred to, pinned by digest.

The bundled Helm example fails that today: its ConfigData maps the image to ``repository`` +
``tag``, so podinfo renders ``upstream/podinfo:sha256:…`` (``reference/observed.md`` item 12).
Those cases are ``xfail(strict=True)`` until the ConfigData issue (20) lands, when they flip;
a control with correctly localized values shows the check passes when the values are right.

Needs: Debian's ``docker-registry`` and ``helm`` from ``../shared/tools`` (``need_tools``). The
fixture registry runs on a free port, so this is not an e2e test and leaves port 5000 alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import need_tools
from support.imageref import ImageRef, parse
from support.oci_env import fixture_registry  # noqa: F401
from support.settle import converge

from function.render import load_docs

pytestmark = pytest.mark.registry

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "tests" / "e2e_data" / "policy.yaml"
IMAGE_DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
COMPONENT_REPO = "component-descriptors/acme.org/sack8s/podinfo"
MODES = ["source", "copied-default", "copied-oci", "by-ref"]
CONFIGDATA_DEFECT = pytest.mark.xfail(strict=True, reason="ConfigData defect, issue 20")
POD_SPECS = {  # where each workload kind keeps its pod spec
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def transferred_image(mode: str, host: str) -> str:
    """Where each fixture transfer mode put the podinfo image (FLUX.md, "Objects created"): the
    descriptors of source, by-ref and copied-oci name 127.0.0.1:5000, where the OCM CLI wrote
    them; copied-default made the image a local blob of the component repository, so it is
    served from wherever that repository is (here: the test's registry)."""
    return {
        "source": "127.0.0.1:5000/upstream/podinfo",
        "by-ref": "127.0.0.1:5000/upstream/podinfo",
        "copied-oci": "127.0.0.1:5000/copied-oci/upstream/podinfo",
        "copied-default": f"{host}/copied-default/{COMPONENT_REPO}",
    }[mode]


def compose(host: str, mode: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundled Helm example (examples/xr.yaml) in ``mode``: (HelmRelease, OCIRepository)."""
    (xr,) = load_docs([REPO / "examples" / "xr.yaml"])
    xr["spec"]["component"]["repository"] = f"oci::http://{host}/{mode}"
    (policy,) = load_docs([POLICY])
    policy["registries"] = [{"host": host, "plainHTTP": True}]
    renders, _ = asyncio.run(converge(xr, policy))  # the Flux objects follow their Namespaces
    out = renders[-1]
    assert out.fatal is None, out.fatal.message
    by_kind = {o["kind"]: o for o in out.resources}
    return by_kind["HelmRelease"], by_kind["OCIRepository"]


def helm(binary: Path, scratch: Path, *args: str) -> str:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(scratch / "cache"),
        "HELM_CONFIG_HOME": str(scratch / "config"),
        "HELM_DATA_HOME": str(scratch / "data"),
    }
    p = subprocess.run(
        [str(binary), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert p.returncode == 0, f"helm {' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}"
    return p.stdout


def pull(binary: Path, source: dict[str, Any], scratch: Path) -> Path:
    spec = source["spec"]
    out = scratch / "charts"
    out.mkdir()
    args = ["pull", f"{spec['url']}@{spec['ref']['digest']}", "--destination", str(out)]
    if spec.get("insecure"):  # set only for hosts the policy allows plain HTTP to
        args.append("--plain-http")
    helm(binary, scratch, *args)
    (chart,) = out.glob("*.tgz")
    return chart


def rendered_images(binary: Path, chart: Path, release: dict[str, Any], scratch: Path) -> list[str]:
    spec = release["spec"]
    values = scratch / "values.json"
    values.write_text(json.dumps(spec.get("values") or {}))
    manifest = helm(
        binary,
        scratch,
        "template",
        spec["releaseName"],
        str(chart),
        "--namespace",
        spec["targetNamespace"],
        "--values",
        str(values),
    )
    images = []
    for doc in load_docs_text(manifest):
        path = POD_SPECS.get(doc.get("kind", ""))
        pod: Any = doc
        for step in path or ():
            pod = (pod or {}).get(step)
        for c in [
            *((pod or {}).get("initContainers") or []),
            *((pod or {}).get("containers") or []),
        ]:
            images.append(f"{doc['kind']}/{doc['metadata']['name']} {c['name']}: {c['image']}")
    assert images, "the chart rendered no container"
    return images


def load_docs_text(text: str) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def problems(images: list[str], repository: str) -> list[str]:
    out = []
    for line in images:
        ref_text = line.rsplit(": ", 1)[1]
        try:
            ref: ImageRef = parse(ref_text)
        except ValueError as e:
            out.append(f"{line}: {e}")
            continue
        if ref.repository != repository:
            out.append(f"{line}: not in {repository} (the registry the image was transferred to)")
        if ref.digest != IMAGE_DIGEST:
            out.append(f"{line}: not pinned by the image's digest {IMAGE_DIGEST}")
    return out


@pytest.mark.parametrize("mode", [pytest.param(m, marks=CONFIGDATA_DEFECT) for m in MODES])
def test_bundled_helm_example_renders_pinned_images_in_the_transfer_registry(
    fixture_registry, tmp_path: Path, mode: str
) -> None:
    binary = need_tools("helm") / "helm"
    release, source = compose(fixture_registry.host, mode)
    assert source["spec"].get("insecure") is True  # the e2e policy allows plain HTTP to the host
    chart = pull(binary, source, tmp_path)
    images = rendered_images(binary, chart, release, tmp_path)
    print("\n".join(images))
    bad = problems(images, transferred_image(mode, fixture_registry.host))
    assert not bad, "\n".join(bad)


def test_the_check_passes_when_the_values_are_localized(fixture_registry, tmp_path: Path) -> None:
    """Control: the same chart, pulled the same way, with the image values a correct localization
    gives this chart (it renders ``repository:tag``, so the digest rides in the tag, as FLUX.md
    did): the check passes, so the xfails above fail for the values, not for the harness."""
    binary = need_tools("helm") / "helm"
    release, source = compose(fixture_registry.host, "copied-default")
    expected = transferred_image("copied-default", fixture_registry.host)
    release["spec"]["values"]["image"] = {"repository": expected, "tag": f"6.2.0@{IMAGE_DIGEST}"}
    images = rendered_images(binary, pull(binary, source, tmp_path), release, tmp_path)
    assert not problems(images, expected), images


DIGEST = IMAGE_DIGEST


@pytest.mark.parametrize(
    "text,domain,path,tag,digest",
    [
        (
            f"127.0.0.1:5000/upstream/podinfo@{DIGEST}",
            "127.0.0.1:5000",
            "upstream/podinfo",
            None,
            DIGEST,
        ),
        (
            f"127.0.0.1:5000/upstream/podinfo:6.2.0@{DIGEST}",
            "127.0.0.1:5000",
            "upstream/podinfo",
            "6.2.0",
            DIGEST,
        ),
        ("ghcr.io/stefanprodan/podinfo:6.2.0", "ghcr.io", "stefanprodan/podinfo", "6.2.0", None),
        ("localhost/podinfo", "localhost", "podinfo", None, None),
        ("upstream/podinfo:6.2.0", None, "upstream/podinfo", "6.2.0", None),  # Docker Hub
        ("[::1]:5000/a/b", "[::1]:5000", "a/b", None, None),
    ],
)
def test_reference_grammar_accepts(text, domain, path, tag, digest) -> None:
    assert parse(text) == ImageRef(domain, path, tag, digest)


@pytest.mark.parametrize(
    "text",
    [
        f"upstream/podinfo:{DIGEST}",  # what the bundled Helm example renders
        f"127.0.0.1:5000/upstream/podinfo:{DIGEST}",
        "127.0.0.1:5000/upstream/podinfo@sha256:1234",  # too short
        f"127.0.0.1:5000/upstream/podinfo@{DIGEST.upper()}",
        "127.0.0.1:5000//podinfo",
        "127.0.0.1:5000/Upstream/podinfo",
        "http://127.0.0.1:5000/upstream/podinfo",
        "podinfo:",
        "",
        "a/" + "b" * 260,
    ],
)
def test_reference_grammar_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)
