#!/usr/bin/env python3
"""Regenerate the observed state of the bundled examples once every composed object exists.

    python examples/observed/make-observed.py           # rewrite examples/observed/*/observed.yaml
    python examples/observed/make-observed.py --check   # exit 1 if a file differs from a fresh run

Follows each example's reconciles with the cluster stand-in that ``sack8s render --settle``
uses (``function/edge/settle.py``): every composed object created and Ready, the OCM Component
Ready at the resolved version, until nothing new is composed. For your own claim, use
``sack8s render XR --composition COMP --settle`` instead of this script. Run from the
repository root.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from crossplane.function import logging

from function.edge.render import claim_to_xr, dump_yaml, input_from_composition, load_docs
from function.edge.settle import converge, settle

HERE = Path("examples/observed")
# name: (XR or claim, Composition, required resources)
EXAMPLES = {
    "helm": ("examples/xr.yaml", "examples/composition.yaml", None),
    "kustomize": ("examples/xr-kustomize.yaml", "examples/composition.yaml", None),
    "claim": ("examples/claim.yaml", "examples/composition-claim.yaml", "examples/required"),
}


async def files() -> dict[Path, str]:
    """Every observed file and its content, computed (nothing written)."""
    logging.configure(logging.Level.DISABLED)
    out: dict[Path, str] = {}
    for flavour, (xr_file, composition, required) in EXAMPLES.items():
        policy = input_from_composition(load_docs([composition])[0], composition)
        xr = claim_to_xr(load_docs([xr_file])[0])
        result = await converge(xr, policy, required=load_docs([required]) if required else [])
        if not result.settled:
            raise SystemExit(f"{xr_file}: did not settle: {result.stages[-1].lines()}")
        if flavour == "helm":  # after the first reconcile: the Namespaces exist, Flux waits
            first = result.renders[0]
            out[HERE / "helm-gated" / "observed.yaml"] = (
                "# Observed composed resources after the first reconcile of " + xr_file + ": the\n"
                "# Namespaces. Made by make-observed.py.\n"
                + dump_yaml(settle(first.resources, first.xr.get("status"))).removeprefix("---\n")
            )
        last = result.last
        out[HERE / flavour / "observed.yaml"] = (
            "# Observed composed resources once every object of "
            + xr_file
            + " is composed: all created\n"
            "# and Ready, the OCM Component Ready at the resolved version. "
            "Made by make-observed.py.\n"
            + dump_yaml(settle(last.resources, last.xr.get("status"))).removeprefix("---\n")
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare the files with a fresh run, write nothing"
    )
    args = parser.parse_args()
    wanted = asyncio.run(files())
    if args.check:
        stale = [str(p) for p, text in wanted.items() if not p.exists() or p.read_text() != text]
        if stale:
            print(f"differ from a fresh run: {', '.join(stale)}", file=sys.stderr)
            return 1
        print("examples/observed is what make-observed.py writes")
        return 0
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
