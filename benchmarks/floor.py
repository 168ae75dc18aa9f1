"""The floor: a do-nothing composition function on the same SDK, returning the same objects.

It answers every RunFunction with the desired state sack8s computed for the workload,
precomputed (loaded once from a JSON file), through the same conversions sack8s's
``RunFunction`` does per request: ``response.to(req)``, then ``resource.update`` (dict →
protobuf Struct) for every composed resource and the XR status, readiness, results and the
condition. Served with the SDK's standard server (``crossplane.function.cli.run``), as sack8s.

    python benchmarks/floor.py --answer ANSWER.json --insecure --address 127.0.0.1:PORT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from crossplane.function import cli as sdkcli
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class Floor(grpcv1.FunctionRunnerServiceServicer):
    def __init__(self, answer: dict) -> None:
        self.resources = answer["resources"]
        self.ready = answer["ready"]
        self.status = answer["status"]
        self.results = answer.get("results", [])
        self.conditions = answer.get("conditions", [])
        self.composite_ready = answer.get("composite_ready", True)

    async def RunFunction(self, req: fnv1.RunFunctionRequest, _=None) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        for key in sorted(self.resources):
            resource.update(rsp.desired.resources[key], self.resources[key])
            rsp.desired.resources[key].ready = (
                fnv1.READY_TRUE if self.ready[key] else fnv1.READY_FALSE
            )
        resource.update(rsp.desired.composite, {"status": self.status})
        if not self.composite_ready:
            rsp.desired.composite.ready = fnv1.READY_FALSE
        for r in self.results:
            rsp.results.append(
                fnv1.Result(
                    severity=r["severity"],
                    reason=r["reason"],
                    message=r["message"],
                    target=fnv1.TARGET_COMPOSITE_AND_CLAIM,
                )
            )
        for c in self.conditions:
            rsp.conditions.append(
                fnv1.Condition(
                    type=c["type"],
                    status=c["status"],
                    reason=c["reason"],
                    message=c["message"],
                    target=fnv1.TARGET_COMPOSITE_AND_CLAIM,
                )
            )
        return rsp


@click.command()
@sdkcli.standard_options
@click.option("--answer", type=click.Path(exists=True, dir_okay=False), required=True)
def main(answer: str, **kwargs: object) -> None:
    sdkcli.run(Floor(json.loads(Path(answer).read_text())), **kwargs)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
