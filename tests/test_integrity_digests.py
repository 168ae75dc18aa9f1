"""What is deployed is what the descriptor declares (issue 32, items 1, 5 and 6 for blobs).

Every blob the function reads (the ConfigData, the Helm chart, the Kustomize manifests) is
checked against its resource's ``digest``. Each blob is tampered with in turn, three ways:

* ``relinked``: new bytes stored properly and the resource's ``access`` pointed at them, the
  declared digest left alone. Storage is consistent, so only the resource digest notices; this
  is what an unsigned access allows (OCM signs the digest, never the access);
* ``declared``: the resource's declared digest changed (a wrong digest in the descriptor);
* ``in place``: the stored bytes replaced under their old name (a CTF blob file, a registry's
  storage, a component directory's named blob).

Each is refused by name (component, resource, both digests) through RunFunction
(``function.edge.render.render``) and the CLI (``render``, ``inspect``, ``localize``), from a CTF, a
component directory and a real registry (Debian's ``docker-registry``, pushed with
gardener-ocm as ``tests/test_image.py`` does). The untampered component composes, and
``--skip-digest-check`` (tests only) lets a tampered one through with a Warning per resource.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import need_path
from crossplane.function import logging as sdklogging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis_profiles import REPO, example, observed_helm
from support import ctfedit, example_component
from support.oci_env import need_gardener_ocm, registry_bin
from support.registry import RegistryServer
from support.tlsca import make_pki

from function.cache import Cache
from function.cli import main
from function.edge.fn import FunctionRunner
from function.edge.render import Rendered, load_docs, render
from function.edge.sources import SourceFactory
from function.ocm import digests
from function.ocm.model import Digest, Resource

COMPONENT = "acme.org/sack8s/podinfo"
XR_HELM = REPO / "examples" / "xr.yaml"
XR_KUSTOMIZE = REPO / "examples" / "xr-kustomize.yaml"
COMPOSITION = REPO / "examples" / "composition.yaml"
#: the blobs the examples read, by resource: which example claim reads it
BLOBS = {"config": XR_HELM, "chart": XR_HELM, "manifests-gz": XR_KUSTOMIZE}
TAMPERED = b"# tampered\n"


@pytest.fixture(autouse=True)
def _quiet():
    sdklogging.configure(sdklogging.Level.DISABLED)


def blob_path(ctf: Path, digest: str) -> Path:
    return ctf / "blobs" / f"sha256.{digest.removeprefix('sha256:')}"


def _retar(data: bytes, gz: bool, change: Callable[[str, bytes], bytes]) -> bytes:
    """The same archive with each regular file's bytes passed through ``change(name, bytes)``."""
    src = tarfile.open(fileobj=io.BytesIO(gzip.decompress(data) if gz else data))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for m in src.getmembers():
            if m.isfile():
                body = change(m.name, src.extractfile(m).read())
                m.size = len(body)
                tar.addfile(m, io.BytesIO(body))
            else:
                tar.addfile(m)
    raw = out.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


def _append_to(suffix: str) -> Callable[[str, bytes], bytes]:
    return lambda name, body: body + TAMPERED if name.endswith(suffix) else body


def relink(dest: Path, resource: str) -> Path:
    """A copy of the bundled CTF whose ``resource`` holds other bytes, stored and linked
    consistently (access, manifests, index), its declared digest unchanged."""

    def edit(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        res = ctfedit._resource(descriptor, resource)
        old = res["access"]["localReference"]
        data = blob_path(ctf, old).read_bytes()
        if resource == "config":
            new = ctfedit._put(ctf, data + TAMPERED)
        elif resource == "manifests-gz":
            new = ctfedit._put(ctf, _retar(data, True, _append_to("deployment.yaml")))
        else:  # the chart: a new chart layer, so a new manifest naming it
            manifest = json.loads(data)
            layer = manifest["layers"][0]
            tgz = blob_path(ctf, layer["digest"]).read_bytes()
            layer["digest"], layer["size"] = ctfedit._put(
                ctf, _retar(tgz, True, _append_to("values.yaml"))
            )
            new = ctfedit._put(ctf, json.dumps(manifest, separators=(",", ":")).encode())
        res["access"]["localReference"] = new[0]
        return {old: new}

    return ctfedit._rewrite(dest, "6.2.0", edit)


def redeclare(dest: Path, resource: str) -> Path:
    """A copy of the bundled CTF whose ``resource`` declares another digest."""

    def edit(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        res = ctfedit._resource(descriptor, resource)
        res["digest"]["value"] = hashlib.sha256(b"not the blob").hexdigest()
        return {}

    return ctfedit._rewrite(dest, "6.2.0", edit)


def in_place_target(ctf: Path, resource: str) -> str:
    """The digest of the stored blob to overwrite for ``resource`` (the chart's layer)."""
    ref = example_component.version().local(resource)
    if resource == "chart":
        return json.loads(blob_path(ctf, ref).read_bytes())["layers"][0]["digest"]
    return ref


def overwrite(ctf: Path, resource: str) -> str:
    """Overwrite, in a copy of the bundled CTF at ``ctf``, the blob ``resource`` reads."""
    digest = in_place_target(ctf, resource)
    path = blob_path(ctf, digest)
    path.write_bytes(path.read_bytes() + TAMPERED)
    return digest


def declared_value(resource: str) -> str:
    return example_component.version().resources[resource]["digest"]["value"]


def xr_and_policy(xr_file: Path, mirror: Path | None) -> tuple[dict, dict]:
    xr, policy = example()
    if xr_file != XR_HELM:
        (xr,) = load_docs([xr_file])
    xr["spec"]["component"]["version"] = "6.2.0"
    if mirror is not None:
        policy["mirrors"][0]["path"] = str(mirror)
    return xr, policy


def run(xr: dict, policy: dict, *, verify: bool = True, runner=None, **kw) -> Rendered:
    runner = runner or FunctionRunner(sources=SourceFactory(cache=Cache(), verify_digests=verify))
    return asyncio.run(render(xr, policy, runner=runner, **kw))


def one_fatal(out: Rendered, *parts: str, reason: str) -> str:
    fatals = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1 and len(out.results) == 1, [(r.reason, r.message) for r in out.results]
    assert out.resources == []
    assert fatals[0].reason == reason, (fatals[0].reason, fatals[0].message)
    for p in parts:
        assert p in fatals[0].message, f"{p!r} not in {fatals[0].message!r}"
    return fatals[0].message


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- the check itself --------------------------------------------------------------------------


def _res(hash_algorithm: str, norm: str, value: str) -> Resource:
    return Resource(
        "config",
        "1",
        "configdata.ocm.software",
        "local",
        {},
        digest=Digest(hash_algorithm, norm, value),
    )


def test_hash_names_are_compared_case_insensitively_and_both_normalisations_check_bytes() -> None:
    data = b"kind: ConfigData\n"
    hexd = hashlib.sha256(data).hexdigest()
    for alg in ("SHA-256", "sha256", "Sha-256"):
        for norm in ("genericBlobDigest/v1", "GENERICBLOBDIGEST/V1"):
            c = digests.check("here", _res(alg, norm, hexd.upper()), data, "application/yaml")
            assert c.status == "verified", c
    manifest = b'{"schemaVersion":2}'
    mhex = hashlib.sha256(manifest).hexdigest()
    oci = "application/vnd.oci.image.manifest.v1+json"
    assert digests.check("here", _res("SHA-256", "ociArtifactDigest/v1", mhex), manifest, oci)
    sha512 = hashlib.sha512(data).hexdigest()
    assert digests.check("h", _res("SHA-512", "genericBlobDigest/v1", sha512), data, "x").status
    with pytest.raises(
        digests.DigestMismatch, match=f"declares SHA-256 genericBlobDigest/v1 {mhex}"
    ):
        digests.check("here", _res("SHA-256", "genericBlobDigest/v1", mhex), data, "x")


@pytest.mark.parametrize(
    ("alg", "norm", "media", "named"),
    [
        ("SHA-256", "jsonNormalisation/v2", "application/yaml", "'jsonNormalisation/v2'"),
        ("SHA-256", "", "application/yaml", "normalisationAlgorithm ''"),
        ("MD5", "genericBlobDigest/v1", "application/yaml", "'MD5'"),
        ("SHA-256", "ociArtifactDigest/v1", "application/yaml", "ociArtifactDigest/v1"),
    ],
)
def test_a_digest_that_cannot_be_checked_is_one_error_naming_it(alg, norm, media, named) -> None:
    from function.errors import ComponentError

    with pytest.raises(ComponentError, match="^component x resource config: ") as err:
        digests.check("component x resource config", _res(alg, norm, "00"), b"x", media)
    assert named in err.value.message


def test_no_digest_and_excluded_digest_are_missing_and_the_policy_decides() -> None:
    from function.errors import ComponentError

    bare = Resource("config", "1", "configdata.ocm.software", "local", {})
    excluded = _res("NO-DIGEST", "EXCLUDE-FROM-SIGNATURE", "NO-DIGEST")
    checks = {
        r.name + str(i): digests.check("w", r, b"x", "application/yaml")
        for i, r in enumerate((bare, excluded))
    }
    assert {c.status for c in checks.values()} == {"missing"}
    for half in (_res("NO-DIGEST", "", "NO-DIGEST"), _res("x", "Exclude-From-Signature", "")):
        assert digests.check("w", half, b"x", "application/yaml").status == "missing"
    with pytest.raises(ComponentError, match=r"source\.requireDigests"):
        digests.enforce(checks, "component c:1", require=True)
    warned = digests.enforce(checks, "component c:1", require=False)
    assert [r for r, _ in warned] == ["ResourceDigestMissing"] * 2
    assert "excluded from signatures" in warned[1][1]


# -- a CTF -------------------------------------------------------------------------------------


def test_the_untampered_component_composes_and_status_is_unchanged(tmp_path: Path) -> None:
    xr, policy = xr_and_policy(XR_HELM, None)
    out = run(xr, policy, observed=observed_helm())
    assert out.fatal is None, out.fatal.message
    assert not [r for r in out.results if "Digest" in r.reason]


@pytest.mark.parametrize("resource", sorted(BLOBS))
@pytest.mark.parametrize("how", ["relinked", "declared", "in place"])
def test_tampered_blob_in_a_ctf_is_refused_by_name(tmp_path: Path, resource: str, how: str) -> None:
    ctf = tmp_path / "ctf"
    if how == "relinked":
        relink(ctf, resource)
    elif how == "declared":
        redeclare(ctf, resource)
    else:
        shutil.copytree(ctfedit.CTF, ctf)
        stored = overwrite(ctf, resource)
    xr, policy = xr_and_policy(BLOBS[resource], ctf)
    where = f"component {COMPONENT}:6.2.0 resource {resource}: "
    out = run(xr, policy)
    if how == "in place":  # the storage's own digest no longer holds
        one_fatal(out, where, stored, "digest mismatch", reason="DigestMismatch")
    else:
        msg = one_fatal(out, where, "digest mismatch", reason="DigestMismatch")
        declared = (
            declared_value(resource)
            if how == "relinked"
            else hashlib.sha256(b"not the blob").hexdigest()
        )
        assert f"declares SHA-256 genericBlobDigest/v1 {declared}" in msg, msg
        actual = msg.rsplit("hashes to ", 1)[1]
        assert len(actual) == 64 and actual != declared, msg

    # the CLI: render refuses the same way, and lets it through only when told (tests only)
    args = ["render", str(BLOBS[resource]), "--composition", str(COMPOSITION)]
    args += ["--component", str(ctf)]
    r = cli(*args)
    assert r.exit_code == 1 and r.stdout == ""
    assert where in r.stderr and "digest mismatch" in r.stderr, r.stderr
    if how != "in place":  # an in-place change breaks the storage itself: nothing to skip to
        r = cli(*args, "--skip-digest-check")
        assert r.exit_code == 0, r.stderr
        assert f"ResourceDigestNotChecked: component {COMPONENT}:6.2.0 resource {resource}" in (
            r.stderr
        )


def with_digest(dest: Path, resource: str, **fields: str) -> Path:
    """A copy of the bundled CTF whose ``resource`` declares its digest with other fields."""

    def edit(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        ctfedit._resource(descriptor, resource)["digest"].update(fields)
        return {}

    return ctfedit._rewrite(dest, "6.2.0", edit)


def test_oci_artifact_digest_of_the_chart_verifies_and_other_algorithms_are_named(
    tmp_path: Path,
) -> None:
    # ociArtifactDigest/v1 is the chart manifest's digest: the same value, another name
    ctf = with_digest(tmp_path / "a", "chart", normalisationAlgorithm="ociArtifactDigest/v1")
    xr, policy = xr_and_policy(XR_HELM, ctf)
    out = run(xr, policy, observed=observed_helm())
    assert out.fatal is None, out.fatal.message
    ctf = with_digest(tmp_path / "b", "chart", hashAlgorithm="sha256")  # as older tools spell it
    xr, policy = xr_and_policy(XR_HELM, ctf)
    assert run(xr, policy, observed=observed_helm()).fatal is None
    # ... but not for a tar, which is no OCI artifact; and an unknown algorithm is named
    ctf = with_digest(tmp_path / "c", "manifests-gz", normalisationAlgorithm="ociArtifactDigest/v1")
    xr, policy = xr_and_policy(XR_KUSTOMIZE, ctf)
    one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource manifests-gz: ",
        "ociArtifactDigest/v1 is the digest of an OCI artifact's manifest",
        reason="ComponentError",
    )
    ctf = with_digest(tmp_path / "d", "config", normalisationAlgorithm="jsonNormalisation/v1")
    xr, policy = xr_and_policy(XR_HELM, ctf)
    one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource config: ",
        "normalisationAlgorithm 'jsonNormalisation/v1' is not supported",
        reason="ComponentError",
    )


@pytest.mark.parametrize("resource", sorted(BLOBS))
def test_inspect_shows_each_check_and_fails_on_the_tampered_one(
    tmp_path: Path, resource: str
) -> None:
    ctf = relink(tmp_path / "ctf", resource)
    r = cli("inspect", f"{ctf}//{COMPONENT}:6.2.0", "--json")
    assert r.exit_code == 1
    assert f"resource {resource}: digest mismatch" in r.stderr, r.stderr
    rep = json.loads(r.stdout)
    checks = {x["name"]: x["digestCheck"] for x in rep["resources"]}
    assert checks.pop(resource).startswith("FAILED: digest mismatch: the descriptor declares")
    assert checks.pop("image").startswith("not read by the function")
    assert all(c.startswith("verified (SHA-256 genericBlobDigest/v1 ") for c in checks.values())
    # extracting the tampered resource is refused; --skip-digest-check lets a test have it
    r = cli("inspect", f"{ctf}//{COMPONENT}:6.2.0", "--extract", resource, "-o", str(tmp_path))
    assert r.exit_code == 1 and "digest mismatch" in r.stderr
    r = cli(
        "inspect", f"{ctf}//{COMPONENT}:6.2.0", "--extract", resource, "-o", str(tmp_path),
        "--skip-digest-check",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr


def test_what_the_ocm_cli_writes_verifies(fixtures_dir: Path) -> None:
    """OCM CLI v0.9.1's own CTF: every localBlob's genericBlobDigest/v1 checks out (the chart's
    is its manifest digest), so real components are not refused."""
    ctf = need_path(fixtures_dir / "ctf", "OCM CLI fixture CTF", "SACK8S_FIXTURES")
    for version in ("6.2.0", "6.3.0"):
        r = cli("inspect", f"{ctf}//{COMPONENT}:{version}", "--json")
        assert r.exit_code == 0, r.stderr
        checks = {x["name"]: x["digestCheck"] for x in json.loads(r.stdout)["resources"]}
        assert checks.pop("image").startswith("not read by the function"), checks
        assert sorted(checks) == ["chart", "config", "manifests", "manifests-gz"]
        for name, c in checks.items():
            assert c.startswith("verified (SHA-256 genericBlobDigest/v1 "), (name, c)


def test_inspect_of_the_bundled_component_verifies_every_blob() -> None:
    r = cli("inspect", f"{ctfedit.CTF}//{COMPONENT}:6.2.0")
    assert r.exit_code == 0, r.stderr
    checked = [x.strip() for x in r.stdout.splitlines() if x.strip().startswith("checked ")]
    assert len(checked) == 5 and sum("verified (SHA-256" in c for c in checked) == 4, checked


@pytest.mark.parametrize("resource", sorted(BLOBS))
def test_localize_and_mutate_refuse_a_tampered_component(tmp_path: Path, resource: str) -> None:
    ctf = relink(tmp_path / "ctf", resource)
    cd = tmp_path / "cd.yaml"
    cd.write_text(ctfedit.bundled_configdata())
    (tmp_path / "values.yaml").write_text("replicas: 2\n")
    chart = tmp_path / "chart"
    r = cli("inspect", f"{ctfedit.CTF}//{COMPONENT}:6.2.0", "--extract", "chart", "-o", str(chart))
    assert r.exit_code == 0, r.stderr
    base = ["--config-data", str(cd), "--component", f"{ctf}//{COMPONENT}:6.2.0"]
    base += ["--root", str(chart / "chart")]
    for cmd in (["localize"], ["mutate", "--values", str(tmp_path / "values.yaml")]):
        r = cli(*cmd, *base, "values.yaml")
        assert r.exit_code == 1 and r.stdout == "", r.stdout
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"sack8s: error: component {COMPONENT}:6.2.0 resource {resource}:")
        assert "digest mismatch" in line
        r = cli(*cmd, *base, "--skip-digest-check", "values.yaml")
        assert r.exit_code == 0, r.stderr
        assert "resource digests not checked (--skip-digest-check" in r.stderr


def test_check_reports_a_tampered_deployable_as_an_error(tmp_path: Path) -> None:
    ctf = relink(tmp_path / "ctf", "chart")
    cd = tmp_path / "cd.yaml"
    cd.write_text(ctfedit.bundled_configdata())
    r = cli("check", "--config-data", str(cd), "--component", f"{ctf}//{COMPONENT}:6.2.0")
    assert r.exit_code == 1, r.stdout
    (line,) = [x for x in r.stdout.splitlines() if "resource chart" in x]
    assert line.startswith("error: component: -: -: resource chart cannot be read"), line
    assert "digest mismatch" in line


# -- a component directory -----------------------------------------------------------------------


def component_dir(root: Path, *, digest: bool = True) -> Path:
    """The bundled 6.2.0 as a component directory, the ConfigData a named blob (no storage
    digest: only the resource digest verifies it)."""
    shutil.copytree(ctfedit.CTF / "blobs", root / "blobs")
    d = json.loads(example_component.version().descriptor.read_text())
    data = example_component.version().path("config").read_bytes()
    for r in d["component"]["resources"]:
        if r["name"] == "config":
            r["access"] = {
                "type": "localBlob",
                "localReference": "configdata.yaml",
                "mediaType": "application/yaml",
            }
            if not digest:
                del r["digest"]
    (root / "component-descriptor.json").write_text(json.dumps(d))
    (root / "blobs" / "configdata.yaml").write_bytes(data)
    return root


def test_component_directory_named_blob_is_verified_by_its_resource_digest(tmp_path: Path) -> None:
    comp = component_dir(tmp_path / "c")
    xr, policy = xr_and_policy(XR_HELM, comp)
    assert run(xr, policy, observed=observed_helm()).fatal is None
    named = comp / "blobs" / "configdata.yaml"
    named.write_bytes(named.read_bytes() + TAMPERED)
    msg = one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource config: digest mismatch",
        f"declares SHA-256 genericBlobDigest/v1 {declared_value('config')}",
        reason="DigestMismatch",
    )
    assert hashlib.sha256(named.read_bytes()).hexdigest() in msg
    # the chart's in-place change breaks the directory's sha256.<hex> storage as in a CTF
    overwrite(comp, "chart")
    named.write_bytes(example_component.version().path("config").read_bytes())
    one_fatal(
        run(xr, policy), f"component {COMPONENT}:6.2.0 resource chart: ", reason="DigestMismatch"
    )


def test_a_resource_without_digest_is_refused_unless_the_policy_allows_it(tmp_path: Path) -> None:
    comp = component_dir(tmp_path / "c", digest=False)
    xr, policy = xr_and_policy(XR_HELM, comp)
    one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource config: the resource declares no digest",
        "source.requireDigests",
        reason="ResourceDigestMissing",
    )
    policy["source"] = {"requireDigests": False}
    out = run(xr, policy, observed=observed_helm())
    assert out.fatal is None, out.fatal.message
    (w,) = [r for r in out.results if r.reason == "ResourceDigestMissing"]
    assert w.severity == fnv1.SEVERITY_WARNING
    assert "resource config: the resource declares no digest" in w.message
    assert {"reason": "ResourceDigestMissing", "message": w.message} in out.xr["status"]["warnings"]


# -- a real registry -------------------------------------------------------------------------------

REGISTRY_CASES = {  # base in the registry -> (the CTF pushed there, the resource tampered)
    "intact": (None, None),
    "config-relinked": (relink, "config"),
    "chart-relinked": (relink, "chart"),
    "manifests-relinked": (relink, "manifests-gz"),
    "chart-declared": (redeclare, "chart"),
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory):
    """Every case pushed to a TLS registry, whose storage a plain-HTTP registry serves; a
    second plain one serves a copy whose chart layer and Kustomize tar were overwritten."""
    from support.ctfpush import push_ctf

    need_gardener_ocm()
    binary = registry_bin()
    root = tmp_path_factory.mktemp("integrity-registry")
    pki = make_pki(root / "pki", name="sack8s integrity registry CA")
    tls = RegistryServer(
        binary, root / "tls", tls_cert=pki.cert_file, tls_key=pki.key_file, ca_file=pki.ca_file
    ).start()
    try:
        for base, (make, resource) in REGISTRY_CASES.items():
            ctf = ctfedit.CTF if make is None else make(root / base, resource)
            assert any(ref.endswith(":6.2.0") for ref in push_ctf(ctf, tls.host, base, pki.ca_file))
    finally:
        tls.stop()
    plain = RegistryServer(binary, root / "plain", storage=tls.root).start()
    tampered = RegistryServer(binary, root / "tampered", storage=tls.root)
    tampered.workdir.mkdir(parents=True)
    shutil.copytree(tls.root, tampered.root)
    for resource in ("chart", "manifests-gz"):
        hexd = in_place_target(ctfedit.CTF, resource).removeprefix("sha256:")
        data = tampered.root / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"
        data.write_bytes(data.read_bytes() + TAMPERED)
    tampered.storage = None
    tampered.start()
    yield plain, tampered
    plain.stop()
    tampered.stop()


def registry_xr(xr_file: Path, host: str, base: str) -> tuple[dict, dict]:
    xr, policy = xr_and_policy(xr_file, None)
    xr["spec"]["component"]["repository"] = f"oci::http://{host}/{base}"
    policy["mirrors"] = []
    policy["registries"] = [{"host": host, "plainHTTP": True}]
    policy["imageRegistries"] = [{"host": "127.0.0.1:5000", "pullCredential": True}]
    return xr, policy


@pytest.mark.registry
def test_registry_untampered_composes_and_warm_reconciles_reuse_the_verified_blobs(
    registry,
) -> None:
    plain, _ = registry
    xr, policy = registry_xr(XR_HELM, plain.host, "intact")
    cache = Cache()
    runner = FunctionRunner(sources=SourceFactory(cache=cache))
    out = run(xr, policy, runner=runner, observed=observed_helm())
    assert out.fatal is None, out.fatal.message
    cold = cache.stats.registry_requests
    out = run(xr, policy, runner=runner, observed=observed_helm())
    assert out.fatal is None
    # warm: the verified load is reused by descriptor digest; no blob is fetched again
    assert cache.stats.registry_requests == cold, (cold, cache.stats)


@pytest.mark.registry
@pytest.mark.parametrize("base", [b for b in REGISTRY_CASES if b != "intact"])
def test_registry_tampered_blob_is_refused_by_name(registry, base: str) -> None:
    plain, _ = registry
    make, resource = REGISTRY_CASES[base]
    xr, policy = registry_xr(BLOBS[resource], plain.host, base)
    msg = one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource {resource}: digest mismatch: the descriptor "
        "declares SHA-256 genericBlobDigest/v1 ",
        reason="DigestMismatch",
    )
    if make is relink:
        assert declared_value(resource) in msg
    source = f"oci::http://{plain.host}/{base}//{COMPONENT}:6.2.0"
    r = cli("inspect", source)
    assert r.exit_code == 1 and f"resource {resource}: digest mismatch" in r.stderr, r.stderr
    assert "FAILED: digest mismatch" in r.stdout


@pytest.mark.registry
@pytest.mark.parametrize("resource", ["chart", "manifests-gz"])
def test_registry_blob_overwritten_in_storage_is_refused_by_name(registry, resource) -> None:
    _, tampered = registry
    xr, policy = registry_xr(BLOBS[resource], tampered.host, "intact")
    stored = in_place_target(ctfedit.CTF, resource)
    one_fatal(
        run(xr, policy),
        f"component {COMPONENT}:6.2.0 resource {resource}: ",
        f"digest mismatch: expected {stored}",
        reason="DigestMismatch",
    )
