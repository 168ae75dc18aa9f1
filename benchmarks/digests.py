#!/usr/bin/env python3
"""What the resource digest checks cost a cold reconcile (docs/security.md, "Resource digests").

    .venv/bin/python benchmarks/digests.py [--rounds 40]

Two figures per bundled example (Helm: chart + ConfigData; Kustomize: manifests-gz +
ConfigData, read from examples/component/ctf):

* the checks alone: the work a cold reconcile adds (``digests.check`` on every blob read, and
  the re-verification of the layer an OCI chart manifest names), repeated in a loop, CPU time
  per reconcile, and the bytes they hash;
* whole cold reconciles through RunFunction, each with a fresh FunctionRunner (empty caches),
  with the checks and without them (``SourceFactory(verify_digests=False)``, what
  ``--skip-digest-check`` does), interleaved: the median CPU time of each, to show the checks
  against the rest of a reconcile.

CPU time (``time.process_time``), not wall time: a busy machine stretches neither. A warm
reconcile reuses the verified load (cached by descriptor digest) and hashes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CTF = REPO / "examples/component/ctf"
READ = {"helm": ("chart", "config"), "kustomize": ("manifests-gz", "config")}


def checks_alone(flavour: str, loops: int) -> tuple[float, int]:
    """CPU seconds of the checks of one cold load, and the bytes they hash."""
    from function.ocm import digests
    from function.ocm.ctf import CtfSource
    from function.ocm.layout import verify_digest

    cv = asyncio.run(CtfSource(CTF).get("acme.org/sack8s/podinfo", "6.2.0"))
    work = []
    for res in cv.descriptor.resources:
        if res.name in READ[flavour]:
            ref = str(res.access["localReference"])
            data = (CTF / "blobs" / ref.replace(":", ".", 1)).read_bytes()
            mt = str(res.access.get("mediaType"))
            layer = None
            if "manifest" in mt:
                digest = json.loads(data)["layers"][0]["digest"]
                layer = (digest, (CTF / "blobs" / digest.replace(":", ".", 1)).read_bytes())
            work.append((res, data, mt, layer))
    hashed = sum(len(d) + (len(la[1]) if la else 0) for _, d, _, la in work)
    started = time.process_time()
    for _ in range(loops):
        for res, data, mt, layer in work:
            digests.check("benchmark", res, data, mt)
            if layer is not None:
                verify_digest(layer[1], layer[0], "benchmark")
    return (time.process_time() - started) / loops, hashed


def main() -> int:
    from crossplane.function import logging as sdklogging

    from function.cache import Cache
    from function.edge.fn import FunctionRunner
    from function.edge.render import input_from_composition, load_docs, render
    from function.edge.sources import SourceFactory

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    sdklogging.configure(sdklogging.Level.DISABLED)
    (comp,) = load_docs([REPO / "examples/composition.yaml"])
    policy = input_from_composition(comp, "examples/composition.yaml")
    policy["mirrors"][0]["path"] = str(CTF)
    cases = {
        "helm": ("examples/xr.yaml", "examples/observed/helm"),
        "kustomize": ("examples/xr-kustomize.yaml", "examples/observed/kustomize"),
    }

    def once(flavour: str, *, verify: bool) -> float:
        xr_file, observed = cases[flavour]
        (xr,) = load_docs([REPO / xr_file])
        runner = FunctionRunner(sources=SourceFactory(cache=Cache(), verify_digests=verify))
        started = time.process_time()
        out = asyncio.run(render(xr, policy, observed=load_docs([REPO / observed]), runner=runner))
        spent = time.process_time() - started
        if out.fatal is not None:
            raise SystemExit(f"{flavour}: {out.fatal.message}")
        return spent

    for flavour in cases:
        alone, hashed = checks_alone(flavour, 2000)
        once(flavour, verify=True)  # imports and first-use work out of the measurement
        on, off = [], []
        for _ in range(args.rounds):
            on.append(once(flavour, verify=True))
            off.append(once(flavour, verify=False))
        print(
            f"{flavour}: checks alone {alone * 1e6:.1f} µs CPU per cold reconcile "
            f"({hashed} bytes hashed); whole cold reconcile, median of {args.rounds}: "
            f"{statistics.median(on) * 1000:.1f} ms with the checks, "
            f"{statistics.median(off) * 1000:.1f} ms without"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
