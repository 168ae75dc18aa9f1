"""Every invalid claim, input or component gives exactly one Fatal naming the field and the rule.

Each case mutates the bundled example (XR + policy) in one place and asserts the single
Fatal result's message. Nothing else may come back: no partial desired state (Crossplane
would delete what is left out), no exception out of RunFunction.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.edge.render import input_from_composition, load_docs, render

REPO = Path(__file__).resolve().parents[1]


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    xr = load_docs([REPO / "examples/xr.yaml"])[0]
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    return xr, policy


def run(xr: dict[str, Any], policy: dict[str, Any], **kw: Any):
    return asyncio.run(render(xr, policy, **kw))


def spec_set(path: str, value: Any) -> Callable[[dict, dict], None]:
    def apply(xr: dict, policy: dict) -> None:
        node: Any = xr["spec"]
        parts = path.split(".")
        for p in parts[:-1]:
            node = node[int(p)] if p.isdigit() else node[p]
        last = parts[-1]
        if value is DELETE:
            del node[last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return apply


def policy_set(key: str, value: Any) -> Callable[[dict, dict], None]:
    def apply(xr: dict, policy: dict) -> None:
        node: Any = policy
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value

    return apply


DELETE = object()
SECRET = {
    "name": "s",
    "storeRef": {"name": "platform-vault"},
    "data": [{"secretKey": "k", "remoteRef": {"key": "apps/podinfo/x"}}],
}

CASES: list[tuple[str, Callable[[dict, dict], None], list[str]]] = [
    ("missing component", spec_set("component", DELETE), ["spec.component", "Field required"]),
    (
        "component name invalid",
        spec_set("component.name", "Not A Name"),
        ["spec.component.name", "pattern"],
    ),
    ("empty version", spec_set("component.version", ""), ["spec.component.version"]),
    (
        "unknown spec field",
        spec_set("colour", "blue"),
        ["spec.colour", "Extra inputs are not permitted"],
    ),
    ("no namespaces", spec_set("namespaces", []), ["spec.namespaces", "at least 1"]),
    (
        "namespace not a DNS label",
        spec_set("namespaces.0.name", "Bad_NS"),
        ["spec.namespaces[0].name", "pattern"],
    ),
    (
        "bad namespace mode",
        spec_set("namespaces.0.mode", "steal"),
        ["spec.namespaces[0].mode", "create"],
    ),
    (
        "forbidden kube-system",
        spec_set("namespaces.0.name", "kube-system"),
        ["spec.namespaces[0].name", "forbidden", "kube-*"],
    ),
    (
        "forbidden default",
        spec_set("namespaces.0.name", "default"),
        ["spec.namespaces[0].name", "'default'"],
    ),
    (
        "forbidden flux-system",
        spec_set("namespaces.0.name", "flux-system"),
        ["flux-system", "forbidden"],
    ),
    (
        "forbidden crossplane-system",
        spec_set("namespaces.0.name", "crossplane-system"),
        ["crossplane-system", "forbidden"],
    ),
    (
        "namespace is the deploy namespace",
        spec_set("namespaces.0.name", "sack8s-podinfo"),
        ["deploy namespace"],
    ),
    (
        "duplicate namespace",
        spec_set("namespaces", [{"name": "podinfo--a"}, {"name": "podinfo--a"}]),
        ["spec.namespaces[1].name", "twice"],
    ),
    (
        "adopt not allowed",
        spec_set("namespaces.0.mode", "adopt"),
        ["spec.namespaces[0].mode", "allowAdopt"],
    ),
    (
        "policy allowPattern refuses",
        policy_set("namespaces.allowPattern", "^team-.*$"),
        ["spec.namespaces[0].name", "allowed pattern"],
    ),
    (
        "registry not allowed",
        spec_set("component.repository", "oci::https://evil.example.com/x"),
        ["spec.component.repository", "evil.example.com", "allowlist"],
    ),
    (
        "link-local registry",
        spec_set("component.repository", "oci::http://169.254.169.254/x"),
        ["169.254.169.254", "allowlist"],
    ),
    (
        "plain http not allowed",
        policy_set("registries", [{"host": "127.0.0.1:5000"}]),
        ["plain HTTP", "127.0.0.1:5000"],
    ),
    (
        "local path as repository",
        spec_set("component.repository", "ctf::/etc/ctf"),
        ["spec.component.repository", "OCI registry"],
    ),
    (
        "store not allowed",
        spec_set("secrets", [{**SECRET, "storeRef": {"name": "other"}}]),
        ["spec.secrets[0].storeRef", "'other'", "not in the policy"],
    ),
    (
        "store kind mismatch",
        spec_set(
            "secrets", [{**SECRET, "storeRef": {"name": "platform-vault", "kind": "SecretStore"}}]
        ),
        ["spec.secrets[0].storeRef", "SecretStore"],
    ),
    (
        "remote key outside prefix",
        spec_set(
            "secrets",
            [{**SECRET, "data": [{"secretKey": "k", "remoteRef": {"key": "apps/other-team/db"}}]}],
        ),
        ["spec.secrets[0].data[0].remoteRef.key", "outside the prefixes"],
    ),
    (
        "remote key traversal",
        spec_set(
            "secrets",
            [
                {
                    **SECRET,
                    "data": [{"secretKey": "k", "remoteRef": {"key": "apps/podinfo/../other/db"}}],
                }
            ],
        ),
        ["spec.secrets[0].data[0].remoteRef.key", "'..'"],
    ),
    (
        "duplicate secretKey",
        spec_set(
            "secrets",
            [
                {
                    **SECRET,
                    "data": [
                        SECRET["data"][0],
                        {"secretKey": "k", "remoteRef": {"key": "apps/podinfo/y"}},
                    ],
                }
            ],
        ),
        ["spec.secrets[0].data[1].secretKey", "'k'", "spec.secrets[0].data[0]"],
    ),
    (
        "secret in foreign namespace",
        spec_set("secrets", [{**SECRET, "namespace": "elsewhere"}]),
        ["spec.secrets[0].namespace", "not one of the claim's target namespaces"],
    ),
    (
        "secret without data",
        spec_set("secrets", [{"name": "s", "storeRef": {"name": "platform-vault"}}]),
        ["spec.secrets[0]", "at least one data"],
    ),
    (
        "literal secret value field",
        spec_set("secrets", [{**SECRET, "value": "hunter2"}]),
        ["spec.secrets[0].value", "Extra inputs"],
    ),
    (
        "pull credential key outside prefix",
        spec_set("credentials.pull.remoteRef.key", "apps/x/pull"),
        ["spec.credentials.pull.remoteRef.key", "outside"],
    ),
    (
        "rbac wildcard verb",
        spec_set(
            "rbac", {"extraRules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]}
        ),
        ["spec.rbac.extraRules[0]", "never granted"],
    ),
    (
        "rbac escalate",
        spec_set(
            "rbac",
            {
                "extraRules": [
                    {
                        "apiGroups": ["rbac.authorization.k8s.io"],
                        "resources": ["roles"],
                        "verbs": ["escalate"],
                    }
                ]
            },
        ),
        ["spec.rbac.extraRules[0]", "never granted"],
    ),
    (
        "rbac namespaces",
        spec_set(
            "rbac",
            {"extraRules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}]},
        ),
        ["spec.rbac.extraRules[0]", "namespaces"],
    ),
    (
        "rbac token",
        spec_set(
            "rbac",
            {
                "extraRules": [
                    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}
                ]
            },
        ),
        ["serviceaccounts/token"],
    ),
    (
        "rbac not covered",
        spec_set(
            "rbac",
            {
                "extraRules": [
                    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]}
                ]
            },
        ),
        ["spec.rbac.extraRules[0]", "allowedExtraRules"],
    ),
    (
        "unknown resource",
        spec_set("deploy.resource.name", "nope"),
        ["spec.deploy.resource", "no resource with identity", "nope"],
    ),
    (
        "flavour mismatch",
        spec_set("deploy.flavour", "kustomize"),
        ["spec.deploy.flavour", "does not fit"],
    ),
    (
        "plain tar kustomize",
        spec_set("deploy.resource.name", "manifests"),
        ["manifests", "compress: true"],
    ),
    (
        "no version matches",
        spec_set("component.version", ">=9.0.0"),
        ["spec.component.version", "9.0.0"],
    ),
    ("exact version missing", spec_set("component.version", "1.0.0"), ["1.0.0"]),
    (
        "values violate schema",
        spec_set("values", {"inline": {"replicas": "three"}}),
        ["replicas", "integer"],
    ),
    ("values unknown key", spec_set("values", {"inline": {"colour": "red"}}), ["colour"]),
    (
        "values both inline and configmap",
        spec_set("values", {"inline": {}, "configMapRef": {"name": "v"}}),
        ["spec.values", "either inline or configMapRef"],
    ),
    (
        "values configmap missing",
        spec_set("values", {"configMapRef": {"name": "absent"}}),
        ["spec.values.configMapRef", "not found"],
    ),
    (
        "configdata resource wrong",
        spec_set("configData", {"name": "chart"}),
        ["configData", "chart"],
    ),
    ("policy unknown field", policy_set("colour", "red"), ["input.colour", "Extra inputs"]),
    (
        "policy bad regex",
        policy_set("namespaces.allowPattern", "(["),
        ["namespaces.allowPattern", "regular expression"],
    ),
    (
        "policy wildcard deployer rule",
        policy_set(
            "rbac",
            {"deployerRules": [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]},
        ),
        ["rbac.deployerRules[0]", "'*'"],
    ),
    (
        "policy interval not a duration",
        policy_set("flux.interval", "ten minutes"),
        ["flux.interval", "not a duration"],
    ),
    ("policy zero timeout", policy_set("flux.timeout", "0s"), ["flux.timeout", "positive"]),
    (
        "policy ocm interval below a millisecond",
        policy_set("ocm.interval", "500us"),
        ["ocm.interval", "millisecond"],
    ),
    (
        "policy deploy pattern placeholder",
        policy_set("deployNamespace", {"pattern": "x-{team}"}),
        ["deployNamespace.pattern", "{claim}"],
    ),
]


@pytest.mark.parametrize("name,mutate,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_fatal_naming_the_field(name: str, mutate, expected: list[str]) -> None:
    xr, policy = example()
    mutate(xr, policy)
    out = run(xr, policy)
    fatals = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert len(fatals) == 1, [r.message for r in out.results]
    msg = fatals[0].message
    for part in expected:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert fatals[0].reason and fatals[0].target == fnv1.TARGET_COMPOSITE_AND_CLAIM
    # Never a partial desired state: a Fatal returns exactly the desired state it was given (empty here).
    assert out.resources == []


def test_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30


def test_fatal_on_second_reconcile_keeps_desired_untouched() -> None:
    """A Fatal returns the desired state it received, so Crossplane changes nothing live."""
    from crossplane.function import resource

    from function.edge.fn import FunctionRunner

    xr, policy = example()
    xr["spec"]["namespaces"][0]["name"] = "kube-system"
    req = fnv1.RunFunctionRequest()
    resource.update(req.observed.composite, xr)
    req.input.update(policy)
    resource.update(
        req.desired.resources["from-earlier-step"],
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
    )
    rsp = asyncio.run(FunctionRunner().RunFunction(req, None))
    assert [r.severity for r in rsp.results] == [fnv1.SEVERITY_FATAL]
    assert list(rsp.desired.resources) == ["from-earlier-step"]


def test_unexpected_exception_never_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    from function.compose import core

    def boom(_):
        raise RuntimeError("secret-token-abc")

    monkeypatch.setattr(core, "compose", boom)
    xr, policy = example()
    out = run(xr, policy)
    (fatal,) = [r for r in out.results if r.severity == fnv1.SEVERITY_FATAL]
    assert fatal.reason == "InternalError"
    assert "secret-token-abc" not in fatal.message
    assert out.resources == []
