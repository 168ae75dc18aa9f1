"""How long a ``sack8s`` command takes from exec to exit: the startup phase of the benchmark.

A service team runs ``sack8s localize``/``check`` in a loop in CI, so start-up (mostly imports
before any work) is what they wait for. Each command is started as a whole process, RUNS times
after WARMUP uncounted runs; wall time is a monotonic clock around spawn and reap, user and
system seconds are the kernel's accounting of the reaped child (``os.wait4``). Figures are
min/median/max; quote the median. With a baseline source tree (``--startup-baseline DIR``, e.g.
``git archive <commit> | tar -x -C DIR``) each command also runs against that tree, A and B in
turn, and the ratio is taken pair by pair so a drifting machine cannot skew it.

    .venv/bin/python benchmarks/run.py --phases startup [--startup-baseline DIR] [--quick]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "component"
SOURCE = f"{EXAMPLE / 'ctf'}//acme.org/sack8s/podinfo:6.2.0"
CD = str(EXAMPLE / "inputs" / "config" / "config.yaml")


def sack8s(*args: str) -> list[str]:
    """The console script a team runs (this virtualenv's ``bin/sack8s``)."""
    return [str(Path(sys.executable).parent / "sack8s"), *args]


#: (label, argv, in the baseline too). Every one exits 0 on the bundled example.
COMMANDS: list[tuple[str, list[str], bool]] = [
    ("python -c pass (interpreter floor)", [sys.executable, "-c", "pass"], True),
    ("sack8s --help", sack8s("--help"), True),
    ("sack8s xrd", sack8s("xrd"), True),
    (
        "sack8s localize (example, Kustomize file)",
        sack8s(
            "localize",
            "--config-data",
            CD,
            "--component",
            SOURCE,
            "--root",
            str(EXAMPLE / "inputs" / "kustomize"),
            "deployment.yaml",
        ),
        True,
    ),
    (
        "sack8s configure (example, values.yaml)",
        sack8s(
            "configure",
            "--config-data",
            CD,
            "--values",
            str(REPO / "examples" / "required" / "values-configmap.yaml"),
            "--root",
            str(EXAMPLE / "inputs" / "chart" / "podinfo"),
            "values.yaml",
        ),
        True,
    ),
    ("sack8s inspect (example CTF)", sack8s("inspect", str(EXAMPLE / "ctf")), True),
    (
        "sack8s check (example component)",
        sack8s("check", "--config-data", CD, "--component", SOURCE),
        False,
    ),
    (
        "sack8s render (Helm example)",
        sack8s(
            "render",
            str(REPO / "examples" / "xr.yaml"),
            "--composition",
            str(REPO / "examples" / "composition.yaml"),
        ),
        True,
    ),
    ("sack8s serve --help", sack8s("serve", "--help"), True),
]


@dataclass
class Run:
    wall: float
    cpu: float
    rc: int


def run_once(argv: list[str], env: dict[str, str]) -> Run:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, usage.ru_utime + usage.ru_stime, proc.returncode)


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(
            tree
        )  # ahead of the editable install: that tree's `function` package
    return env


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def measure(runs: int = 10, warmup: int = 1, baseline: Path | None = None) -> dict[str, dict]:
    """{label: {"after": {wall, cpu}, "before": {...}?, "ratio_wall"?, "ratio_cpu"?, "rc": [...]}}.

    Every command in COMMANDS, RUNS times after WARMUP, paired with the baseline when given.
    """
    out: dict[str, dict] = {}
    env_a, env_b = _env(None), _env(baseline)
    for label, argv, in_baseline in COMMANDS:
        with_b = baseline is not None and in_baseline
        for _ in range(warmup):
            run_once(argv, env_a)
            if with_b:
                run_once(argv, env_b)
        a: list[Run] = []
        b: list[Run] = []
        for _ in range(runs):
            a.append(run_once(argv, env_a))
            if with_b:
                b.append(run_once(argv, env_b))
        entry: dict = {
            "after": {"wall_s": _stats([r.wall for r in a]), "cpu_s": _stats([r.cpu for r in a])},
            "exit_codes": sorted({r.rc for r in a}),
        }
        if with_b:
            entry["before"] = {
                "wall_s": _stats([r.wall for r in b]),
                "cpu_s": _stats([r.cpu for r in b]),
            }
            entry["before_exit_codes"] = sorted({r.rc for r in b})
            entry["ratio_wall"] = statistics.median(
                x.wall / y.wall for x, y in zip(a, b, strict=False)
            )
            entry["ratio_cpu"] = statistics.median(
                x.cpu / y.cpu for x, y in zip(a, b, strict=False)
            )
        out[label] = entry
    return out


def table(result: dict[str, dict]) -> str:
    """A Markdown table: median (min–max) per command, after and, when measured, before."""
    has_b = any("before" in e for e in result.values())
    head = "| command | wall s | CPU s |" + (
        " before: wall s | before: CPU s | after/before (wall, CPU) |" if has_b else ""
    )
    sep = "|---|---|---|" + ("---|---|---|" if has_b else "")
    rows = [head, sep]

    def cell(s: dict[str, float]) -> str:
        return f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f})"

    for label, e in result.items():
        bad = "" if e["exit_codes"] == [0] else f" (exit {e['exit_codes']})"
        row = f"| {label}{bad} | {cell(e['after']['wall_s'])} | {cell(e['after']['cpu_s'])} |"
        if has_b:
            if "before" in e:
                row += (
                    f" {cell(e['before']['wall_s'])} | {cell(e['before']['cpu_s'])} | "
                    f"{e['ratio_wall']:.2f}, {e['ratio_cpu']:.2f} |"
                )
            else:
                row += " – | – | – |"
        rows.append(row)
    return "\n".join(rows)
