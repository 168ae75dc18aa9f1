"""Regenerate the observed state of the examples once every composed object exists.

Runs the function, marks every composed object as created and Ready (the OCM Component Ready
at the resolved version, reconciled at its generation) and runs it again with that observed,
until nothing new is composed: Namespaces first, then what goes into them, then the Flux
objects once the gate opens, then the Usages. Usage: python examples/observed/make-observed.py
(from the repository root).
"""

import asyncio

from crossplane.function import logging
import copy
from pathlib import Path

from function.render import dump_yaml, input_from_composition, load_docs, render

EXAMPLES = {"helm": "examples/xr.yaml", "kustomize": "examples/xr-kustomize.yaml"}


def settle(resources):
    out = []
    for obj in resources:
        o = copy.deepcopy(obj)
        o["metadata"]["generation"] = 1
        if o["kind"] not in ("Namespace", "ServiceAccount", "Role", "RoleBinding"):
            o["status"] = {
                "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "Ready", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
                "observedGeneration": 1,
            }
            if o["kind"] == "Component":
                o["status"]["component"] = {
                    "component": o["spec"]["component"],
                    "version": o["spec"]["semver"],
                    "repositorySpec": {"type": "OCIRegistry", "baseUrl": "http://127.0.0.1:5000", "subPath": "source"},
                }
        out.append(o)
    return out


async def main() -> None:
    logging.configure(logging.Level.DISABLED)
    policy = input_from_composition(load_docs(["examples/composition.yaml"])[0], "composition")
    for flavour, xr_file in EXAMPLES.items():
        xr = load_docs([xr_file])[0]
        out = await render(xr, policy)
        for _ in range(8):
            again = await render(xr, policy, observed=settle(out.resources))
            if [r["metadata"]["annotations"] for r in again.resources] == [r["metadata"]["annotations"] for r in out.resources]:
                break
            out = again
        second = out
        path = Path("examples/observed") / flavour / "observed.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# Observed composed resources once every object of " + xr_file + " is composed: all created\n"
            "# and Ready, the OCM Component Ready at the resolved version. Made by make-observed.py.\n"
            + dump_yaml(settle(second.resources)).removeprefix("---\n")
        )


asyncio.run(main())
