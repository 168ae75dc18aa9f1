"""mutation_for: the seam the composition core calls, for both Flux flavours."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from function.configdata.fluxmutation import FluxMutation, Trace, mutation_for
from function.errors import InvalidConfigData, UnsupportedRule
from function.ocm.descriptor import parse_descriptor
from function.ocm.images import image_table
from function.ocm.model import ComponentVersion, Descriptor, Repository, Resource

DATA = Path(__file__).parent / "data" / "configdata"
D = "sha256:" + "11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"
HDR = "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n"


def fixture_cv(fixtures_dir: Path, name: str, repo: Repository | None) -> ComponentVersion:
    d = parse_descriptor((fixtures_dir / "descriptors" / name).read_bytes(), None, name)
    return ComponentVersion(d, repo, "sha256:" + "0" * 64)


def tiny_cv(ref: str = f"r.io:5000/team/app:1@{D}") -> ComponentVersion:
    img = Resource(
        "image",
        "1",
        "ociImage",
        "external",
        {"type": "ociArtifact", "imageReference": ref},
        MappingProxyType({}),
    )
    return ComponentVersion(
        Descriptor("acme.org/app", "1", "acme", (img,)),
        Repository("r.io:5000"),
        "sha256:" + "0" * 64,
    )


@pytest.fixture
def kustomize_files(fixtures_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (fixtures_dir / "inputs/kustomize").iterdir()}


@pytest.fixture
def config(fixtures_dir: Path) -> bytes:
    return (fixtures_dir / "inputs/config/config.yaml").read_bytes()


def test_fixture_kustomize_by_reference(fixtures_dir, kustomize_files, config):
    cv = fixture_cv(
        fixtures_dir, "by-ref-6.2.0.json", Repository("127.0.0.1:5000", "source", plain_http=True)
    )
    m = mutation_for(
        "kustomize",
        config,
        cv,
        kustomize_files,
        {"replicas": 3},
        configdata_name="config",
        images=image_table(cv),
    )
    image = f"127.0.0.1:5000/upstream/podinfo@{D}"
    assert [json.loads(p["patch"]) for p in m.kustomize_patches] == [
        [{"op": "add", "path": "/spec/template/spec/containers/0/image", "value": image}],
        [{"op": "add", "path": "/spec/replicas", "value": 3}],
        [{"op": "add", "path": "/data/PODINFO_UI_MESSAGE", "value": "Hello, world!"}],
    ]
    assert [p["target"] for p in m.kustomize_patches] == [
        {"group": "apps", "version": "v1", "kind": "Deployment", "name": "podinfo"},
        {"group": "apps", "version": "v1", "kind": "Deployment", "name": "podinfo"},
        {"version": "v1", "kind": "ConfigMap", "name": "podinfo-config"},
    ]
    assert m.trace[0] == Trace(
        "localization[0]",
        "deployment.yaml",
        0,
        "spec.template.spec.containers[0].image",
        image,
        "ghcr.io/stefanprodan/podinfo:6.2.0",
    )
    assert m.trace[1] == Trace(
        "configuration.rules[0]", "deployment.yaml", 0, "spec.replicas", 3, 1
    )
    assert m.helm_values == {}
    assert m.warnings == ()  # the values.yaml tag warning belongs to a rule that is skipped here
    assert (
        m.image_pair_defects == ()
    )  # and so does its repository defect: it cannot fail this deployable
    assert m.skipped == (
        "ConfigData localization[1].repository: file values.yaml is not in the Kustomize directory",
        "ConfigData localization[1].tag: file values.yaml is not in the Kustomize directory",
    )


def test_fixture_helm_local_blob(fixtures_dir, config):
    cv = fixture_cv(
        fixtures_dir, "copied-default-6.2.0.json", Repository("127.0.0.1:5000", "target")
    )
    chart = fixtures_dir / "inputs/chart/podinfo"
    files = {
        p.relative_to(chart).as_posix(): p.read_bytes() for p in chart.rglob("*") if p.is_file()
    }
    m = mutation_for("helm", config, cv, files, None, images=image_table(cv))
    assert m.helm_values == {
        "image": {
            "repository": "target/component-descriptors/acme.org/sack8s/podinfo",
            "tag": f"6.2.0@{D}",
        }
    }
    assert [t.rule for t in m.trace] == ["localization[1]", "localization[1]"]
    assert m.trace[1].old == "6.2.0"
    # repository without the registry: a defect for the core's policy, not a warning
    (defect,) = m.image_pair_defects
    assert (defect.rule, defect.field, defect.path) == (
        "localization[1]",
        "repository",
        "image.repository",
    )
    assert "fullyQualifiedRepository" in defect.message and m.warnings == ()
    assert "ConfigData localization[0].image: file deployment.yaml is not in the chart" in m.skipped
    assert m.kustomize_patches == ()


def test_helm_values_rule_with_a_list_carries_the_whole_list():
    cd = HDR + (
        "configuration:\n  rules:\n  - {value: 8080, file: values.yaml, path: 'ports[1].port'}\n"
        "  - {value: 2, file: values.yaml, path: replicaCount}\n"
        "  - {value: x, file: values.yaml, path: 'podAnnotations[\"a.b/c\"]'}\n"
    )
    values = b"replicaCount: 1\nports:\n  - {name: http, port: 80}\n  - {name: admin, port: 81}\n"
    m = mutation_for(
        "helm", cd.encode(), tiny_cv(), {"values.yaml": values}, {}, images=image_table(tiny_cv())
    )
    assert m.helm_values == {
        "ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 8080}],
        "replicaCount": 2,
        "podAnnotations": {"a.b/c": "x"},
    }


def test_helm_rule_on_a_template_is_an_error():
    cd = (
        HDR
        + "configuration:\n  rules:\n  - {value: 2, file: templates/deployment.yaml, path: spec.replicas}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        mutation_for(
            "helm",
            cd.encode(),
            tiny_cv(),
            {"templates/deployment.yaml": b"spec: {}\n"},
            {},
            images=image_table(tiny_cv()),
        )
    assert "target values.yaml" in str(e.value) and "configuration.rules[0]" in str(e.value)


HELM_RELEASE = b"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
spec:
  chart:
    spec:
      version: 6.0.0
  values:
    replicaCount: 1
"""


def test_helm_release_file_values_map_onto_ours():
    cd = HDR + (
        "configuration:\n  defaults: {replicas: 1}\n  rules:\n"
        "  - {value: (( replicas )), file: helm_release.yaml, path: spec.values.replicaCount}\n"
        "localization:\n- {file: helm_release.yaml, image: spec.values.image.ref, resource: {name: image}}\n"
    )
    m = mutation_for(
        "helm",
        cd.encode(),
        tiny_cv(),
        {"helm_release.yaml": HELM_RELEASE, "values.yaml": b"{}\n"},
        {"replicas": 4},
        images=image_table(tiny_cv()),
    )
    assert m.helm_values == {"image": {"ref": f"r.io:5000/team/app@{D}"}, "replicaCount": 4}
    assert m.trace[1].old == 1


def test_helm_release_other_paths_are_an_error():
    cd = (
        HDR
        + "localization:\n- {file: helm_release.yaml, tag: spec.chart.spec.version, resource: {name: image}}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        mutation_for(
            "helm",
            cd.encode(),
            tiny_cv(),
            {"helm_release.yaml": HELM_RELEASE},
            None,
            images=image_table(tiny_cv()),
        )
    assert "only spec.values.* maps onto the composed HelmRelease" in str(e.value)
    assert "localization[0].tag (file helm_release.yaml)" in str(e.value)


def test_upstream_canonical_helm_example_is_refused_for_its_cue_rule():
    cd = HDR + (
        "localization:\n- {file: helm_release.yaml, tag: spec.chart.spec.version, resource: {name: chart}}\n"
        "- file: helm_repository.yaml\n  mapping: {path: spec.url, transform: 'out: 1'}\n"
    )
    chart = Resource(
        "chart",
        "1",
        "helmChart",
        "local",
        {"type": "ociArtifact", "imageReference": f"r.io/c:1@{D}"},
    )
    cv = ComponentVersion(Descriptor("a.org/x", "1", "a", (chart,)), None, "sha256:" + "0" * 64)
    with pytest.raises(UnsupportedRule) as e:
        mutation_for("helm", cd.encode(), cv, {}, None, images=image_table(cv))
    assert "localization[1]" in str(e.value) and "CUE" in str(e.value)


def test_cue_example_from_upstream_is_refused():
    verbatim = (
        DATA / "cue" / "config.yaml"
    ).read_bytes()  # upstream's file has no apiVersion: accepted
    files = {"deployment.yaml": (DATA / "cue" / "deployment.yaml").read_bytes()}
    for cd in (verbatim, b"apiVersion: config.ocm.software/v1alpha1\n" + verbatim):
        with pytest.raises(UnsupportedRule) as e:
            mutation_for("kustomize", cd, tiny_cv(), files, None, images=image_table(tiny_cv()))
        assert (
            "ConfigData localization[0] (file deployment.yaml): CUE 'mapping' rules are not supported"
            in str(e.value)
        )


def test_no_rule_applies_is_a_warning(kustomize_files, config):
    m = mutation_for(
        "kustomize",
        config,
        tiny_cv(),
        {"other.yaml": b"a: 1\n"},
        None,
        images=image_table(tiny_cv()),
    )
    assert m.trace == () and len(m.skipped) == 5
    assert len(m.warnings) == 1 and "none of its 5 substitutions addresses a file" in m.warnings[0]


KRM = b"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: team-a
spec:
  template:
    metadata:
      annotations: {}
    spec:
      containers:
        - name: app
          image: ghcr.io/a/app:1
          args: ["--a", "--b"]
"""


def kz(rules: str, files: dict[str, bytes]) -> FluxMutation:
    return mutation_for(
        "kustomize",
        (HDR + "configuration:\n  rules:\n" + rules).encode(),
        tiny_cv(),
        files,
        {},
        images=image_table(tiny_cv()),
    )


def test_kustomize_ops_escaping_creation_and_lists():
    m = kz(
        "  - {value: x, file: d.yaml, path: 'spec.template.metadata.annotations[\"a.b/c~d\"]'}\n"
        "  - {value: '--c', file: d.yaml, path: 'spec.template.spec.containers[0].args[1]'}\n"
        "  - {value: 5, file: d.yaml, path: spec.strategy.rollingUpdate.maxSurge}\n",
        {"d.yaml": KRM},
    )
    ops = [json.loads(p["patch"])[0] for p in m.kustomize_patches]
    assert ops == [
        {"op": "add", "path": "/spec/template/metadata/annotations/a.b~1c~0d", "value": "x"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/args/1", "value": "--c"},
        {"op": "add", "path": "/spec/strategy", "value": {"rollingUpdate": {"maxSurge": 5}}},
    ]
    assert m.kustomize_patches[0]["target"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
        "name": "app",
        "namespace": "team-a",
    }


def test_kustomize_namespace_transformer_is_fine():
    m = kz(
        "  - {value: 2, file: d.yaml, path: spec.replicas}\n",
        {"d.yaml": KRM, "kustomization.yaml": b"namespace: other\nresources: [d.yaml]\n"},
    )
    assert len(m.kustomize_patches) == 1


def test_kustomize_non_krm_file_is_an_error():
    with pytest.raises(InvalidConfigData) as e:
        kz("  - {value: 2, file: settings.yaml, path: a}\n", {"settings.yaml": b"a: 1\n"})
    assert "is not a Kubernetes object" in str(e.value) and "settings.yaml" in str(e.value)


def test_kustomize_kustomization_file_is_an_error():
    with pytest.raises(InvalidConfigData) as e:
        kz(
            "  - {value: x, file: kustomization.yaml, path: namespace}\n",
            {
                "kustomization.yaml": b"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            },
        )
    assert "is a kustomization file" in str(e.value)


@pytest.mark.parametrize("key", ["namePrefix", "nameSuffix"])
def test_kustomize_rename_is_an_error(key):
    with pytest.raises(InvalidConfigData) as e:
        kz(
            "  - {value: 2, file: base/d.yaml, path: spec.replicas}\n",
            {"base/d.yaml": KRM, "base/kustomization.yaml": f"{key}: x-\n".encode()},
        )
    assert f"base/kustomization.yaml sets {key}" in str(e.value) and "Deployment/app" in str(
        e.value
    )


def test_kustomize_images_rewrite_is_an_error():
    files = {
        "d.yaml": KRM,
        "kustomization.yaml": b"images:\n- name: ghcr.io/a/app\n  newTag: '2'\n",
    }
    cd = (
        HDR
        + "localization:\n- {file: d.yaml, image: 'spec.template.spec.containers[0].image', resource: {name: image}}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        mutation_for(
            "kustomize", cd.encode(), tiny_cv(), files, None, images=image_table(tiny_cv())
        )
    assert "images: entry for 'ghcr.io/a/app'" in str(
        e.value
    ) and "remove that images: entry" in str(e.value)


def test_unknown_flavour():
    c = tiny_cv()
    with pytest.raises(ValueError):
        mutation_for("argo", HDR.encode(), c, {}, None, images=image_table(c))  # type: ignore[arg-type]


def test_backend_example_as_kustomize_tar():
    files = {f"manifests/{p.name}": p.read_bytes() for p in (DATA / "backend/manifests").iterdir()}
    m = mutation_for(
        "kustomize",
        (DATA / "backend/config.yaml").read_bytes(),
        tiny_cv(),
        files,
        {"message": "This is a test message Pipeline Backend"},
        images=image_table(tiny_cv()),
    )
    assert [(t.rule, t.file, t.path) for t in m.trace] == [
        ("localization[0]", "manifests/deploy.yaml", "spec.template.spec.containers[0].image"),
        ("configuration.rules[0]", "manifests/deploy.yaml", "spec.replicas"),
        ("configuration.rules[1]", "manifests/configmap.yaml", "data.PODINFO_CACHE_SERVER"),
        ("configuration.rules[2]", "manifests/configmap.yaml", "data.PODINFO_UI_MESSAGE"),
    ]
    assert (
        m.trace[3].value == "This is a test message Pipeline Backend"
        and m.trace[3].old == "placeholder"
    )


def test_errors_name_the_configdata_resource():
    cd = HDR + "configuration:\n  rules:\n  - {value: (( nope )), file: values.yaml, path: a}\n"
    with pytest.raises(InvalidConfigData) as e:
        mutation_for(
            "helm",
            cd.encode(),
            tiny_cv(),
            {"values.yaml": b"a: 1\n"},
            {},
            configdata_name="ConfigData resource config of acme.org/app:1",
            images=image_table(tiny_cv()),
        )
    assert str(e.value).startswith(
        "ConfigData resource config of acme.org/app:1 configuration.rules[0].value"
    )


def test_empty_chart_values_file():
    cd = HDR + "configuration:\n  rules:\n  - {value: 2, file: values.yaml, path: replicaCount}\n"
    m = mutation_for(
        "helm", cd.encode(), tiny_cv(), {"values.yaml": b""}, {}, images=image_table(tiny_cv())
    )
    assert m.helm_values == {"replicaCount": 2}


def test_unreadable_target_file_names_the_rule():
    cd = HDR + "configuration:\n  rules:\n  - {value: 2, file: values.yaml, path: replicaCount}\n"
    with pytest.raises(Exception) as e:
        mutation_for(
            "helm",
            cd.encode(),
            tiny_cv(),
            {"values.yaml": b"a: [\n"},
            {},
            images=image_table(tiny_cv()),
        )
    assert str(e.value).startswith(
        "ConfigData configuration.rules[0].path (file values.yaml): is not valid YAML"
    )


def test_engine_findings_become_the_mutations_warnings_naming_the_resource():
    # no apiVersion/kind (accepted, as upstream), an unused broken default, a rule's own field,
    # a schema violation downgraded by the policy switch
    cd = (
        "configuration:\n  defaults: {unused: (( nothere ))}\n"
        "  schema: {type: object, properties: {replicas: {type: integer}}}\n  rules:\n"
        "  - {value: (( replicas )), file: values.yaml, path: replicaCount}\n"
        "  - {value: (( name )), file: values.yaml, path: nameOverride}\n"
        "  - {value: (( name )), file: other.yaml, path: x}\n"
    )
    name = "ConfigData (resource config)"
    m = mutation_for(
        "helm",
        cd.encode(),
        tiny_cv(),
        {"values.yaml": b"replicaCount: 1\n"},
        {"replicas": "two"},
        configdata_name=name,
        schema_violations="Warning",
        images=image_table(tiny_cv()),
    )
    assert m.helm_values == {"replicaCount": "two", "nameOverride": "subst-1"}
    assert [w.split(":", 1)[0] for w in m.warnings] == [
        f"{name}",
        f"{name} configuration.defaults.unused",
        f"{name} configuration.schema",
        f"{name} configuration.rules[1].value (file values.yaml)",
    ]  # rules[2] addresses a file outside the chart: its own-field warning does not apply here
    assert "apiVersion and kind are missing" in m.warnings[0]
    assert "no rule uses this value" in m.warnings[1]
    assert "values.replicas: 'two' is not of type 'integer'" in m.warnings[2]
    assert "resolves to this rule's own field name ('subst-1')" in m.warnings[3]
    with pytest.raises(Exception) as e:  # the default: schema violations are Fatal
        mutation_for(
            "helm",
            cd.encode(),
            tiny_cv(),
            {"values.yaml": b"replicaCount: 1\n"},
            {"replicas": "two"},
            configdata_name=name,
            images=image_table(tiny_cv()),
        )
    assert str(e.value).startswith(
        f"{name} configuration.schema: values.replicas: 'two' is not of type 'integer'"
    )


def test_a_carried_list_keeps_what_helm_reads_in_values_yaml():
    # Helm reads values.yaml with sigs.k8s.io/yaml (YAML 1.1): the chart's own plain `no` is false
    # and 0777 is 511; the list the HelmRelease carries must not turn them into "no" and 777
    cd = HDR + "configuration:\n  rules:\n  - {value: xx, file: values.yaml, path: 'codes[0]'}\n"
    m = mutation_for(
        "helm",
        cd.encode(),
        tiny_cv(),
        {"values.yaml": b"codes: [de, no, 'no', 0777, y, ok]\n"},
        {},
        images=image_table(tiny_cv()),
    )
    assert m.helm_values == {"codes": ["xx", False, "no", 511, True, "ok"]}
