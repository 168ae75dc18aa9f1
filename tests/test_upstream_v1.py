"""Upstream ocm-controller v0.32.0's own ConfigData data, through the CLI, with upstream's results.

Every case folder of the upstream-v1 fixture (``$SACK8S_UPSTREAM_V1``) is run through
``sack8s localize``/``configure`` by :mod:`upstream_v1` (each step on upstream's own input for
that step; outputs compared parsed) and must land in the class this table gives it:

* ``match``: the output equals what upstream's code computed;
* ``both-error``: upstream fails and so does the CLI, with the message given;
* ``refused``: the CLI refuses by name, for a reason ``docs/configdata.md`` ("Differences from
  v1") documents; the message fragments are asserted;
* ``deliberate``: a documented difference that is never silent: the warning is asserted;
* ``n/a``: nothing here runs it (the reason is given), and the harness must agree.

Each entry cites the upstream test or code the expectation comes from (paths in
ocm-controller v0.32.0 unless another repository is named; "computed" = the fixture's
``computed/`` output of upstream's code). A change that turns a ``match`` into anything else,
or a refusal into silence, fails here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import upstream_v1 as harness
from conftest import need_path

UNPINNED = "no digest"  # docs/configdata.md Differences from v1: unpinned images are refused
CUE = "CUE 'mapping' rules are not supported"
# docs/configdata.md Differences from v1, rows 5 and 6 (issue 20): a `tag` rule writes TAG@sha256:…
# for a tagged, pinned reference; a reference with a digest and no tag gives a bare digest, which
# no `repository:tag` template can use: refused by name (an image-pair defect)
BARE_DIGEST = "would receive the bare digest"
SCHEMA_STRING = "replicas: 1 is not of type 'string' (schema rule properties/replicas/type)"
CONTROLLER = "open-component-model/ocm-controller v0.32.0"


@dataclass(frozen=True)
class X:
    """The expected class of one step, why, and what the CLI must say."""

    cls: str
    cite: str
    says: tuple[
        str, ...
    ] = ()  # error fragments (both-error/refused: every failing file shows one) or warnings
    with_schema_warnings: str | None = None  # the class with --schema-violations Warning


def steps(*xs: X) -> tuple[X, ...]:
    return xs


LOC_UNIT = "controllers/localization_controller_test.go TestLocalizationReconciler"
CFG_UNIT = "controllers/configuration_controller_test.go TestConfigurationReconciler"
VALUES_FROM = "controllers/configuration_controller_test.go TestConfigurationValuesFrom"
E2E = "e2e/main_test.go (computed: mutation_reconcile_looper.go localize/configure on the e2e testdata)"
MPAS = "open-component-model/MPAS v0.8.0"

TABLE: dict[str, tuple[X, ...] | str] = {
    "01-unit-loc-snapshot-source": steps(
        X(
            "refused",
            f"{LOC_UNIT} 'with snapshot as a source' (line 85): the image asserted and matched here "
            "(deploy.yaml); values.yaml's tag rule gets the bare digest upstream asserts ('tag: "
            "sha256:…', the localBlob's globalAccess names no tag), refused by name as an image-pair "
            "defect; custom_resource.yaml has two CUE mappings",
            (CUE, BARE_DIGEST),
        )
    ),
    "02-unit-loc-resource-source": steps(
        X(
            "refused",
            f"{LOC_UNIT} 'with resource as a source' (line 149): as 01",
            (CUE, BARE_DIGEST),
        )
    ),
    "03-unit-loc-unknown-access-type": steps(
        X(
            "both-error",
            f"{LOC_UNIT} 'GetImageReference fails' (line 361): 'cannot determine access spec type'",
            ("access type 'unknown' has no image reference", CUE),
        )
    ),
    "04-unit-loc-invalid-reference": steps(
        X(
            "both-error",
            f"{LOC_UNIT} 'ParseReference fails' (line 413): 'could not parse reference: invalid:@:1.0.0@…'",
            ("'invalid:@:1.0.0' is not a valid OCI reference", CUE),
        )
    ),
    "05-unit-loc-not-a-tar": "the source blob is plain text, not a tar (controllers/tar.go isTar): the CLI reads "
    "files, and the function's archive reader refuses non-archives (function/ocm)",
    "06-unit-loc-file-missing": steps(
        X(
            "both-error",
            f"{LOC_UNIT} 'localization fails because the file does not exist' (line 515): "
            "'no such file or directory'",
            ("idonotexist: no such file",),
        )
    ),
    "07-unit-loc-invalid-configdata": steps(
        X(
            "both-error",
            f"{LOC_UNIT} 'it fails to marshal the config data' (line 577): 'failed to unmarshal content'",
            ("must be a YAML map, got str",),
        )
    ),
    "08-unit-cfg-snapshot-source": steps(
        X(
            "match",
            f"{CFG_UNIT} 'with snapshot as a source' (line 80); "
            "no apiVersion: accepted with a warning",
        )
    ),
    "09-unit-cfg-add-new-node": steps(
        X("match", f"{CFG_UNIT} 'add new node that does not exist' (line 139)")
    ),
    "10-unit-cfg-literal-value": steps(
        X("match", f"{CFG_UNIT} 'values without defaults are not ignored' (line 228)")
    ),
    "11-unit-cfg-resource-source": steps(
        X("match", f"{CFG_UNIT} 'with resource as a source' (line 314)")
    ),
    "12-unit-cfg-unresolved-expression": steps(
        X(
            "both-error",
            f"{CFG_UNIT} 'error while running configurator' (line 506): \"*'nope' not found\"",
            ("(( nope )) refers to 'nope', which is not in the merged values",),
        )
    ),
    "13-unit-cfg-file-missing": steps(
        X(
            "both-error",
            f"{CFG_UNIT} 'configuration fails because the file does not exist' (line 578)",
            ("nope.yaml: no such file",),
        )
    ),
    "14-unit-cfg-invalid-configdata": steps(
        X(
            "both-error",
            f"{CFG_UNIT} 'it fails to marshal the config data' (line 650): 'failed to unmarshal content'",
            ("must be a YAML map, got str",),
        )
    ),
    "15-unit-cfg-values-from-gitrepository": steps(
        X(
            "match",
            f"{VALUES_FROM} 'configuration values from GitRepository' (line 866); values as upstream passed "
            "them (computed values.json, subPath test.backend applied)",
        )
    ),
    "16-unit-cfg-values-from-configmap": steps(
        X("match", f"{VALUES_FROM} 'configuration values from ConfigMap' (line 898)")
    ),
    "17-unit-cfg-values-from-optional-missing-configmap": steps(
        X(
            "match",
            f"{VALUES_FROM} 'configuration values from optional missing ConfigMap' (line 933): defaults win",
        )
    ),
    "18-unit-cfg-values-from-missing-configmap": "a ConfigMap that does not exist (NotFound): the claim's "
    "values.configMapRef, not ConfigData; the CLI reads a file",
    "19-unit-generate-substitutions-null-default": steps(
        X(
            "match",
            "controllers/mutation_reconcile_looper_test.go TestGenerateSubstitutionsUseDefaults (line 44): "
            "one substitution dmi.gcp_project_id = null",
        )
    ),
    "20-unit-cue-populate-references": "the CUE scope of referenced components (TestPopulateReferences): CUE "
    "mappings are refused by name (01, 31)",
    "21-unit-psm-gitrepository-source": "Configuration.patchStrategicMerge, a Configuration CR feature, not ConfigData",
    "22-unit-psm-resource-source-gzip": "Configuration.patchStrategicMerge, not ConfigData",
    "23-unit-psm-resource-source-plain-tar": "Configuration.patchStrategicMerge, not ConfigData",
    "24-e2e-testOCMController-backend": steps(
        X(
            "refused",
            f"{E2E}: ghcr.io/stefanprodan/podinfo:6.2.0 has neither digest nor resource digest",
            (UNPINNED,),
        ),
        X(
            "match",
            f"{E2E}: ConfigMap backend-config PODINFO_UI_MESSAGE == 'This is a test message Pipeline Backend'",
        ),
    ),
    "25-e2e-testOCMController-frontend": steps(
        X("refused", f"{E2E}: unpinned image as 24", (UNPINNED,)),
        X("match", f"{E2E}: frontend-config PODINFO_UI_MESSAGE; spec.replicas created"),
    ),
    "26-e2e-testOCMController-redis": steps(
        X("refused", f"{E2E}: redis:6.0.1 unpinned", (UNPINNED,)),
        X(
            "refused",
            "e2e/testdata/testOCMController/podinfo/redis/config.yaml: schema replicas {type: string} with "
            "values replicas: 1 (upstream never enforced its schema: pkg/configdata/configdata.go Schema decodes to {})",
            (SCHEMA_STRING,),
            with_schema_warnings="match",
        ),
    ),
    "27-e2e-testSignedOCIRegistryComponents-backend": steps(
        X("refused", f"{E2E}: unpinned image as 24", (UNPINNED,)),
        X("match", f"{E2E}: the signed variant of 24 (computed)"),
    ),
    "28-e2e-testSignedOCIRegistryComponents-frontend": steps(
        X("refused", f"{E2E}: unpinned image as 24", (UNPINNED,)),
        X("match", f"{E2E}: the signed variant of 25 (computed)"),
    ),
    "29-e2e-testSignedOCIRegistryComponents-redis": steps(
        X("refused", f"{E2E}: unpinned image as 26", (UNPINNED,)),
        X(
            "refused",
            "as 26: the schema contradicts the values",
            (SCHEMA_STRING,),
            with_schema_warnings="match",
        ),
    ),
    "30-e2e-testOCMControllerMultipleSameResources": "e2e/same_resource_test.go asserts Resource readiness only; "
    "no localization or configuration runs",
    "31-example-mapping-with-cue": steps(
        X(
            "refused",
            "examples/mapping-with-cue (computed): a CUE mapping; the "
            "ConfigData has only kind (accepted with a warning)",
            (CUE,),
        )
    ),
    "32-doc-configdata-go-comment": "pkg/configdata/configdata.go doc comment: not executed upstream, no files",
    "33-doc-architecture-localization": "docs/architecture.md example: not executed upstream, no files",
    "34-doc-architecture-configuration": "docs/architecture.md example: not executed upstream, no files",
    "35-mpas-podinfo_component": steps(
        X(
            "refused",
            f"{MPAS} podinfo_component/config/config.yaml (computed): unpinned images and CUE mappings",
            (UNPINNED, CUE),
        ),
        X(
            "refused",
            f"{MPAS} podinfo_component: schema replicas string, defaults replicas 1 (its schema.cue says int)",
            (SCHEMA_STRING,),
            with_schema_warnings="match",
        ),
    ),
    "36-mpas-e2e-podinfo-backend": steps(
        X("refused", f"{MPAS} e2e/testdata/podinfo/backend (computed)", (UNPINNED,)),
        X("match", f"{MPAS} e2e backend, values {{}}: defaults written (computed)"),
    ),
    "37-mpas-e2e-podinfo-frontend": steps(
        X("refused", f"{MPAS} e2e/testdata/podinfo/frontend (computed)", (UNPINNED,)),
        X("match", f"{MPAS} e2e frontend (computed)"),
    ),
    "38-mpas-e2e-podinfo-redis": steps(
        X("refused", f"{MPAS} e2e/testdata/podinfo/redis (computed)", (UNPINNED,)),
        X(
            "refused",
            f"{MPAS} e2e redis: schema replicas string, defaults replicas 1",
            (SCHEMA_STRING,),
            with_schema_warnings="match",
        ),
    ),
    "39-mpas-examples-podinfo-backend": steps(
        X("refused", f"{MPAS} examples/products/podinfo/app/backend (computed)", (UNPINNED,)),
        X("match", f"{MPAS} example backend (computed)"),
    ),
    "40-mpas-examples-podinfo-frontend": steps(
        X("refused", f"{MPAS} examples/products/podinfo/app/frontend (computed)", (UNPINNED,)),
        X("match", f"{MPAS} example frontend (computed)"),
    ),
    "41-mpas-examples-podinfo-redis": steps(
        X("refused", f"{MPAS} examples/products/podinfo/redis (computed)", (UNPINNED,)),
        X(
            "refused",
            f"{MPAS} example redis: schema replicas string, defaults replicas 1",
            (SCHEMA_STRING,),
            with_schema_warnings="match",
        ),
    ),
    "42-mpas-bootstrap-kustomize-test": "MPAS internal/bootstrap/kustomize.go: MPAS's own engine turns image rules "
    "into kustomize images:, not ocm-controller's",
    "43-ocmlib-localize-substitute-simple": steps(
        X(
            "match",
            "open-component-model/ocm v0.46.0 api/ocm/ocmutils/localize/subst_test.go 'handles simple values "
            "substitution' (upstream-expected/)",
        )
    ),
    "44-ocmlib-localize-substitute-multiple": steps(
        X("match", "ocm v0.46.0 localize/subst_test.go 'handles multiple values substitution'")
    ),
    "45-ocmlib-localize-substitute-json": steps(
        X(
            "match",
            "ocm v0.46.0 localize/subst_test.go 'handles json substitution'; api/utils/subst/subst.go writes "
            "JSON content back as JSON",
        )
    ),
    "P01-probe-interpolation": steps(
        X("match", "spiff v1.7.0-beta-7 yaml/interpolation.go (computed)")
    ),
    "P02-probe-arithmetic": steps(
        X("match", "spiff dynaml/addition.go, multiplication.go (computed)")
    ),
    "P03-probe-or-default": steps(X("match", "spiff dynaml/or.go (computed)")),
    "P04-probe-expression-in-defaults": steps(
        X(
            "match",
            "controllers/spifftemplatedoc.go mergeDefaultsAndConfigValues + mutation_reconcile_looper.go "
            "generateSubstitutions: the merged document is one spiff template (computed)",
        )
    ),
    "P05-probe-schema-not-enforced": steps(
        X(
            "refused",
            "pkg/configdata/configdata.go ConfigurationSpec.Schema (gojsonschema.Schema, decodes to {}): "
            "upstream never enforced it; this product does (Differences from v1)",
            ("values.replicas: 'ten' is not of type 'integer'", "'unknownKey' was unexpected"),
            with_schema_warnings="match",
        )
    ),
    "P06-probe-json-target": steps(
        X("refused", "ghcr.io/acme/app:1.2.3 unpinned", (UNPINNED,)),
        X(
            "match",
            "ocm api/utils/subst/subst.go Parse/Content: JSON content stays JSON, YAML in a .json stays YAML",
        ),
    ),
    "P07-probe-reference-parts": steps(
        X(
            "refused",
            "controllers/mutation_reconcile_looper.go performLocalization with go-containerregistry v0.21.7 "
            "name.ParseReference (computed): the first rule's image is unpinned; the pinned references "
            "are checked separately below (TAG@sha256 for a tag rule, a bare digest refused by name)",
            (UNPINNED,),
        )
    ),
    "P08-probe-multidoc-yaml": steps(
        X(
            "deliberate",
            "ocm api/utils/subst/subst.go Parse decodes one document: upstream drops the second; every "
            "document is kept here (Differences from v1)",
            ("holds 2 YAML documents: every one is kept",),
        )
    ),
    "P09-probe-expression-in-values": steps(
        X("match", "generateSubstitutions: values are part of the spiff template")
    ),
    "P10-probe-literal-types": steps(
        X(
            "match",
            "sigs.k8s.io/yaml (go-yaml v2, YAML 1.1) reads the ConfigData: y is true (computed); warned",
        )
    ),
    "P11-probe-localblob-without-globalaccess": steps(
        X(
            "both-error",
            "mutation_reconcile_looper.go resolveReference: 'cannot determine image digest' (computed)",
            ("nowhere to pull this localBlob from",),
        )
    ),
    "P12-probe-rule-order-and-missing-paths": steps(
        X(
            "refused",
            "yq pads a list with null for an index past its end (computed); refused here "
            "(docs/configdata.md Paths)",
            ("index [2] is out of range",),
        )
    ),
    "P13-probe-mixed-values-types": steps(
        X("match", "yq '*' merge: maps merge, lists are replaced, null overrides")
    ),
    "P14-probe-two-expressions-in-one-string": steps(
        X(
            "both-error",
            "spiff yaml/node.go EmbeddedDynaml: one expression; 'parse error near symbol 6' (computed)",
            ("is not a valid spiff expression: parse error",),
        )
    ),
    "P15-probe-no-defaults": steps(X("match", "configuration without defaults (computed)")),
    "P16-probe-unused-broken-default": steps(
        X(
            "deliberate",
            "spiff fails the whole document on an unresolved node no rule uses ('unresolved nodes', "
            "computed); here it is a warning (Differences from v1)",
            (
                "configuration.defaults.unused: (( nothere )) refers to 'nothere'",
                "no rule uses this value",
            ),
        )
    ),
}

OBSERVED_FOR = {
    "match": {"match"},
    "both-error": {"both-error"},
    "refused": {"refused"},
    "deliberate": {"accepted", "mismatch"},
}


@pytest.fixture(scope="module")
def upstream() -> Path:
    return need_path(harness.UPSTREAM_V1, "upstream-v1 fixtures", "SACK8S_UPSTREAM_V1")


def test_the_table_covers_every_case(upstream: Path) -> None:
    assert sorted(TABLE) == [c.name for c in harness.cases()]


def _check(step: harness.StepRun, x: X) -> None:
    assert step.observed in OBSERVED_FOR[x.cls], (x.cls, step.observed, step.stderr())
    failed = [f for f in step.files if f.exit_code != 0]
    if x.cls in ("both-error", "refused"):
        assert failed
        for f in failed:
            assert any(s in f.stderr for s in x.says), (f.file, f.stderr)
            assert (
                f.stdout == "" and len(f.stderr.strip().splitlines()) == 1
            )  # one line, nothing written
    if x.cls == "refused":  # what is not refused is upstream's result
        assert all(f.same for f in step.files if f.exit_code == 0), [
            f.file for f in step.files if f.same is False
        ]
    if x.cls == "deliberate":
        for s in x.says:
            assert s in step.stderr(), (s, step.stderr())
        for f in step.files:
            if f.same is False:  # a multi-document file: upstream's one document is our first
                kind, docs = harness._yaml_docs(f.stdout)
                assert kind == "yaml" and docs[:1] == f.upstream[1] and len(docs) > 1
    if x.cls == "match":
        assert all(f.same for f in step.files), [f.file for f in step.files if not f.same]


@pytest.mark.parametrize("case", sorted(TABLE))
def test_upstream_case_lands_in_its_class(upstream: Path, case: str) -> None:
    expected = TABLE[case]
    runs = harness.run_case(upstream / case)
    if isinstance(expected, str):
        assert runs == [], f"{case} runs now: give it an expectation"
        return
    assert len(runs) == len(expected)
    for step, x in zip(runs, expected, strict=False):
        _check(step, x)
    if any(x.with_schema_warnings for x in expected):
        relaxed = harness.run_case(upstream / case, ("--schema-violations", "Warning"))
        for step, x in zip(relaxed, expected, strict=False):
            if x.with_schema_warnings:
                assert step.observed == x.with_schema_warnings, step.stderr()
                assert "reported as a warning" in step.stderr()


def test_p07_pinned_references_give_upstreams_parts(upstream: Path, tmp_path: Path) -> None:
    """P07 without the rules for unpinned images: the other fields are upstream's, value for value
    (computed/step1-localize/substitutions.json; go-containerregistry v0.21.7 Name/Identifier/
    RepositoryStr as performLocalization writes them), except the two deliberate differences of
    issue 20: a tagged, pinned reference's ``tag`` is ``TAG@sha256:…`` (upstream: the bare
    digest), and a bare digest as a tag is refused by name (``--image-pairs warning`` writes
    upstream's value and says so)."""
    from click.testing import CliRunner
    from ruamel.yaml import YAML

    from function.cli import main

    case = upstream / "P07-probe-reference-parts"
    y = YAML(typ="safe", pure=True)
    cd = y.load((case / "config.yaml").read_text())
    pinned = {"tag-and-digest", "digest-only", "localblob-globalaccess"}
    cd["localization"] = [r for r in cd["localization"] if r["resource"]["name"] in pinned]
    (tmp_path / "cd.json").write_text(json.dumps(cd))
    info = harness._load_case(case)
    args = [
        "localize",
        "--config-data",
        str(tmp_path / "cd.json"),
        "--root",
        str(case / "source"),
        "--component",
        str(harness._descriptor(case, info, tmp_path)),
        "values.yaml",
    ]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert (
        "localization[1].tag (file values.yaml): digest-only.tag " + BARE_DIGEST in refused.stderr
    )
    assert "(and 1 more)" in refused.stderr  # localblob.tag: the globalAccess names no tag either
    r = CliRunner().invoke(main, [*args[:-1], "--image-pairs", "warning", "values.yaml"])
    assert r.exit_code == 0, r.stderr
    assert "digest-only.tag " + BARE_DIGEST in r.stderr
    assert "localblob.tag " + BARE_DIGEST in r.stderr
    ours = y.load(r.stdout)
    subs = json.loads((case / "computed/step1-localize/substitutions.json").read_text())
    checked = 0
    for s in subs:
        key, field = s["path"].split(".")
        if key in ("tag-and-digest", "digest-only", "localblob"):
            expected = s["value"]
            if (key, field) == ("tag-and-digest", "tag"):  # Differences from v1, row 5
                assert expected.startswith("sha256:")
                expected = f"1.2.3@{expected}"
            assert ours[key][field] == expected, s
            checked += 1
    assert checked == 12


def test_totals(upstream: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The measure the issues quote: classes over the whole fixture (printed with -s)."""
    totals: dict[str, int] = {}
    for case, expected in TABLE.items():
        if isinstance(expected, str):
            cls = "n/a"
        else:
            cls = max(
                (x.cls for x in expected),
                key=["match", "both-error", "refused", "deliberate"].index,
            )
        totals[cls] = totals.get(cls, 0) + 1
    with capsys.disabled():
        print(f"\nupstream-v1: {dict(sorted(totals.items()))} (silent divergences: 0)")
    assert totals.get("deliberate", 0) == 2 and sum(totals.values()) == len(TABLE)
