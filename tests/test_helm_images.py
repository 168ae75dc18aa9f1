"""Helm without helm-controller: what the chart renders with the composed values (issue 17, item 4).

helm-controller cannot be built here, so for the bundled Helm example in every transfer mode
this does what it would do with the composed objects: ``helm pull`` the chart at the
OCIRepository's digest from the registry (``--plain-http`` exactly where the composed source is
``insecure``, i.e. where the policy allows plain HTTP), then ``helm template`` it with the
HelmRelease's ``spec.values``, and checks every container and init container image: a
reference by the distribution grammar, in the registry the component's image was transferred
to, pinned by digest.

The component is the bundled one (``examples/component/ctf``: its chart and its ConfigData),
with its image resource as each of the OCM CLI fixtures' transfer modes wrote it (access and
digest from the fixtures' descriptors, ``support.ctfedit.with_access``), pushed with
gardener-ocm's client to a TLS registry whose storage a plain-HTTP registry then serves. The
fixture registry's own components would not do: they ship the OCM CLI fixtures' ConfigData,
whose ``repository`` + ``tag`` rules render ``upstream/podinfo:sha256:…`` in v1 and are refused
here (issue 20; ``tests/test_image_pairs_policy.py``). Before issue 20 these cases were
``xfail(strict=True)``; a control with hand-written localized values shows the check passes
when the values are right, so a failure is about the values, not the harness.

Needs: Debian's ``docker-registry``, ``helm`` from ``../shared/tools`` (``need_tools``),
gardener-ocm and the OCM CLI fixtures' descriptors. The registries run on free ports, so this
is not an e2e test and leaves port 5000 alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, need_path, need_tools
from support.imageref import ImageRef, parse
from support.oci_env import need_gardener_ocm, registry_bin
from support.registry import RegistryServer
from support.settle import converge
from support.tlsca import make_pki

from function.edge.render import load_docs

pytestmark = pytest.mark.registry

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "tests" / "e2e_data" / "policy.yaml"
IMAGE_DIGEST = "sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
COMPONENT_REPO = "component-descriptors/acme.org/sack8s/podinfo"
MODES = ["source", "copied-default", "copied-oci", "by-ref"]
POD_SPECS = {  # where each workload kind keeps its pod spec
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


@pytest.fixture(scope="module")
def bundled_registry(tmp_path_factory: pytest.TempPathFactory) -> RegistryServer:
    """The bundled component in the four transfer modes, at ``HOST/<mode>``, over plain HTTP."""
    from support.ctfedit import with_access
    from support.ctfpush import push_ctf

    need_gardener_ocm()
    descriptors = need_path(
        FIXTURES / "descriptors", "OCM CLI fixture descriptors", "SACK8S_FIXTURES"
    )
    binary = registry_bin()
    root = tmp_path_factory.mktemp("helm-registry")
    pki = make_pki(root / "pki", name="sack8s helm-test registry CA")
    tls = RegistryServer(
        binary, root / "tls", tls_cert=pki.cert_file, tls_key=pki.key_file, ca_file=pki.ca_file
    ).start()
    try:
        for mode in MODES:
            fixture = json.loads((descriptors / f"{mode}-6.2.0.json").read_text())
            (image,) = [r for r in fixture["component"]["resources"] if r["name"] == "image"]
            ctf = with_access(root / mode, image["access"], image.get("digest"))
            pushed = push_ctf(ctf, tls.host, mode, pki.ca_file)
            assert any(ref.endswith(":6.2.0") for ref in pushed), pushed
    finally:
        tls.stop()
    plain = RegistryServer(binary, root / "plain", storage=tls.root).start()
    yield plain
    plain.stop()


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
    # the images the transfer modes name: on 127.0.0.1:5000 (where the OCM CLI fixtures put
    # them), or in the component repository on this registry (copied-default)
    policy["imageRegistries"] = [
        {"host": host, "pullCredential": True},
        {"host": "127.0.0.1:5000", "pullCredential": True},
    ]
    # The e2e policy downgrades image-pair defects for the fixture registry's ConfigData; the
    # bundled ConfigData has none, so the product default (Fatal) applies here.
    policy.pop("configData", None)
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


@pytest.mark.parametrize("mode", MODES)
def test_bundled_helm_example_renders_pinned_images_in_the_transfer_registry(
    bundled_registry, tmp_path: Path, mode: str
) -> None:
    binary = need_tools("helm") / "helm"
    release, source = compose(bundled_registry.host, mode)
    assert source["spec"].get("insecure") is True  # the e2e policy allows plain HTTP to the host
    chart = pull(binary, source, tmp_path)
    images = rendered_images(binary, chart, release, tmp_path)
    print("\n".join(images))
    expected = transferred_image(mode, bundled_registry.host)
    bad = problems(images, expected)
    assert not bad, "\n".join(bad)
    # the chart's template is "repository:tag": the tag rule wrote TAG@sha256:… (issue 20)
    assert [line.rsplit(": ", 1)[1] for line in images] == [f"{expected}:6.2.0@{IMAGE_DIGEST}"]


def test_the_check_passes_when_the_values_are_localized(bundled_registry, tmp_path: Path) -> None:
    """Control: the same chart, pulled the same way, with hand-written image values a correct
    localization gives this chart (it renders ``repository:tag``, so the digest rides in the
    tag, as FLUX.md did): the check passes, so a failure above is about the values, not the
    harness."""
    binary = need_tools("helm") / "helm"
    release, source = compose(bundled_registry.host, "copied-default")
    expected = transferred_image("copied-default", bundled_registry.host)
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
