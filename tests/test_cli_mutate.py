"""sack8s localize / configure / mutate: the contract service teams script against."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import need

from function.cli import main

DATA = Path(__file__).parent / "data" / "configdata"
BACKEND = DATA / "backend"
FRONTEND = DATA / "frontend"
RELOCATED = (
    "registry.acme.internal:5000/mirror/stefanprodan/podinfo@sha256:"
    "4d6b3d1f0e2b3f4a5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3"
)
SACK8S = Path(sys.executable).with_name("sack8s")
if not SACK8S.exists():  # pragma: no cover - pytest run from another interpreter
    SACK8S = Path(shutil.which("sack8s") or SACK8S)


def run(*args: str, stdin: str | None = None):
    # click >= 8.2 keeps stderr apart from stdout by default
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


def with_config_data(cd: Path | str, root: Path | str, *args: str, stdin: str | None = None):
    """``sack8s COMMAND --config-data CD --root ROOT ARGS...`` (``args[0]`` is the command)."""
    return run(*args[:1], "--config-data", str(cd), "--root", str(root), *args[1:], stdin=stdin)


def backend(*args: str, stdin: str | None = None):
    return with_config_data(BACKEND / "config.yaml", BACKEND, *args, stdin=stdin)


def edited_backend(tmp_path: Path, old: str, new: str, *args: str, count: int = -1):
    """:func:`backend` with the backend's ConfigData edited (``old`` replaced by ``new``)."""
    cd = tmp_path / "cd.yaml"
    cd.write_text((BACKEND / "config.yaml").read_text().replace(old, new, count))
    return with_config_data(cd, BACKEND, *args)


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sack8s: error: ")
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_acceptance_backend_mutate_verbose():
    r = backend(
        "mutate",
        "-v",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0, r.stderr
    source = (BACKEND / "manifests/deploy.yaml").read_text()
    expected = source.replace(
        'image: "ghcr.io/stefanprodan/podinfo:6.2.0"', f'image: "{RELOCATED}"'
    )
    assert (
        r.stdout == expected
    )  # comments, order, quoting intact; only the image changed (replicas stays 1)
    assert "# upstream image; the component ships its own copy" in r.stdout
    log = r.stderr
    assert (
        "localization[0].image: manifests/deploy.yaml document 0 (Deployment/backend) "
        "spec.template.spec.containers[0].image: 'ghcr.io/stefanprodan/podinfo:6.2.0' -> "
        f"'{RELOCATED}'"
    ) in log
    assert (
        "configuration.rules[0]: manifests/deploy.yaml document 0 (Deployment/backend) "
        "spec.replicas: 1 -> 1"
    ) in log
    assert (
        "not applicable: ConfigData configuration.rules[1] addresses file manifests/configmap.yaml"
        in log
    )
    assert (
        "not applicable: ConfigData configuration.rules[2] addresses file manifests/configmap.yaml"
        in log
    )


def test_quiet_run_logs_nothing():
    r = backend(
        "mutate",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0 and r.stderr == ""


def test_configure_configmap_with_user_message():
    r = backend("configure", "--values", str(BACKEND / "values.yaml"), "manifests/configmap.yaml")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: backend-config\ndata:\n"
        "  # filled in from the ConfigData defaults and the user's values\n"
        '  PODINFO_UI_COLOR: "#34577c"\n'
        "  PODINFO_UI_MESSAGE: 'This is a test message Pipeline Backend'\n"
        "  PODINFO_CACHE_SERVER: tcp://redis:6379\n"
    )


def test_values_from_configmap_single_key_and_key_option():
    for extra in ([], ["--key", "values.yaml"]):
        r = backend(
            "configure",
            "--values",
            str(BACKEND / "values-configmap.yaml"),
            *extra,
            "manifests/deploy.yaml",
        )
        assert r.exit_code == 0, r.stderr
        assert "  replicas: 2 # set by configuration.rules[0]\n" in r.stdout


def test_configmap_with_several_keys_needs_key(tmp_path):
    cm = tmp_path / "cm.yaml"
    cm.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: v}\ndata:\n  a: 'replicas: 2'\n  b: 'replicas: 3'\n"
    )
    assert_one_line_error(
        backend("configure", "--values", str(cm), "manifests/deploy.yaml"),
        "several data keys (a, b): pick one with --key",
    )
    r = backend("configure", "--values", str(cm), "--key", "b", "manifests/deploy.yaml")
    assert "replicas: 3" in r.stdout
    assert_one_line_error(
        backend("configure", "--values", str(cm), "--key", "c", "manifests/deploy.yaml"),
        "no data key 'c' (it has: a, b)",
    )


def test_key_on_plain_values_is_an_error():
    assert_one_line_error(
        backend(
            "configure",
            "--values",
            str(BACKEND / "values.yaml"),
            "--key",
            "x",
            "manifests/deploy.yaml",
        ),
        "not a ConfigMap",
    )


def test_localize_only_leaves_configuration_alone():
    r = backend(
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "manifests/configmap.yaml",
    )
    assert r.exit_code == 0
    assert r.stdout == (BACKEND / "manifests/configmap.yaml").read_text()
    assert (
        "warning: no localization rule of the ConfigData addresses manifests/configmap.yaml"
        in r.stderr
    )


def test_stdin_with_as():
    text = (BACKEND / "manifests/deploy.yaml").read_text()
    r = backend(
        "configure",
        "--values",
        str(BACKEND / "values-configmap.yaml"),
        "--as",
        "manifests/deploy.yaml",
        "-",
        stdin=text,
    )
    assert r.exit_code == 0 and "replicas: 2 # set by" in r.stdout


def test_stdin_without_as_is_a_usage_error():
    r = backend("configure", "--values", str(BACKEND / "values.yaml"), "-", stdin="a: 1\n")
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and "--as PATH" in r.stderr and "Traceback" not in r.stderr


def test_frontend_multi_document_file(tmp_path):
    r = run(
        "mutate",
        "-v",
        "--config-data",
        str(FRONTEND / "config.yaml"),
        "--root",
        str(FRONTEND),
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "--values",
        str(BACKEND / "values-configmap.yaml"),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0, r.stderr
    source = (FRONTEND / "manifests/deploy.yaml").read_text()
    expected = source.replace("replicas: 1 # overwritten", "replicas: 2 # overwritten").replace(
        "image: ghcr.io/stefanprodan/podinfo:6.2.0", f"image: {RELOCATED}"
    )
    assert r.stdout == expected
    assert "document 0 (Deployment/frontend) spec.replicas: 1 -> 2" in r.stderr


def test_schema_violation_in_user_values(tmp_path):
    v = tmp_path / "v.yaml"
    v.write_text("replicas: three\n")
    assert_one_line_error(
        backend("configure", "--values", str(v), "manifests/deploy.yaml"),
        "ConfigData configuration.schema",
        "values.replicas: 'three' is not of type 'integer'",
    )


def test_schema_violation_in_merged_values(tmp_path):
    v = tmp_path / "v.yaml"
    v.write_text("{}\n")
    r = edited_backend(
        tmp_path,
        "replicas: 1\n",
        "replicas: one\n",
        "configure",
        "--values",
        str(v),
        "manifests/deploy.yaml",
        count=1,
    )
    assert_one_line_error(
        r, "merged values (defaults + values).replicas: 'one' is not of type 'integer'"
    )


def test_cue_config_data_is_refused():
    r = with_config_data(
        DATA / "cue/config.yaml",
        DATA / "cue",
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "deployment.yaml",
    )
    assert_one_line_error(
        r,
        "ConfigData localization[0] (file deployment.yaml): CUE 'mapping' rules are not supported",
    )


def test_cue_rule_is_refused(tmp_path):
    cd = tmp_path / "cd.yaml"
    cd.write_text(
        "apiVersion: config.ocm.software/v1alpha1\n" + (DATA / "cue/config.yaml").read_text()
    )
    r = with_config_data(
        cd,
        DATA / "cue",
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "deployment.yaml",
    )
    assert_one_line_error(
        r,
        "ConfigData localization[0] (file deployment.yaml): CUE 'mapping' rules are not supported",
    )


def test_unsupported_spiff_expression(tmp_path):
    r = edited_backend(
        tmp_path,
        "(( replicas ))",
        '(( join(", ", replicas) ))',
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(
        r,
        "configuration.rules[0].value (file manifests/deploy.yaml)",
        "(( join(",
        "function calls",
        "not supported",
    )


def test_supported_spiff_arithmetic_through_the_cli(tmp_path):
    r = edited_backend(
        tmp_path,
        "(( replicas ))",
        "(( replicas + 1 ))",
        "configure",
        "-v",
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "spec.replicas: 1 -> 2" in r.stderr  # defaults replicas: 1, plus one


def test_bad_path_names_rule_field_and_file(tmp_path):
    r = edited_backend(
        tmp_path,
        "path: spec.replicas",
        "path: spec.replicas.x",
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(
        r,
        "ConfigData configuration.rules[0].path (file manifests/deploy.yaml)",
        "key 'x' applied to spec.replicas, which is a scalar (int)",
    )


def test_out_of_range_index(tmp_path):
    r = edited_backend(
        tmp_path,
        "containers[0].image",
        "containers[3].image",
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(
        r,
        "ConfigData localization[0].image (file manifests/deploy.yaml)",
        "index [3] is out of range",
    )


def test_missing_resource(tmp_path):
    r = edited_backend(
        tmp_path,
        "name: image",
        "name: picture",
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(
        r, "ConfigData localization[0].resource", "no resource with identity {name=picture}"
    )


def test_invalid_config_data(tmp_path):
    cd = tmp_path / "cd.yaml"
    cd.write_text("apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nlocalisation: []\n")
    assert_one_line_error(
        run(
            "configure",
            "--config-data",
            str(cd),
            "--values",
            str(BACKEND / "values.yaml"),
            "--root",
            str(BACKEND),
            "manifests/deploy.yaml",
        ),
        "localisation: unknown field",
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["configure", "--values", "nope.yaml", "manifests/deploy.yaml"],
            "--values nope.yaml: no such file",
        ),
        (
            ["configure", "--values", str(BACKEND / "values.yaml"), "manifests/missing.yaml"],
            "missing.yaml: no such file",
        ),
        (["configure", "--values", str(BACKEND / "values.yaml"), "manifests"], "is a directory"),
        (
            ["configure", "--values", str(BACKEND / "values.yaml"), "../outside.yaml"],
            "must be a path inside the root",
        ),
        (
            ["configure", "--values", str(BACKEND / "values.yaml"), "/etc/hostname"],
            "is outside --root",
        ),
        (
            ["localize", "--component", "/nonexistent/cd.yaml", "manifests/deploy.yaml"],
            "does not exist",
        ),
        (
            ["localize", "--component", "ctf::/nonexistent//a.org/x:1", "manifests/deploy.yaml"],
            "/nonexistent does not exist",
        ),
        # usage errors: exit 2 (the contract of function/cli/exits.py)
        (["configure", "manifests/deploy.yaml"], "Missing option '--values'"),
        (["configure", "--values", str(BACKEND / "values.yaml")], "Missing argument 'FILE'"),
        (
            ["mutate", "--values", str(BACKEND / "values.yaml"), "manifests/deploy.yaml"],
            "Missing option '--component'",
        ),
        (
            [
                "configure",
                "--values",
                str(BACKEND / "values.yaml"),
                "--bogus",
                "manifests/deploy.yaml",
            ],
            "No such option '--bogus'",
        ),
    ],
)
def test_error_paths(args, fragment):
    r = backend(*args)
    assert r.exit_code == (2 if fragment.startswith(("Missing", "No such option")) else 1), r.output
    assert r.stdout == ""
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_config_data_file():
    r = run(
        "configure",
        "--config-data",
        "/nonexistent.yaml",
        "--values",
        str(BACKEND / "values.yaml"),
        "x.yaml",
    )
    assert_one_line_error(r, "--config-data /nonexistent.yaml: no such file")


def test_fixture_component_from_ctf(fixtures_dir, tmp_path):
    root = tmp_path / "k"
    shutil.copytree(fixtures_dir / "inputs/kustomize", root)
    r = run(
        "mutate",
        "-v",
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--root",
        str(root),
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo:6.2.0",
        "--values",
        str(BACKEND / "values-configmap.yaml"),
        "deployment.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert (
        "image: 127.0.0.1:5000/upstream/podinfo@sha256:"
        "11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1\n"
    ) in r.stdout
    assert "  replicas: 2\n" in r.stdout
    assert "not applicable: ConfigData localization[1] addresses file values.yaml" in r.stderr


def test_fixture_chart_values_repository_without_registry_is_refused(fixtures_dir):
    """The OCM CLI fixture's ConfigData maps the image to repository + tag of a chart whose
    repository carries the host: the chart would pull copied-default/… from Docker Hub."""
    args = [
        "localize",
        "--config-data",
        str(fixtures_dir / "inputs/config/config.yaml"),
        "--root",
        str(fixtures_dir / "inputs/chart/podinfo"),
        "--component",
        str(fixtures_dir / "descriptors/copied-default-6.2.0.json"),
        "--registry",
        "http://127.0.0.1:5000/copied-default",
        "values.yaml",
    ]
    r = run(*args)
    assert_one_line_error(
        r,
        "ConfigData localization[1].repository (file values.yaml)",
        "without its registry",
        "'127.0.0.1:5000'",
        "fullyQualifiedRepository",
        "--image-pairs warning",
    )
    r = run(*args, "--image-pairs", "warning")
    assert r.exit_code == 0, r.stderr
    # the localBlob image's tag comes from its referenceName (upstream/podinfo:6.2.0), before the digest
    assert r.stdout == (
        "replicaCount: 1\nimage:\n  repository: copied-default/component-descriptors/acme.org/sack8s/podinfo\n"
        "  tag: 6.2.0@sha256:11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1\n"
    )
    assert "warning: ConfigData localization[1].repository (file values.yaml)" in r.stderr


def test_local_blob_without_registry_is_a_clear_error(fixtures_dir):
    r = with_config_data(
        fixtures_dir / "inputs/config/config.yaml",
        fixtures_dir / "inputs/chart/podinfo",
        "localize",
        "--component",
        str(fixtures_dir / "descriptors/copied-default-6.2.0.json"),
        "values.yaml",
    )
    assert_one_line_error(r, "ConfigData localization[1].resource")


def test_real_subprocess(tmp_path):
    need(SACK8S.exists(), f"sack8s console script not found next to {sys.executable}")
    ok = subprocess.run(
        [
            str(SACK8S),
            "mutate",
            "-v",
            "--config-data",
            "config.yaml",
            "--component",
            "component-descriptor.yaml",
            "--values",
            "values.yaml",
            "manifests/deploy.yaml",
        ],
        cwd=BACKEND,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert (
        RELOCATED in ok.stdout and "# upstream image; the component ships its own copy" in ok.stdout
    )
    assert "localization[0].image" in ok.stderr and RELOCATED not in ok.stderr.split("->")[0]
    bad = tmp_path / "v.yaml"
    bad.write_text("replicas: three\n")
    err = subprocess.run(
        [
            str(SACK8S),
            "configure",
            "--config-data",
            "config.yaml",
            "--values",
            str(bad),
            "manifests/deploy.yaml",
        ],
        cwd=BACKEND,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert err.returncode == 1 and err.stdout == ""
    assert err.stderr.strip().count("\n") == 0 and "Traceback" not in err.stderr
    assert "values.replicas: 'three' is not of type 'integer'" in err.stderr
    piped = subprocess.run(
        [
            str(SACK8S),
            "configure",
            "--config-data",
            str(BACKEND / "config.yaml"),
            "--values",
            str(BACKEND / "values.yaml"),
            "--as",
            "manifests/configmap.yaml",
            "-",
        ],
        input=(BACKEND / "manifests/configmap.yaml").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        piped.returncode == 0
        and "PODINFO_UI_MESSAGE: 'This is a test message Pipeline Backend'" in piped.stdout
    )


def test_invalid_yaml_file_and_values(tmp_path):
    (tmp_path / "bad.yaml").write_text("a: [\n")
    r = with_config_data(
        BACKEND / "config.yaml",
        tmp_path,
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        "bad.yaml",
    )
    assert_one_line_error(r, "bad.yaml: is not valid YAML at line 2")
    r = with_config_data(
        BACKEND / "config.yaml",
        BACKEND,
        "configure",
        "--values",
        str(tmp_path / "bad.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(r, "bad.yaml: is not valid YAML")
    (tmp_path / "list.yaml").write_text("- a\n")
    r = with_config_data(
        BACKEND / "config.yaml",
        BACKEND,
        "configure",
        "--values",
        str(tmp_path / "list.yaml"),
        "manifests/deploy.yaml",
    )
    assert_one_line_error(r, "must be a map of keys to values, got list")


def test_unreachable_registry_is_one_line(tmp_path):
    r = backend(
        "localize",
        "--component",
        "oci://127.0.0.1:1/base//acme.org/x:1.0",
        "--plain-http",
        "manifests/deploy.yaml",
    )
    assert_one_line_error(r, "component acme.org/x:1.0", "127.0.0.1:1")


def test_bad_registry_option():
    r = backend(
        "localize",
        "--component",
        str(BACKEND / "component-descriptor.yaml"),
        "--registry",
        "ctf::./x",
        "manifests/deploy.yaml",
    )
    assert_one_line_error(r, "--registry ctf::./x: must be an OCI registry address")


def test_absolute_file_inside_root_and_as_override(tmp_path):
    r = backend(
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        str(BACKEND / "manifests/configmap.yaml"),
    )
    assert r.exit_code == 0 and "This is a test message Pipeline Backend" in r.stdout
    copy = tmp_path / "cm-copy.yaml"
    copy.write_text((BACKEND / "manifests/configmap.yaml").read_text())
    r = with_config_data(
        BACKEND / "config.yaml",
        tmp_path,
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        "--as",
        "manifests/configmap.yaml",
        "cm-copy.yaml",
    )
    assert r.exit_code == 0 and "This is a test message Pipeline Backend" in r.stdout


def test_component_directory_and_unnamed_ctf(tmp_path, fixtures_dir):
    d = tmp_path / "comp"
    d.mkdir()
    shutil.copy(BACKEND / "component-descriptor.yaml", d / "component-descriptor.yaml")
    r = backend("localize", "--component", str(d), "manifests/deploy.yaml")
    assert r.exit_code == 0 and RELOCATED in r.stdout
    r = backend(
        "localize", "--component", f"{d}//ocm.software/podinfo-backend", "manifests/deploy.yaml"
    )
    assert r.exit_code == 0 and RELOCATED in r.stdout  # version left out: the only one is used
    r = backend("localize", "--component", str(fixtures_dir / "ctf"), "manifests/deploy.yaml")
    # the CTF holds one component, which is taken; it has two versions, which are listed
    assert_one_line_error(
        r, "name the version (SOURCE//NAME:VERSION); versions there: 6.3.0, 6.2.0"
    )
    r = backend(
        "localize",
        "--component",
        f"ctf::{fixtures_dir / 'ctf'}//acme.org/sack8s/podinfo",
        "manifests/deploy.yaml",
    )
    assert_one_line_error(
        r, "component acme.org/sack8s/podinfo: name the version", "versions there: 6.3.0, 6.2.0"
    )


def test_schema_violations_as_warnings_flag(tmp_path):
    values = tmp_path / "v.yaml"
    values.write_text("replicas: three\n")
    r = backend("configure", "--values", str(values), "manifests/deploy.yaml")
    assert_one_line_error(
        r,
        "ConfigData configuration.schema: values.replicas: 'three' is not of type 'integer' "
        "(schema rule properties/replicas/type)",
    )
    r = backend(
        "configure",
        "--schema-violations",
        "warning",
        "--values",
        str(values),
        "manifests/deploy.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "replicas: three" in r.stdout
    assert r.stderr.splitlines() == [
        "sack8s: warning: ConfigData configuration.schema: values.replicas: 'three' is not of type 'integer' (schema "
        "rule properties/replicas/type) (reported as a warning: schema violations are set to Warning)"
    ]


def test_engine_findings_go_to_stderr(tmp_path):
    cd = tmp_path / "cd.yaml"
    cd.write_text(
        "configuration:\n  defaults: {unused: (( nothere )), list: [x, y]}\n  rules:\n"
        "  - {value: (( name )), file: manifests/configmap.yaml, path: data.NAME}\n"
    )
    r = with_config_data(
        cd,
        BACKEND,
        "configure",
        "--values",
        str(BACKEND / "values.yaml"),
        "manifests/configmap.yaml",
    )
    assert r.exit_code == 0, r.stderr
    assert "NAME: subst-0" in r.stdout
    warnings = r.stderr.splitlines()
    assert [w.split(":")[1].strip() for w in warnings] == ["warning"] * 5, warnings
    assert "apiVersion and kind are missing" in warnings[0]
    assert "configuration.defaults.list[1]: the unquoted 'y' is read as true" in warnings[1]
    assert "configuration.defaults.unused: (( nothere )) refers to 'nothere'" in warnings[2]
    assert "(( name )) resolves to this rule's own field name ('subst-0')" in warnings[3]
    # (( name )) is the rule's own field, so the values' only key lands nowhere
    assert warnings[4].endswith(
        "reach no configuration rule of the ConfigData (for any file), "
        "so they are never applied: message"
    )
