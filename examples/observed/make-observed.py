"""Regenerate the observed state of the examples once every composed object exists.

Runs the function, marks every composed object as created and Ready (the OCM Component Ready
at the resolved version, reconciled at its generation, reporting the normalised descriptor
digest the controller computes, which the function reports as status.component.normalisedDigest) and runs it again with that observed,
until nothing new is composed: Namespaces first, then what goes into them, then the Flux
objects once the gate opens, then the Usages. Usage: python examples/observed/make-observed.py
(from the repository root).
"""

import asyncio
import sys
from pathlib import Path

from crossplane.function import logging

from function.render import claim_to_xr, dump_yaml, input_from_composition, load_docs

sys.path.insert(0, "tests")
from support.settle import converge, digest_of, settle

# name: (XR or claim, Composition, required resources)
EXAMPLES = {
    "helm": ("examples/xr.yaml", "examples/composition.yaml", None),
    "kustomize": ("examples/xr-kustomize.yaml", "examples/composition.yaml", None),
    "claim": ("examples/claim.yaml", "examples/composition-claim.yaml", "examples/required"),
}


async def main() -> None:
    logging.configure(logging.Level.DISABLED)
    for flavour, (xr_file, composition, required) in EXAMPLES.items():
        policy = input_from_composition(load_docs([composition])[0], composition)
        xr = claim_to_xr(load_docs([xr_file])[0])
        renders, _ = await converge(xr, policy, required=load_docs([required]) if required else [])
        last = renders[-1]
        path = Path("examples/observed") / flavour / "observed.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        if flavour == "helm":  # after the first reconcile: the Namespaces exist, Flux waits
            gated = Path("examples/observed/helm-gated/observed.yaml")
            gated.parent.mkdir(parents=True, exist_ok=True)
            gated.write_text(
                "# Observed composed resources after the first reconcile of " + xr_file + ": the\n"
                "# Namespaces. Made by make-observed.py.\n"
                + dump_yaml(settle(renders[0].resources, digest_of(renders[0]))).removeprefix(
                    "---\n"
                )
            )
        path.write_text(
            "# Observed composed resources once every object of "
            + xr_file
            + " is composed: all created\n"
            "# and Ready, the OCM Component Ready at the resolved version. "
            "Made by make-observed.py.\n"
            + dump_yaml(settle(last.resources, digest_of(last))).removeprefix("---\n")
        )


asyncio.run(main())
