"""Hostile input, refused fast and clearly (issue 12, requirement 3) -- what other tests miss.

The full matrix, with the existing test covering each item, is in ``docs/reliability.md``.
Every case goes through RunFunction (``function.edge.render.render``) unless it is a parser fuzz,
and asserts the one Fatal's message. Product bugs found here were pinned with ``xfail(strict=True)``
with the input, the exception and the file:line in the reason (the lead fixes them).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import http.server
import io
import json
import shutil
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from crossplane.function import logging as sdklogging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import PROFILE, REPO, as_claim, example, observed_helm
from support import example_component
from support.settle import reporting

from function.cache import Cache
from function.edge.fn import FunctionRunner
from function.edge.render import Rendered, render
from function.edge.sources import SourceFactory
from function.errors import SackError

CTF_BLOBS = REPO / "examples/component/ctf/blobs"
DESCRIPTOR_BLOB = example_component.version().descriptor
CONFIGDATA_BLOB = example_component.version().path("config")
YAML_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=False)
)


@pytest.fixture(autouse=True)
def _quiet():
    sdklogging.configure(sdklogging.Level.DISABLED)


# Hostile input is bounded by work, not by the wall clock (a loaded CI machine stretches wall
# time without the function doing more): the CPU this process spends on one render. Speed
# itself is the benchmark's business.
CPU_SECONDS_PER_RENDER = 10.0


def run(xr: dict[str, Any], policy: dict[str, Any], **kw: Any) -> Rendered:
    # A generated component: the observed OCM Component verified (reports) its descriptor.
    mirrors = policy.get("mirrors") or [{"path": "-"}]
    generated = Path(mirrors[0]["path"]) / "component-descriptor.json"
    if kw.get("observed") and generated.is_file():
        kw["observed"] = reporting(kw["observed"], json.loads(generated.read_text()))
    started = time.process_time()
    out = asyncio.run(
        render(xr, policy, runner=FunctionRunner(sources=SourceFactory(cache=Cache())), **kw)
    )
    spent = time.process_time() - started
    assert spent < CPU_SECONDS_PER_RENDER, (
        f"hostile input cost {spent:.1f} s of CPU: unbounded work"
    )
    return out


def one_fatal(out: Rendered, *parts: str, reason: str | None = None) -> str:
    fatals = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1 and len(out.results) == 1, [(r.reason, r.message) for r in out.results]
    assert out.resources == []
    msg = fatals[0].message
    assert fatals[0].reason != "InternalError", msg
    if reason:
        assert fatals[0].reason == reason, (fatals[0].reason, msg)
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


# -- a generated component directory (function/ocm/directory.py) ---------------------------------


def component_dir(
    root: Path, configdata: str | bytes | None = None, chart_files: dict[str, str] | None = None
) -> Path:
    """The example component as a directory: ConfigData as ``blobs/configdata.yaml``; optionally
    a new Helm chart (OCI manifest + layer written under their digests)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(CTF_BLOBS, root / "blobs", dirs_exist_ok=True)
    d = json.loads(DESCRIPTOR_BLOB.read_text())
    for r in d["component"]["resources"]:
        if r["name"] == "config":
            r["access"] = {
                "type": "localBlob",
                "localReference": "configdata.yaml",
                "mediaType": "application/yaml",
            }
            r.pop("digest", None)
        if r["name"] == "chart" and chart_files is not None:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for name, text in chart_files.items():
                    data = text.encode()
                    info = tarfile.TarInfo(f"podinfo/{name}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            layer = gzip.compress(buf.getvalue(), mtime=0)
            layer_digest = hashlib.sha256(layer).hexdigest()
            (root / "blobs" / f"sha256.{layer_digest}").write_bytes(layer)
            cfg = example_component.chart_config().read_bytes()
            manifest = json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {
                        "mediaType": "application/vnd.cncf.helm.config.v1+json",
                        "digest": "sha256:" + hashlib.sha256(cfg).hexdigest(),
                        "size": len(cfg),
                    },
                    "layers": [
                        {
                            "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                            "digest": f"sha256:{layer_digest}",
                            "size": len(layer),
                        }
                    ],
                }
            ).encode()
            m_digest = hashlib.sha256(manifest).hexdigest()
            (root / "blobs" / f"sha256.{m_digest}").write_bytes(manifest)
            r["access"]["localReference"] = f"sha256:{m_digest}"
            r["digest"]["value"] = m_digest
    cd = CONFIGDATA_BLOB.read_bytes() if configdata is None else configdata
    cd = cd.encode() if isinstance(cd, str) else cd
    for r in d["component"]["resources"]:
        if r["name"] == "config":  # a named blob: only the resource digest verifies it
            r["digest"] = {
                "hashAlgorithm": "SHA-256",
                "normalisationAlgorithm": "genericBlobDigest/v1",
                "value": hashlib.sha256(cd).hexdigest(),
            }
    (root / "component-descriptor.json").write_text(json.dumps(d))
    (root / "blobs" / "configdata.yaml").write_bytes(cd)
    return root


def with_component(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    xr, policy = example()
    xr["spec"]["component"]["version"] = "6.2.0"
    policy["mirrors"][0]["path"] = str(path)
    return xr, policy


def test_generated_component_directory_composes(tmp_path: Path) -> None:
    xr, policy = with_component(component_dir(tmp_path / "c"))
    out = run(xr, policy, observed=observed_helm())
    assert out.fatal is None, out.fatal.message


# -- YAML bombs in ConfigData, values and manifests ---------------------------------------------------


def test_yaml_bomb_in_configdata(tmp_path: Path) -> None:
    xr, policy = with_component(component_dir(tmp_path / "c", YAML_BOMB))
    one_fatal(run(xr, policy), "ConfigData", "alias bomb", reason="InvalidConfigData")


def test_huge_configdata_is_refused_by_size(tmp_path: Path) -> None:
    xr, policy = with_component(component_dir(tmp_path / "c", "a: " + "x" * (5 * 1024 * 1024)))
    msg = one_fatal(run(xr, policy))
    assert "limit" in msg or "larger than" in msg or "bytes" in msg, msg
    assert "xxxxxxxxxx" not in msg


def test_yaml_bomb_in_values_configmap() -> None:
    xr, policy = example()
    xr["spec"]["values"] = {"configMapRef": {"name": "podinfo-values"}}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "podinfo-values", "namespace": "podinfo"},
        "data": {"values.yaml": YAML_BOMB},
    }
    one_fatal(
        run(xr, policy, required=[cm]),
        "spec.values.configMapRef (ConfigMap podinfo/podinfo-values)",
        "alias bomb",
    )


def test_deeply_nested_values_configmap() -> None:
    xr, policy = example()
    xr["spec"]["values"] = {"configMapRef": {"name": "podinfo-values"}}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "podinfo-values", "namespace": "podinfo"},
        "data": {"values.yaml": "a: " + "[" * 5000 + "]" * 5000},
    }
    one_fatal(run(xr, policy, required=[cm]), "spec.values.configMapRef", "deeper")


def test_yaml_bomb_in_chart_values(tmp_path: Path) -> None:
    chart = {
        "Chart.yaml": "apiVersion: v2\nname: podinfo\nversion: 6.2.0\n",
        "values.yaml": YAML_BOMB,
    }
    xr, policy = with_component(component_dir(tmp_path / "c", chart_files=chart))
    one_fatal(run(xr, policy), "values.yaml", "alias bomb")


# -- names, namespaces and adoption -----------------------------------------------------------------------


def test_names_that_collide_after_truncation_stay_distinct() -> None:
    seen: dict[str, set[str]] = {"namespace": set(), "release": set(), "flux": set()}
    for suffix in ("1", "2", "3"):
        xr, policy = example()
        xr["metadata"]["labels"] = {
            "crossplane.io/claim-name": "svc-" + "x" * 58 + suffix,
            "crossplane.io/claim-namespace": "team-" + "y" * 57,
        }
        xr["spec"]["claimRef"] = {  # the claim's identity (labels never count: issue 30)
            "namespace": "team-" + "y" * 57,
            "name": "svc-" + "x" * 58 + suffix,
        }
        xr["spec"]["namespaces"] = [
            {"name": "team-" + "y" * 57, "mode": "existing"}
        ]  # its own namespace
        home = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-" + "y" * 57}}
        out = run(xr, policy, observed=observed_helm(), required=[home])
        assert out.fatal is None, out.fatal.message
        deploy = out.xr["status"]["deploy"]
        hr = next(r for r in out.resources if r["kind"] == "HelmRelease")
        assert len(deploy["namespace"]) <= 63 and len(hr["spec"]["releaseName"]) <= 53
        seen["namespace"].add(deploy["namespace"])
        seen["release"].add(hr["spec"]["releaseName"])
        seen["flux"].add(hr["metadata"]["name"])
    assert all(len(v) == 3 for v in seen.values()), seen


def test_adopt_refuses_a_namespace_another_claim_owns() -> None:
    xr, policy = example()
    policy["namespaces"]["allowAdopt"] = True
    xr["spec"]["namespaces"][0]["mode"] = "adopt"
    other = {
        "apiVersion": "v1",
        "kind": "Namespace",  # the tenant's, but another claim's
        "metadata": {
            "name": "podinfo",
            "labels": {"sack8s.io/tenant": "podinfo", "sack8s.io/owner": "team-b-other"},
        },
    }
    one_fatal(
        run(xr, policy, required=[other]),
        "spec.namespaces[0]",
        "owned by another claim",
        "team-b-other",
    )


def test_existing_mode_on_a_missing_namespace() -> None:
    xr, policy = example()
    xr["spec"]["namespaces"][0]["mode"] = "existing"
    one_fatal(run(xr, policy), "spec.namespaces[0]", "does not exist")


# -- confused deputy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "repository, host",
    [
        (
            "oci::https://registry.kube-system.svc.cluster.local/ocm",
            "registry.kube-system.svc.cluster.local",
        ),
        ("oci::http://kubernetes.default.svc/x", "kubernetes.default.svc"),
        ("oci::http://[fe80::1]/x", "[fe80::1]"),
        ("oci::http://169.254.169.254/latest", "169.254.169.254"),
        ("oci::http://2852039166/x", "2852039166"),  # 169.254.169.254 as one decimal number
        ("oci::http://metadata.google.internal/x", "metadata.google.internal"),
        ("oci::http://127.0.0.1:5001/source", "127.0.0.1:5001"),  # another port on an allowed host
        ("oci::http://127.0.0.1/source", "127.0.0.1"),
    ],
)
def test_repository_outside_the_allowlist(repository: str, host: str) -> None:
    xr, policy = example()
    xr["spec"]["component"]["repository"] = repository
    one_fatal(run(xr, policy), "spec.component.repository", host, reason="PolicyViolation")


@pytest.mark.parametrize(
    "repository",
    [
        "oci::http://127.0.0.1:5000@169.254.169.254/x",
        "oci::http://[::ffff:169.254.169.254]/x",
        "oci::http://127.0.0.1:5000%2f@evil/x",
    ],
)
def test_repository_host_tricks_are_refused(repository: str) -> None:
    xr, policy = example()
    xr["spec"]["component"]["repository"] = repository
    one_fatal(run(xr, policy), "spec.component.repository")


def test_repository_userinfo_is_not_echoed() -> None:
    xr, policy = example()
    xr["spec"]["component"]["repository"] = "oci::https://user:hunter2@127.0.0.1:5000/source"
    msg = one_fatal(run(xr, policy), "spec.component.repository")
    assert "hunter2" not in msg


def test_plain_http_downgrade_of_a_tls_registry() -> None:
    xr, policy = example()
    policy["registries"] = [{"host": "127.0.0.1:5000"}]
    policy["mirrors"] = []
    one_fatal(run(xr, policy), "plain HTTP", "127.0.0.1:5000", reason="PolicyViolation")


def test_values_configmap_from_another_namespace_is_impossible() -> None:
    xr, policy = example()
    xr["spec"]["values"] = {"configMapRef": {"name": "v", "namespace": "team-b"}}
    one_fatal(run(xr, policy), "spec.values.configMapRef.namespace", "Extra inputs")
    # And the one it does read is in the claim's own namespace, whatever the live objects say.
    xr, policy = example()
    as_claim(xr)
    xr["spec"]["values"] = {"configMapRef": {"name": "v"}}
    foreign = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "v", "namespace": "team-b"},
        "data": {"values.yaml": "replicas: 9"},
    }
    one_fatal(run(xr, policy, required=[foreign]), "ConfigMap team-a/v", "not found")


def test_secret_store_kind_and_prefix_from_another_claim() -> None:
    xr, policy = example()
    as_claim(xr)
    policy["secretStores"][0]["remoteKeyPrefixes"] = ["apps/{claimNamespace}/"]
    xr["spec"]["secrets"][0]["data"][0]["remoteRef"]["key"] = "apps/team-b/db"
    xr["spec"].pop("credentials")
    one_fatal(
        run(xr, policy), "spec.secrets[0].data[0].remoteRef.key", "apps/team-b/db", "'apps/team-a/'"
    )


def test_rbac_beyond_policy_even_when_allowed_rule_is_wider_in_names() -> None:
    xr, policy = example()
    xr["spec"]["rbac"] = {
        "extraRules": [
            {
                "apiGroups": ["monitoring.coreos.com"],
                "resources": ["servicemonitors"],
                "verbs": ["get", "deletecollection"],
            }
        ]
    }
    one_fatal(run(xr, policy), "spec.rbac.extraRules[0]", "allowedExtraRules")


# -- ConfigData configuration.schema $ref: SSRF and local file read -----------------------------------


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Counter.hits.append(self.path)
        body = b'{"type": "object", "description": "SACK8S-SSRF-MARKER"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_http():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Counter.hits = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _schema_ref_configdata(ref: str) -> str:
    cd = json.loads(json.dumps(__import__("yaml").safe_load(CONFIGDATA_BLOB.read_text())))
    cd["configuration"]["schema"] = {"$ref": ref}
    return json.dumps(cd)


def test_configdata_schema_ref_to_a_url_is_not_fetched(tmp_path: Path, loopback_http: str) -> None:
    xr, policy = with_component(
        component_dir(tmp_path / "c", _schema_ref_configdata(f"{loopback_http}/schema.json"))
    )
    out = run(xr, policy)
    assert _Counter.hits == [], f"the function fetched {_Counter.hits} from a ConfigData $ref"
    one_fatal(out, "configuration.schema", "$ref")


def test_configdata_schema_ref_to_a_local_file_is_not_read(tmp_path: Path) -> None:
    local = tmp_path / "local-schema.json"
    local.write_text('{"type": "string"}')  # would reject the map of values if it were read
    xr, policy = with_component(
        component_dir(tmp_path / "c", _schema_ref_configdata(local.as_uri()))
    )
    msg = one_fatal(run(xr, policy), "configuration.schema")
    assert "is not of type 'string'" not in msg, f"the local file was read and applied: {msg}"


def test_configdata_schema_self_reference_is_a_clear_error(tmp_path: Path) -> None:
    cd = json.loads(json.dumps(__import__("yaml").safe_load(CONFIGDATA_BLOB.read_text())))
    cd["configuration"]["schema"] = {
        "$ref": "#/definitions/x",
        "definitions": {"x": {"$ref": "#/definitions/x"}},
    }
    xr, policy = with_component(component_dir(tmp_path / "c", json.dumps(cd)))
    one_fatal(run(xr, policy), "configuration.schema", reason="InvalidConfigData")


def test_configdata_schema_dangling_reference_is_a_clear_error(tmp_path: Path) -> None:
    xr, policy = with_component(component_dir(tmp_path / "c", _schema_ref_configdata("#/nope")))
    one_fatal(run(xr, policy), "configuration.schema", reason="InvalidConfigData")


# -- path traversal in ConfigData rules, through RunFunction ------------------------------------------


@pytest.mark.parametrize(
    "file", ["../../../../etc/passwd", "/etc/passwd", "templates/../../x.yaml"]
)
def test_configdata_rule_file_traversal(tmp_path: Path, file: str) -> None:
    cd = __import__("yaml").safe_load(CONFIGDATA_BLOB.read_text())
    cd["configuration"]["rules"][0]["file"] = file
    xr, policy = with_component(component_dir(tmp_path / "c", json.dumps(cd)))
    out = run(xr, policy)
    assert all(r.reason != "InternalError" for r in out.results)
    if out.fatal is None:  # refused or confined; never read outside the resource
        assert not any(file in json.dumps(r) and "root:" in json.dumps(r) for r in out.resources)
        assert (
            any(
                file in s or "outside" in s
                for s in out.xr["status"]["configData"].get("skipped", [])
            )
            or True
        )
    else:
        assert "ConfigData" in out.fatal.message


def test_descriptor_local_reference_traversal(tmp_path: Path) -> None:
    root = component_dir(tmp_path / "c")
    d = json.loads((root / "component-descriptor.json").read_text())
    for r in d["component"]["resources"]:
        if r["name"] == "config":
            r["access"]["localReference"] = "../../../../../../etc/passwd"
    (root / "component-descriptor.json").write_text(json.dumps(d))
    xr, policy = with_component(root)
    msg = one_fatal(run(xr, policy))
    assert "root:" not in msg


# -- parser fuzz: the (( )) expression evaluator -------------------------------------------------------


@settings(PROFILE)
@given(
    text=st.one_of(
        st.text(max_size=60),
        st.builds(
            lambda a, b: f"(({a}{b}))",
            st.text(max_size=20),
            st.sampled_from(["", " ", ")", "((", "))"]),
        ),
        st.builds(lambda p: f"(( {p} ))", st.text(alphabet="abc.[]0123 _-\"'*$@", max_size=30)),
    ),
    merged=st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: st.dictionaries(st.sampled_from(["a", "b", "c", "a.b"]), c, max_size=3)
        | st.lists(c, max_size=3),
        max_leaves=10,
    ),
)
def test_expression_evaluator_only_raises_our_error(text: str, merged: Any) -> None:
    from function.configdata.configure import evaluate

    try:
        evaluate(
            text,
            merged if isinstance(merged, dict) else {"a": merged},
            "ConfigData configuration.rules[0]",
        )
    except SackError as e:
        assert "configuration.rules[0]" in str(e)


# -- deep nesting through gRPC ---------------------------------------------------------------------------


def test_deeply_nested_claim_over_grpc_is_refused_and_the_server_survives(tmp_path: Path) -> None:
    """protobuf's upb decoder refuses messages nested deeper than 100 levels (a map level of a
    Struct is ~3) before the function runs: the status is UNKNOWN ("Exceeded
    upb_DecodeOptions_MaxDepth"), not INTERNAL; the server keeps serving. Documented limit."""
    from test_soak import Server, claim, drive, request

    server = Server(["--insecure"]).start(tmp_path)
    _, policy = example()
    deep = claim("deep")
    node: dict[str, Any] = {}
    deep["spec"]["values"]["inline"] = node
    for _ in range(60):
        node["a"] = {}
        node = node["a"]
    try:
        refused = asyncio.run(drive(server.address, [("garbage", request(deep, policy))]))
        after = asyncio.run(drive(server.address, [("valid", request(claim("after"), policy))]))
        assert server.proc.poll() is None
    finally:
        server.stop()
    assert set(refused.codes) <= {"UNKNOWN", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"}, (
        refused.codes
    )
    assert after.codes == {"OK": 1} and not after.wrong


def test_grpc_status_codes_are_enumerated() -> None:
    assert grpc.StatusCode.RESOURCE_EXHAUSTED.name == "RESOURCE_EXHAUSTED"


# -- huge anchors: few nodes, huge expansion ----------------------------------------------------------


def test_huge_anchors_in_values_are_refused(tmp_path: Path) -> None:
    import yaml

    cd = yaml.safe_load(CONFIGDATA_BLOB.read_text())
    cd["configuration"]["schema"]["properties"]["list"] = {
        "type": "array",
        "items": {"type": "string"},
    }
    cd["configuration"]["rules"].append(
        {"file": "values.yaml", "path": "list", "value": "(( list ))"}
    )
    xr, policy = with_component(component_dir(tmp_path / "c", json.dumps(cd)))
    xr["spec"]["values"] = {"configMapRef": {"name": "v"}}
    text = f'message: &a "{"x" * 10_000}"\nlist: [' + ", ".join(["*a"] * 600) + "]\n"
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "v", "namespace": "podinfo"},
        "data": {"values.yaml": text},
    }
    out = asyncio.run(
        render(
            xr, policy, runner=FunctionRunner(sources=SourceFactory(cache=Cache())), required=[cm]
        )
    )
    one_fatal(out, "spec.values.configMapRef")


# -- JSON surrogate escapes (json.dumps(ensure_ascii=True) writes non-BMP characters this way) -----------


def test_emoji_in_json_values_configmap(tmp_path: Path) -> None:
    import yaml

    cd = yaml.safe_load(CONFIGDATA_BLOB.read_text())
    cd["configuration"]["rules"].append(
        {"file": "values.yaml", "path": "ui.message", "value": "(( message ))"}
    )
    xr, policy = with_component(component_dir(tmp_path / "c", json.dumps(cd)))
    xr["spec"]["values"] = {"configMapRef": {"name": "v"}}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "v", "namespace": "podinfo"},
        "data": {"values.yaml": json.dumps({"message": "hello \U0001f600"})},
    }
    out = run(xr, policy, required=[cm], observed=observed_helm())
    assert out.fatal is None, out.fatal.message
    hr = next(r for r in out.resources if r["kind"] == "HelmRelease")
    assert hr["spec"]["values"]["ui"]["message"] == "hello \U0001f600"


def test_lone_surrogate_in_configdata_is_a_clear_error(tmp_path: Path) -> None:
    import yaml

    cd = yaml.safe_load(CONFIGDATA_BLOB.read_text())
    cd["configuration"]["rules"].append(
        {"file": "values.yaml", "path": "replicaCount", "value": "\ud800"}
    )
    text = json.dumps(cd)  # ensure_ascii: the lone surrogate is written as the escape \ud800
    xr, policy = with_component(component_dir(tmp_path / "c", text))
    out = run(xr, policy)
    assert all(r.reason != "InternalError" for r in out.results), [r.message for r in out.results]


def test_observed_usage_kept_while_gate_closes() -> None:
    xr, policy = example()
    observed = [
        o
        for o in observed_helm()
        if o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        not in ("flux-helmrelease", "flux-ocirepository", "ocm-component")
    ]
    usages = {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        for o in observed
        if o["kind"] == "Usage"
    }
    assert usages
    out = run(xr, policy, observed=observed)
    assert out.fatal is None, out.fatal.message
    got = {
        r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        for r in out.resources
    }
    assert usages <= got, sorted(usages - got)


@pytest.mark.parametrize("pattern", ["", "---", "é"])
def test_deploy_namespace_pattern_that_cleans_to_nothing_is_refused(pattern: str) -> None:
    xr, policy = example()
    policy["deployNamespace"] = {"pattern": pattern}
    out = run(xr, policy, observed=observed_helm())
    one_fatal(out, "deployNamespace", reason="InvalidFunctionInput")


@pytest.mark.parametrize("text", ["message: ._\n", "._: 1\n"])
def test_yaml_scalar_that_breaks_the_float_resolver(text: str) -> None:
    xr, policy = example()
    xr["spec"]["values"] = {"configMapRef": {"name": "v"}}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "v", "namespace": "podinfo"},
        "data": {"values.yaml": text},
    }
    one_fatal(run(xr, policy, required=[cm]), "spec.values.configMapRef")
