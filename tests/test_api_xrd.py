"""The committed XRDs and input CRD match the models, and every schema is structural."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from function.api.xrd import crossplane_cluster_role, input_crd, xrd_cluster, xrd_legacy_claims
from function.cli import main
from function.edge.render import dump_yaml, load_docs

REPO = Path(__file__).resolve().parents[1]

COMMITTED = {
    "package/xrd.yaml": xrd_cluster,
    "examples/xrd.yaml": xrd_cluster,
    "package/xrd-claims.yaml": xrd_legacy_claims,
    "examples/xrd-claims.yaml": xrd_legacy_claims,
    "package/input/sack8s.fn.crossplane.io_policies.yaml": input_crd,
    "package/crossplane-rbac.yaml": crossplane_cluster_role,
}


def test_example_crossplane_role_matches_the_example_policy() -> None:
    from function.edge.fn import parse_policy

    policy = parse_policy(load_docs([REPO / "examples/policy.yaml"])[0])
    assert (REPO / "examples/crossplane-rbac.yaml").read_text() == dump_yaml(
        [crossplane_cluster_role(policy)]
    )


def test_compositions_carry_the_example_policy() -> None:
    from function.edge.render import input_from_composition

    policy = load_docs([REPO / "examples/policy.yaml"])[0]
    for f in ("examples/composition.yaml", "examples/composition-claim.yaml"):
        assert input_from_composition(load_docs([REPO / f])[0], f) == policy, f


@pytest.mark.parametrize("path", sorted(COMMITTED))
def test_committed_copy_has_not_drifted(path: str) -> None:
    expected = dump_yaml([COMMITTED[path]()])
    actual = (REPO / path).read_text()
    assert actual == expected, (
        f"{path} drifted from the models: regenerate it with `sack8s xrd` (see README)"
    )


def test_cli_prints_the_same_documents() -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["xrd", "--group", "apps.acme.org"])
    assert out.exit_code == 0, out.output
    (doc,) = load_docs_from_text(out.output)
    assert doc["spec"]["group"] == "apps.acme.org"
    assert doc["metadata"]["name"] == "sack8scomponentversions.apps.acme.org"
    assert doc["spec"]["scope"] == "Cluster"
    claims = load_docs_from_text(runner.invoke(main, ["xrd", "--variant", "claims"]).output)[0]
    assert claims["spec"]["scope"] == "LegacyCluster"
    assert claims["spec"]["claimNames"]["kind"] == "SACK8sComponentVersion"


def load_docs_from_text(text: str) -> list[dict[str, Any]]:
    from function.yamlio import load_all

    return load_all(text, "cli output")


def walk(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for k, v in node.get("properties", {}).items():
            yield from walk(v, f"{path}.{k}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}{{}}")


SCHEMAS = {
    "xrd": lambda: xrd_cluster()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    "xrd-claims": lambda: xrd_legacy_claims()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    "input": lambda: input_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
}

# Where a free-form value is part of the API on purpose.
FREE_FORM = {".spec.values.inline", ".metadata"}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_is_structural(name: str) -> None:
    schema = SCHEMAS[name]()
    text = repr(schema)
    assert (
        "$ref" not in text
        and "$defs" not in text
        and "anyOf" not in text
        and "oneOf" not in text
        and "allOf" not in text
    )
    for path, node in walk(schema):
        assert "type" in node, f"{name}{path}: untyped node"
        assert node.get("additionalProperties") is not False, (
            f"{name}{path}: additionalProperties false"
        )
        assert not ("properties" in node and "additionalProperties" in node), (
            f"{name}{path}: both properties and additionalProperties"
        )
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert path in FREE_FORM, (
                f"{name}{path}: preserve-unknown-fields outside a free-form value"
            )
            assert "properties" not in node


def test_spec_covers_the_api() -> None:
    spec = SCHEMAS["xrd"]()["properties"]["spec"]["properties"]
    assert set(spec) >= {
        "component",
        "deploy",
        "configData",
        "namespaces",
        "values",
        "secrets",
        "credentials",
        "rbac",
    }
    assert spec["namespaces"]["items"]["properties"]["mode"]["enum"] == [
        "create",
        "adopt",
        "existing",
    ]
    assert spec["component"]["properties"]["repository"]["type"] == "string"
    status = SCHEMAS["xrd"]()["properties"]["status"]["properties"]
    assert set(status) >= {"component", "images", "blockedBy", "configData"}
    # No field takes a literal secret value.
    secret = spec["secrets"]["items"]["properties"]
    assert "value" not in secret and "stringData" not in secret


def test_examples_parse_against_models() -> None:
    from function.edge.fn import parse_policy, parse_spec
    from function.edge.render import claim_to_xr, input_from_composition

    for f in ("examples/xr.yaml", "examples/xr-kustomize.yaml", "examples/claim.yaml"):
        parse_spec(claim_to_xr(load_docs([REPO / f])[0]))
    for f in ("examples/composition.yaml", "examples/composition-claim.yaml"):
        parse_policy(input_from_composition(load_docs([REPO / f])[0], f))
    parse_policy(load_docs([REPO / "examples/policy.yaml"])[0])
