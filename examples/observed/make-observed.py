"""Regenerate the observed state of the examples once every composed object exists.

Runs the function, marks every composed object as created and Ready (the OCM Component Ready
at the resolved version, reconciled at its generation) and runs it again with that observed,
until nothing new is composed: Namespaces first, then what goes into them, then the Flux
objects once the gate opens, then the Usages. Usage: python examples/observed/make-observed.py
(from the repository root).
"""

import asyncio
import sys
from pathlib import Path

from crossplane.function import logging

from function.render import dump_yaml, input_from_composition, load_docs

sys.path.insert(0, "tests")
from support.settle import converge, settle  # noqa: E402 - the tests' stand-in for a settled cluster

EXAMPLES = {"helm": "examples/xr.yaml", "kustomize": "examples/xr-kustomize.yaml"}


async def main() -> None:
    logging.configure(logging.Level.DISABLED)
    policy = input_from_composition(load_docs(["examples/composition.yaml"])[0], "composition")
    for flavour, xr_file in EXAMPLES.items():
        xr = load_docs([xr_file])[0]
        renders, _ = await converge(xr, policy)
        second = renders[-1]
        path = Path("examples/observed") / flavour / "observed.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# Observed composed resources once every object of " + xr_file + " is composed: all created\n"
            "# and Ready, the OCM Component Ready at the resolved version. Made by make-observed.py.\n"
            + dump_yaml(settle(second.resources)).removeprefix("---\n")
        )


asyncio.run(main())
