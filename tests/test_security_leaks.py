"""No secret leaks (issue 12, requirement 5).

Marker credentials are planted in the pipeline step's credentials (``--function-credentials``
Secrets for ``sack8s render``, ``RunFunctionRequest.credentials`` for ``sack8s serve``), in
both Secret forms (username/password and ``.dockerconfigjson``), and the fault proxy answers
with bodies carrying :data:`support.faultproxy.MARKER`. Then the rendered output, the debug
logs of ``sack8s render -v`` and ``sack8s serve --debug``, and every Fatal message -- of the
registry faults and of the whole hostile-input matrix of ``tests/test_compose_bad_input.py``
-- are scanned for the markers (raw, base64 and URL-encoded).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from crossplane.function import logging as sdklogging
from hypothesis_profiles import REPO, example
from support.faultproxy import MARKER
from support.oci_env import (
    PASSWORD,
    USER,
    basic_auth_registry,
    fault_proxy,
    fixture_registry,
    htpasswd_file,
    proxy,
)
from test_soak import Server, claim, drive, request

from function.cache import Cache
from function.edge.fn import FunctionRunner
from function.edge.render import render
from function.edge.sources import SourceFactory

SACK8S = str(Path(sys.executable).with_name("sack8s"))
USER_MARKER = "sack8s-leak-user-4b1d"
PASS_MARKER = "SACK8S-LEAK-PASSWORD-9e2c\"quote'"
DOCKER_MARKER = "SACK8S-LEAK-DOCKERCFG-77aa"


def forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        base64.b64encode(raw).decode(),
        base64.b64encode(f"{USER_MARKER}:{secret}".encode()).decode(),
        urllib.parse.quote(secret),
        json.dumps(secret)[1:-1],
    ]


SECRETS = [PASS_MARKER, DOCKER_MARKER, MARKER, PASSWORD]


def assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        for f in forms(s):
            assert f not in text, f"{where} leaks {s!r} (as {f!r})"


def creds_secret(name: str, user: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "Opaque",
        "data": {
            "username": base64.b64encode(user.encode()).decode(),
            "password": base64.b64encode(password.encode()).decode(),
        },
    }


def dockercfg_secret(name: str, host: str, password: str) -> dict[str, Any]:
    cfg = {
        "auths": {host: {"auth": base64.b64encode(f"{USER_MARKER}:{password}".encode()).decode()}}
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(cfg).encode()).decode()},
    }


def setup(host: str, cred_name: str = "registry-creds") -> tuple[dict[str, Any], dict[str, Any]]:
    xr, policy = example()
    xr["spec"]["component"]["repository"] = f"oci::http://{host}/source"
    xr["spec"]["component"]["version"] = "6.2.0"
    policy["registries"] = [{"host": host, "plainHTTP": True, "credentials": cred_name}]
    policy["imageRegistries"] = [
        {"host": host, "pullCredential": True},
        {"host": "127.0.0.1:5000", "pullCredential": True},
    ]
    policy["mirrors"] = []
    policy["configData"] = {"imagePairs": "Warning"}  # the fixture registry's ConfigData (issue 20)
    return xr, policy


def render_cli(tmp: Path, xr: dict, policy: dict, creds: list[dict]) -> subprocess.CompletedProcess:
    (tmp / "xr.yaml").write_text(yaml.safe_dump(xr))
    (tmp / "input.yaml").write_text(yaml.safe_dump(policy))
    (tmp / "creds.yaml").write_text(yaml.safe_dump_all(creds))
    return subprocess.run(
        [
            SACK8S,
            "render",
            str(tmp / "xr.yaml"),
            "--input",
            str(tmp / "input.yaml"),
            "--function-credentials",
            str(tmp / "creds.yaml"),
            "-v",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("fault", [None, "401", "403", "500", "redirect", "corrupt", "truncate"])
@pytest.mark.parametrize("form", ["usernamePassword", "dockerconfigjson"])
def test_render_verbose_never_prints_credentials_or_registry_bodies(
    tmp_path: Path, proxy, fault, form
) -> None:
    xr, policy = setup(proxy.host)
    secret = PASS_MARKER if form == "usernamePassword" else DOCKER_MARKER
    creds = [
        creds_secret("registry-creds", USER_MARKER, secret)
        if form == "usernamePassword"
        else dockercfg_secret("registry-creds", proxy.host, secret)
    ]
    if fault == "401":
        proxy.fault("401")  # makes the client offer the planted credentials, then give up
    elif fault:
        proxy.fault(fault, when=lambda m, p: "/blobs/" in p or "/manifests/" in p)
    out = render_cli(tmp_path, xr, policy, creds)
    assert_clean(out.stdout, "render stdout")
    assert_clean(out.stderr, "render -v stderr")
    if fault is None:
        assert out.returncode == 0, out.stderr[-2000:]
        assert "HelmRelease" in out.stdout
    else:
        assert out.returncode == 1 and "sack8s render:" in out.stderr
        assert "Traceback" not in out.stderr
    if (
        fault == "401"
    ):  # the planted credential really was offered to the registry (so it was in play)
        assert any(r.headers.get("authorization") for r in proxy.requests)


def test_real_basic_auth_registry_right_and_wrong_password(
    tmp_path: Path, basic_auth_registry
) -> None:
    xr, policy = setup(basic_auth_registry.host)
    xr["spec"]["component"]["repository"] = f"oci::http://{basic_auth_registry.host}/copied-default"
    ok = render_cli(tmp_path, xr, policy, [creds_secret("registry-creds", USER, PASSWORD)])
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert_clean(ok.stdout + ok.stderr, "render with the right password")
    bad = render_cli(tmp_path, xr, policy, [creds_secret("registry-creds", USER, PASS_MARKER)])
    assert bad.returncode == 1 and ("401" in bad.stderr or "unauthorized" in bad.stderr.lower())
    assert_clean(bad.stdout + bad.stderr, "render with a wrong password")


def test_serve_debug_log_and_results_never_carry_credentials(tmp_path: Path, proxy) -> None:
    server = Server(["--insecure", "--debug", "--tag-ttl", "0"]).start(tmp_path)
    xr, policy = setup(proxy.host)
    creds = {"username": USER_MARKER.encode(), "password": PASS_MARKER.encode()}
    reqs = []
    for i, fault in enumerate([None, "401", "500", "redirect", "corrupt", None]):
        x = claim(f"leak{i}")
        targets = x["spec"]["namespaces"]  # the claim's tenant space (team-a--podinfo)
        x["spec"] = {**copy.deepcopy(xr["spec"]), "namespaces": targets}
        reqs.append((fault, request(x, policy, credentials=creds)))
    answers: list[str] = []
    try:
        for fault, req in reqs:
            proxy.fault(fault)
            tally = asyncio.run(drive(server.address, [("registry", req)]))
            assert tally.codes == {"OK": 1}, tally.codes
        # also read every result message through the in-process runner with the same requests
        r = FunctionRunner(sources=SourceFactory(cache=Cache()))
        for fault, req in reqs:
            proxy.fault(fault)
            rsp = asyncio.run(r.RunFunction(req, None))
            answers += [m.message for m in rsp.results]
            answers.append(
                json.dumps(
                    json.loads(json.dumps({k: str(v) for k, v in rsp.desired.resources.items()}))
                )
            )
    finally:
        proxy.fault(None)
        server.stop()
    assert_clean(server.output(), "sack8s serve --debug log")
    assert_clean("\n".join(answers), "RunFunction results and desired state")
    assert any(r.headers.get("authorization") for r in proxy.requests)


def test_every_hostile_input_message_is_free_of_credentials() -> None:
    """The whole bad-input matrix, with marker credentials attached to every request."""
    import test_compose_bad_input as bad

    sdklogging.configure(sdklogging.Level.DISABLED)
    creds = [
        creds_secret("registry-creds", USER_MARKER, PASS_MARKER),
        dockercfg_secret("docker", "127.0.0.1:5000", DOCKER_MARKER),
    ]
    checked = 0
    for name, mutate, _expected in bad.CASES:
        xr, policy = bad.example()
        policy["registries"][0]["credentials"] = "registry-creds"
        mutate(xr, policy)
        out = asyncio.run(
            render(
                xr,
                policy,
                credentials=creds,
                runner=FunctionRunner(sources=SourceFactory(cache=Cache())),
            )
        )
        text = "\n".join(r.message for r in out.results) + out.yaml()
        assert_clean(text, f"case {name!r}")
        checked += 1
    assert checked >= 30


def test_rendered_output_holds_references_to_secrets_never_values() -> None:
    sdklogging.configure(sdklogging.Level.DISABLED)
    xr, policy = example()
    policy["registries"][0]["credentials"] = "registry-creds"
    creds = [creds_secret("registry-creds", USER_MARKER, PASS_MARKER)]
    from hypothesis_profiles import observed_helm

    out = asyncio.run(
        render(
            xr,
            policy,
            credentials=creds,
            observed=observed_helm(),
            runner=FunctionRunner(sources=SourceFactory(cache=Cache())),
        )
    )
    assert out.fatal is None, out.fatal.message
    text = out.yaml()
    assert_clean(text, "rendered output")
    kinds = {r["kind"] for r in out.resources}
    assert "Secret" not in kinds, (
        "the function never composes a Secret with data: ExternalSecrets only"
    )
    for r in out.resources:
        if r["kind"] == "ExternalSecret":
            assert "data" in r["spec"] or "dataFrom" in r["spec"]
            for d in r["spec"].get("data", []):
                assert set(d["remoteRef"]) <= {"key", "property", "version"}
