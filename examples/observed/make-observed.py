"""Regenerate the observed state used for a second reconcile of the examples.

Runs the function twice (the second time with the first result observed, so the gate opens),
then marks every composed object as created and Ready, and the OCM Component Ready at the
resolved version. Usage: python examples/observed/make-observed.py (from the repository root).
"""

import asyncio
import copy
from pathlib import Path

from crossplane.function import logging

from function.render import dump_yaml, input_from_composition, load_docs, render

EXAMPLES = {"helm": "examples/xr.yaml", "kustomize": "examples/xr-kustomize.yaml"}


def settle(resources):
    out = []
    for obj in resources:
        o = copy.deepcopy(obj)
        if o["kind"] not in ("Namespace", "ServiceAccount", "Role", "RoleBinding"):
            o["status"] = {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Ready",
                        "message": "Ready",
                        "lastTransitionTime": "2026-12-01T00:00:00Z",
                    }
                ]
            }
            if o["kind"] == "Component":
                o["status"]["component"] = {
                    "component": o["spec"]["component"],
                    "version": o["spec"]["semver"],
                    "repositorySpec": {
                        "type": "OCIRegistry",
                        "baseUrl": "http://127.0.0.1:5000",
                        "subPath": "source",
                    },
                }
        out.append(o)
    return out


async def main() -> None:
    logging.configure(logging.Level.DISABLED)
    policy = input_from_composition(load_docs(["examples/composition.yaml"])[0], "composition")
    for flavour, xr_file in EXAMPLES.items():
        xr = load_docs([xr_file])[0]
        first = await render(xr, policy)
        second = await render(xr, policy, observed=settle(first.resources))
        path = Path("examples/observed") / flavour / "observed.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# Observed composed resources after the first reconciles of "
            + xr_file
            + ": all created\n"
            "# and Ready, the OCM Component Ready at the resolved version. "
            "Made by make-observed.py.\n"
            + dump_yaml(settle(second.resources)).removeprefix("---\n")
        )


asyncio.run(main())
