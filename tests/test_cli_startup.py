"""What a sack8s command imports before it works: only what it uses.

The start-up time itself is a benchmark figure (benchmarks/startup.py, docs/benchmarks.md), never
a timed test. This test keeps the structure that makes it fast: the group lists commands without
importing them, and a ConfigData command never loads gRPC, the Crossplane SDK, protobuf, httpx
or (for localize) jsonschema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "component"
SOURCE = f"{EXAMPLE / 'ctf'}//acme.org/sack8s/podinfo:6.2.0"
CD = str(EXAMPLE / "inputs" / "config" / "config.yaml")
HEAVY = (
    "grpc",
    "crossplane",
    "google.protobuf",
    "httpx",
    "jsonschema",
    "pydantic",
    "function.edge.fn",
    "structlog",
    "prometheus_client",
)

PROBE = """
import json, sys
from function.cli import main
try:
    main(sys.argv[2:], prog_name="sack8s", standalone_mode=False)
except SystemExit as e:
    code = e.code
else:
    code = 0
loaded = sorted({m for m in sys.modules for h in json.loads(sys.argv[1]) if m == h or m.startswith(h + ".")})
print("\\n" + json.dumps({"code": code, "loaded": loaded}))
"""


def imported(*args: str) -> tuple[int, set[str]]:
    p = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last = json.loads(p.stdout.strip().splitlines()[-1])
    return last["code"], {
        m for m in last["loaded"] if m.split(".")[0] in {h.split(".")[0] for h in HEAVY}
    }


def roots(mods: set[str]) -> set[str]:
    return {h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in mods)}


def test_help_and_version_import_no_command():
    for args in (["--help"], ["--version"]):
        code, mods = imported(*args)
        assert code == 0 and roots(mods) == set(), (args, sorted(mods))


@pytest.mark.parametrize(
    "name",
    [
        "localize",
        "configure",
        "mutate",
        "check",
        "inspect",
        "xrd",
        "render",
        "component build",
        "serve",
    ],
)
def test_a_command_help_imports_nothing_heavy(name):
    code, mods = imported(*name.split(), "--help")
    assert code == 0 and roots(mods) == set(), sorted(mods)


def test_localize_loads_neither_grpc_nor_httpx_nor_jsonschema():
    code, mods = imported(
        "localize",
        "--config-data",
        CD,
        "--component",
        SOURCE,
        "--root",
        str(EXAMPLE / "inputs" / "kustomize"),
        "deployment.yaml",
    )
    assert code == 0
    assert roots(mods) == {"pydantic"}, sorted(mods)  # the ConfigData model


def test_check_configure_and_inspect_load_no_grpc_sdk_or_http_client():
    for args in (
        ["check", "--config-data", CD, "--component", SOURCE],
        ["inspect", str(EXAMPLE / "ctf")],
        [
            "configure",
            "--config-data",
            CD,
            "--values",
            str(REPO / "examples/required/values-configmap.yaml"),
            "--root",
            str(EXAMPLE / "inputs" / "kustomize"),
            "deployment.yaml",
        ],
    ):
        code, mods = imported(*args)
        assert code == 0, args
        assert roots(mods) <= {"pydantic", "jsonschema"}, (args, sorted(mods))


def test_the_lazy_table_matches_the_commands():
    from function.api.policy import INPUT_GROUP
    from function.api.xrd import DEFAULT_GROUP
    from function.cli import COMMANDS, command
    from function.cli.common import MAX_BYTES
    from function.cli.xrd import DEFAULT_GROUP as XRD_DEFAULT_GROUP
    from function.edge.render import INPUT_GROUP as RENDER_INPUT_GROUP
    from function.yamlio import MAX_BYTES as YAML_MAX_BYTES

    for name, (_, _, short) in COMMANDS.items():
        cmd = command(name)
        assert cmd.name == name
        assert (cmd.help or "").split("\n")[0].startswith(short.rstrip(".")), (name, cmd.help)
    # constants copied to keep the edges light
    assert MAX_BYTES == YAML_MAX_BYTES and RENDER_INPUT_GROUP == INPUT_GROUP
    assert XRD_DEFAULT_GROUP == DEFAULT_GROUP


def test_serve_declares_the_sdks_standard_flags_and_the_caches_defaults():
    """``serve`` copies the SDK's standard options (to keep its --help light): same names,
    environment variables and defaults as crossplane.function.cli; same budgets as the caches.
    """
    import click
    from crossplane.function import cli as sdkcli

    from function import cache
    from function.cli import serve
    from function.edge import metrics

    @click.command()
    @sdkcli.standard_options
    def sdk(**_: object) -> None: ...

    def shape(cmd: click.Command) -> dict[str, tuple]:
        return {
            p.name: (tuple(p.opts), tuple(p.secondary_opts), p.envvar, p.default, p.is_flag)
            for p in cmd.params
            if isinstance(p, click.Option)
        }

    ours = shape(serve.serve)
    for name, want in shape(sdk).items():
        assert ours.get(name) == want, name
    assert serve.DEFAULT_MEMO_BYTES == cache.DEFAULT_MEMO_BYTES
    assert serve.DEFAULT_RESPONSE_BYTES == cache.DEFAULT_RESPONSE_BYTES
    assert serve.ENV_METRICS_ADDRESS == metrics.ENV_ADDRESS
