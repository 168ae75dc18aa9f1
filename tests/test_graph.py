"""sack8s render --graph: the Mermaid picture of what a claim composes, and the copies in the docs.

The pictures embedded in docs/graph.md are regenerated here from `sack8s render --graph`
of the bundled examples and compared; `SACK8S_UPDATE_GRAPHS=1` rewrites them instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import need
from support.examples import CASES

from function.cli import main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "docs" / "graph.md"]
BY_ID = {c.id: c for c in CASES}
# marker name in the docs -> example case
PICTURES = {"helm": "helm-observed", "kustomize": "kustomize-observed", "helm-gated": "helm-gated"}
MARKER = re.compile(
    r"(<!-- sack8s-graph: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /sack8s-graph -->)", re.S
)
MERMAID = Path(os.environ.get("SACK8S_MERMAID", Path.home() / ".cache" / "sack8s" / "mermaid"))


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the example composition mirrors examples/component/ctf, relative


def render(case_id: str, *extra: str):
    args = [
        str(Path(a).relative_to(REPO)) if a.startswith(str(REPO)) else a
        for a in BY_ID[case_id].render_args()
    ]
    return CliRunner().invoke(main, [*args, *extra], catch_exceptions=False)


def graph(case_id: str) -> str:
    r = render(case_id, "--graph", "--no-include-results")
    assert r.exit_code == 0, r.stderr
    return r.stdout


def block(text: str) -> str:
    return f"```mermaid\n{text}```\n"


def test_embedded_pictures_match_the_render():
    update = os.environ.get("SACK8S_UPDATE_GRAPHS") == "1"
    seen: set[str] = set()
    for doc in DOCS:
        text = doc.read_text()
        names = [m.group("name") for m in MARKER.finditer(text)]
        assert names, f"{doc.name} embeds no sack8s-graph picture"
        assert set(names) <= set(PICTURES), names
        seen.update(names)
        new = MARKER.sub(
            lambda m: m.group(1) + block(graph(PICTURES[m.group("name")])) + m.group(4), text
        )
        if update:
            doc.write_text(new)
        else:
            assert new == text, (
                f"{doc.relative_to(REPO)}: an embedded picture differs from `sack8s render --graph`; "
                "regenerate with SACK8S_UPDATE_GRAPHS=1 .venv/bin/pytest tests/test_graph.py"
            )
    assert {"helm", "kustomize"} <= seen  # docs/graph.md shows both flavours


def test_graph_is_deterministic():
    assert graph("helm-observed") == graph("helm-observed")


def test_helm_graph_has_the_edges_a_reader_needs():
    g = graph("helm-observed")
    docs = list(yaml.safe_load_all(render("helm-observed").stdout))
    assert g.startswith(
        '---\ntitle: "SACK8sComponentVersion podinfo (acme.org/sack8s/podinfo 6.2.0)"\n---\nflowchart LR\n'
    )
    # grouped by namespace, every composed object but the Usages a node
    deploy_ns = docs[0]["status"]["deploy"]["namespace"]  # sack8s-podinfo-<hash>
    assert (
        f'  subgraph ns_{deploy_ns.replace("-", "_")}["Namespace {deploy_ns} (deploy namespace)"]'
        in g
    )
    assert '  subgraph ns_podinfo["Namespace podinfo (target namespace)"]' in g
    for d in docs[1:]:
        if d["kind"] not in ("Usage", "ClusterUsage", "Namespace"):
            key = d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
            node = re.sub(r"[^A-Za-z0-9_]", "_", key)
            assert f'n_{node}["{d["kind"]}<br/>{d["metadata"]["name"]}"]' in g, key
    # who impersonates whom, which binding binds which role to which SA
    assert 'n_flux_helmrelease -->|"impersonates"| n_serviceaccount_deployer' in g
    assert 'n_rolebinding_podinfo -->|"grants"| n_role_podinfo' in g
    assert 'n_rolebinding_podinfo -->|"to"| n_serviceaccount_deployer' in g
    # which secret feeds which object
    repository_secret = next(
        d["spec"]["target"]["name"]
        for d in docs[1:]
        if d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        == "externalsecret-repository"
    )
    for consumer in (
        "n_flux_ocirepository",
        "n_ocm_repository",
        "n_ocm_component",
        "n_ocm_resource",
    ):
        assert f'n_externalsecret_repository -->|"Secret {repository_secret}"| {consumer}' in g
    assert 'n_externalsecret_pull_podinfo -->|"imagePullSecret"| w_podinfo' in g
    assert 'n_externalsecret_podinfo_podinfo_db -->|"Secret podinfo-db"| w_podinfo' in g
    # what waits on the gate
    assert 'n_ocm_component ==>|"gate: Ready at 6.2.0"| n_flux_helmrelease' in g
    assert 'n_ocm_component ==>|"gate: Ready at 6.2.0"| n_flux_ocirepository' in g
    # one dotted edge per Usage and ClusterUsage, from `by` to `of`
    usages = [d for d in docs if d["kind"] in ("Usage", "ClusterUsage")]
    assert g.count('-.->|"deleted before"|') == len(usages) == 9
    assert 'n_flux_helmrelease -.->|"deleted before"| n_role_podinfo' in g
    assert 'ns_podinfo -.->|"deleted before"| ns_sack8s_podinfo' in g  # Namespaces are the boxes


def test_gated_graph_shows_what_waits():
    g = graph("helm-gated")
    assert re.search(
        r"HelmRelease and OCIRepository<br/>podinfo-[a-z2-7]{20}<br/>\(withheld until the gate opens\)",
        g,
    )
    assert 'n_ocm_component ==>|"gate: Ready at 6.2.0"| n_withheld_flux' in g
    assert "n_flux_helmrelease" not in g


def test_fatal_prints_no_graph(tmp_path):
    bad = tmp_path / "xr.yaml"
    bad.write_text(
        (REPO / "examples/xr.yaml").read_text().replace("name: chart", "name: no-such-resource")
    )
    r = CliRunner().invoke(
        main, ["render", str(bad), "--composition", "examples/composition.yaml", "--graph"]
    )
    assert r.exit_code == 1 and r.stdout == "" and "no-such-resource" in r.stderr


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_mermaid_accepts_every_example_graph(case_id, tmp_path):
    node = shutil.which("node")
    need(node is not None, "node not installed (the Mermaid parser runs on it)")
    need(
        (MERMAID / "node_modules" / "mermaid").is_dir()
        and (MERMAID / "node_modules" / "jsdom").is_dir(),
        f"mermaid and jsdom not installed under {MERMAID} (set SACK8S_MERMAID; .ci/run installs them)",
    )
    script = MERMAID / "sack8s-parse.mjs"
    shutil.copy(REPO / "tests" / "support" / "mermaid_parse.mjs", script)
    done = subprocess.run(
        [node, str(script)], input=graph(case_id), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert '"diagramType":"flowchart-v2"' in done.stdout
    broken = graph(case_id).replace("-->|", "-->|[[", 1)  # the parser does refuse bad text
    assert (
        subprocess.run(
            [node, str(script)], input=broken, capture_output=True, text=True, timeout=120
        ).returncode
        == 1
    )
