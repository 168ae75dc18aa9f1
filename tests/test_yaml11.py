"""Output that YAML 1.1 readers (Helm, kubectl, sigs.k8s.io/yaml) read the same as we meant it.

The reference readers here are real YAML 1.1 parsers: PyYAML's safe loader and ruamel's YAML 1.1
mode (which, like go-yaml v2, also takes y/n for booleans). Every file the CLI writes
(manifests, Helm values, JSON) and every document ``sack8s render`` prints (Helm values and
Kustomize patches inside the Flux objects) must load to the same data in them as in a YAML
1.2 reader.
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML: a YAML 1.1 reader
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.error import MantissaNoDotYAML1_1Warning

from function.cli import main
from function.configdata.engine import apply_to_file
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.edge.render import claim_to_xr, dump_yaml, input_from_composition, load_docs, render
from function.yaml11 import goyaml_v2, needs_quotes

REPO = Path(__file__).resolve().parents[1]

# Plain scalars some YAML 1.1 reader types as non-strings (issue 26 item 4 and the 1.1 type specs)
RETYPED = [
    "y",
    "Y",
    "n",
    "N",
    "yes",
    "Yes",
    "YES",
    "no",
    "No",
    "NO",
    "on",
    "On",
    "ON",
    "off",
    "Off",
    "OFF",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "FALSE",
    "~",
    "null",
    "Null",
    "NULL",
    "",
    "1:20",
    "-1:20",
    "190:20:30.15",
    "0777",
    "-0777",
    "0o17",
    "0x1F",
    "0X1F",
    "+0x1F",
    "0b101",
    "-0b101",
    "1_000",
    "1__0",
    ".inf",
    "-.inf",
    "+.inf",
    ".Inf",
    ".nan",
    ".NaN",
    "1e3",
    "1E3",
    "1.",
    ".5",
    "._5",
    "+12",
    "-1",
    "12",
    "1.5",
    "1_000.5",
    "2024-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10",
    "=",
    "<<",
]
KEPT = [
    "x",
    "yes please",
    "v1.0",
    "1.2.3",
    "0.1.2",
    "abc",
    "nope",
    "onward",
    "n/a",
    "ghcr.io/a/b:1",
    "tcp://h:1",
    "1-2",
    "0x",
    "0b",
    "1:2:3:4x",
    "y2k",
    "Norway",
    "~x",
    "-",
    ".",
]


def pyyaml(text: str) -> Any:
    return list(yaml.safe_load_all(text))


def ruamel11(text: str) -> Any:
    y = YAML(typ="safe", pure=True)
    y.version = (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MantissaNoDotYAML1_1Warning)  # "1e3": a float all the same
        return list(y.load_all(io.StringIO(text)))


def ruamel12(text: str) -> Any:
    return list(YAML(typ="safe", pure=True).load_all(io.StringIO(text)))


def strings_survive(text: str, expected: Any) -> None:
    """Every YAML reader reads ``expected`` back from ``text`` (dates compared as text)."""
    for reader in (pyyaml, ruamel11, ruamel12):
        assert _normal(reader(text)) == _normal(expected), reader.__name__


def _normal(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _normal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_normal(x) for x in v]
    return v


@pytest.mark.parametrize("s", RETYPED)
def test_retyped_scalars_need_quotes(s: str) -> None:
    assert needs_quotes(s)


@pytest.mark.parametrize("s", KEPT)
def test_ordinary_strings_stay_plain(s: str) -> None:
    assert not needs_quotes(s)
    assert goyaml_v2(s) == s


def test_every_retyped_scalar_is_really_retyped_by_some_reader() -> None:
    """The list above is not made up: each one is a non-string to PyYAML, ruamel 1.1 or go-yaml v2."""
    for s in RETYPED:
        if s in ("=", "<<", ""):
            continue
        readers = [pyyaml(f"k: {s}\n")[0]["k"], ruamel11(f"k: {s}\n")[0]["k"], goyaml_v2(s)]
        assert any(not isinstance(r, str) for r in readers) or any(r != s for r in readers), s


def _apply(text: str, file: str, values: dict[str, Any]) -> str:
    subs = [
        Substitution(f"configuration.rules[{i}]", "path", file, parse_path(p, where="t"), v)
        for i, (p, v) in enumerate(values.items())
    ]
    return apply_to_file(text, file, subs).text


def test_cli_writer_quotes_every_retyped_string_and_keeps_the_authors_plain_scalars() -> None:
    source = "# the author's file\ncountry: no  # the author's own plain scalar stays as written\nlist: [a]\n"
    written = {"value": RETYPED[0], "list": RETYPED, "nested": {s: s for s in RETYPED if s}}
    out = _apply(source, "values.yaml", written)
    assert "country: no  # the author's own plain scalar stays as written" in out
    expected = [
        {"country": False, "list": RETYPED, "value": "y", "nested": {s: s for s in RETYPED if s}}
    ]
    for reader in (pyyaml, ruamel11):
        got = reader(out)
        assert got[0]["list"] == RETYPED and got[0]["value"] == "y", reader.__name__
        assert {str(k): v for k, v in got[0]["nested"].items()} == expected[0]["nested"], (
            reader.__name__
        )


def test_cli_writes_json_for_json_content_as_upstream() -> None:
    # upstream-v1 P06 / case 45: JSON content is written back as 2-space-indented JSON; YAML in a
    # .json file stays YAML (ocm api/utils/subst/subst.go Parse/Content choose by content)
    out = _apply(
        '{"spec": {"replicas": 1}}', "settings.json", {"spec.replicas": 2, "spec.flag": "no"}
    )
    assert out == '{\n  "spec": {\n    "replicas": 2,\n    "flag": "no"\n  }\n}\n'
    assert json.loads(out) == {"spec": {"replicas": 2, "flag": "no"}}
    assert (
        _apply("metadata:\n  name: a\n", "settings.yaml.json", {"metadata.name": "b"})
        == "metadata:\n  name: b\n"
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(alphabet="yYnNoOfFtTrRuUeEaAlLsS01789_.:-+xXbB~=<e ", max_size=8),
        min_size=1,
        max_size=6,
    )
)
def test_any_string_written_reads_back_as_the_same_string(values: list[str]) -> None:
    out = _apply("a: 1\n", "v.yaml", {f"k{i}": v for i, v in enumerate(values)})
    expected = {"a": 1, **{f"k{i}": v for i, v in enumerate(values)}}
    for reader in (pyyaml, ruamel11, ruamel12):
        assert reader(out) == [expected], (reader.__name__, out)
    rendered = dump_yaml([expected])
    for reader in (pyyaml, ruamel11, ruamel12):
        assert reader(rendered) == [expected], (reader.__name__, rendered)


def test_cli_configure_output_reads_the_same_in_yaml_1_1(tmp_path: Path) -> None:
    cd = tmp_path / "cd.yaml"
    cd.write_text(
        "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nconfiguration:\n  rules:\n"
        "  - {value: (( country )), file: values.yaml, path: country}\n"
        "  - {value: (( codes )), file: values.yaml, path: codes}\n"
        "  - {value: (( mode )), file: values.yaml, path: mode}\n"
    )
    (tmp_path / "values.yaml").write_text("country: de\ncodes: []\nmode: auto\n")
    values = tmp_path / "v.yaml"
    values.write_text(
        "country: 'no'\ncodes: ['y', 'n', 'on', 'off', '0777', '1:20', '~']\nmode: 'off'\n"
    )
    r = CliRunner().invoke(
        main,
        [
            "configure",
            "--config-data",
            str(cd),
            "--root",
            str(tmp_path),
            "--values",
            str(values),
            "values.yaml",
        ],
    )
    assert r.exit_code == 0, r.stderr
    strings_survive(
        r.stdout,
        [{"country": "no", "codes": ["y", "n", "on", "off", "0777", "1:20", "~"], "mode": "off"}],
    )


def test_render_output_reads_the_same_in_yaml_1_1() -> None:
    """Helm values and Kustomize patches inside the composed Flux objects, as ``sack8s render`` prints them."""
    seen_patch = False
    for xr_file, flavour in (
        ("examples/xr.yaml", "helm"),
        ("examples/xr-kustomize.yaml", "kustomize"),
    ):
        xr = copy.deepcopy(claim_to_xr(load_docs([REPO / xr_file])[0]))
        xr["spec"]["values"] = {"inline": {"replicas": 2, "message": "no"}}
        policy = input_from_composition(
            load_docs([REPO / "examples/composition.yaml"])[0], "composition"
        )
        out = asyncio.run(
            render(xr, policy, observed=load_docs([REPO / "examples/observed" / flavour]))
        )
        assert out.fatal is None, out.fatal.message if out.fatal else ""
        text = out.yaml()
        docs12 = ruamel12(text)
        assert pyyaml(text) == docs12 and ruamel11(text) == docs12
        for d in docs12:
            for patch in (d.get("spec") or {}).get("patches") or []:
                seen_patch = seen_patch or '"value": "no"' in patch["patch"]
    assert seen_patch  # the Kustomize flavour wrote the message through a JSON patch
