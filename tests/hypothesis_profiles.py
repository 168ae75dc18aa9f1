"""Hypothesis profiles and shared plumbing for the reliability/security property tests.

Profiles (``SACK8S_HYPOTHESIS_PROFILE``, default ``short``):

``short``  the default test run: a few dozen examples per property, seconds in total.
``long``   CI's reliability stage: 10,000 examples per property (50 steps per state-machine
           run, 10,000 runs would be too many: ``long`` uses 300 state-machine runs) with a
           wall-clock cap per property (``SACK8S_HYPOTHESIS_BUDGET`` seconds, default 180):
           once a property has run that long, the remaining examples are drawn but not
           executed (``Budget.spent``) and the count actually executed is printed (run with ``-s``).

Profiles are applied with ``@settings(PROFILE)`` on our own tests only, never loaded
globally, so other modules' Hypothesis settings are not changed by importing this one.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

_COMMON = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
settings.register_profile("short", max_examples=25, stateful_step_count=12, **_COMMON)
settings.register_profile("long", max_examples=10_000, stateful_step_count=50, **_COMMON)

PROFILE_NAME = os.environ.get("SACK8S_HYPOTHESIS_PROFILE", "short")
if PROFILE_NAME not in ("short", "long"):
    raise RuntimeError(f"SACK8S_HYPOTHESIS_PROFILE must be short or long, not {PROFILE_NAME!r}")
PROFILE = settings.get_profile(PROFILE_NAME)
LONG = PROFILE_NAME == "long"
# State machines: each run is up to stateful_step_count reconciles.
STATEFUL = settings(PROFILE, max_examples=300 if LONG else 10)
BUDGET_SECONDS = float(os.environ.get("SACK8S_HYPOTHESIS_BUDGET", "180"))


class Budget:
    """Counts executed examples of one property and stops executing them past the time cap."""

    registry: dict[str, Budget] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self.started: float | None = None
        self.executed = 0
        self.skipped = 0
        self.outcomes: dict[str, int] = {}
        self.failed = False
        Budget.registry[name] = self

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def spent(self) -> bool:
        if self.failed:  # once an example failed, shrinking must replay examples: no cap any more
            return False
        now = time.monotonic()
        if self.started is None:
            self.started = now
        self.last = now
        if now - self.started > BUDGET_SECONDS:
            self.skipped += 1
            return True
        self.executed += 1
        return False

    def report(self) -> str:
        took = getattr(self, "last", time.monotonic()) - (self.started or time.monotonic())
        return (
            f"{self.name}: {self.executed} examples executed, {self.skipped} past the {BUDGET_SECONDS:g}s cap, "
            f"{took:.1f}s, outcomes {dict(sorted(self.outcomes.items()))}"
        )

    def capped(self, fn: Any) -> Any:
        """Decorate a property (under ``@given``): skip examples past the cap; once one fails,
        turn the cap off for good so Hypothesis can replay and shrink it."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.spent():
                return None
            from hypothesis.errors import HypothesisException

            try:
                return fn(*args, **kwargs)
            except HypothesisException:  # reject()/assume(): not a failure
                raise
            except Exception:  # not StopTest (a BaseException Hypothesis uses internally)
                self.failed = True
                raise

        return wrapper

    @classmethod
    def print_all(cls) -> None:
        for b in cls.registry.values():
            if b.started is not None:
                print(f"[hypothesis {PROFILE_NAME}] {b.report()}", file=sys.__stderr__)


# -- the bundled example --------------------------------------------------------------------


@functools.cache
def _example() -> tuple[dict[str, Any], dict[str, Any]]:
    from function.edge.render import input_from_composition, load_docs

    xr = load_docs([REPO / "examples/xr.yaml"])[0]
    policy = input_from_composition(
        load_docs([REPO / "examples/composition.yaml"])[0], "composition"
    )
    policy["mirrors"][0]["path"] = str(REPO / policy["mirrors"][0]["path"])
    return xr, policy


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundled XR and policy (mirror path absolute), fresh copies."""
    xr, policy = _example()
    return copy.deepcopy(xr), copy.deepcopy(policy)


def as_claim(
    xr: dict[str, Any], namespace: str = "team-a", name: str = "podinfo", xr_name: str | None = None
) -> dict[str, Any]:
    """The bundled XR as Crossplane creates it for a claim ``namespace/name``, its target
    namespaces moved into the claim's tenant space (``<namespace>--<old name>``, tenancy.py)."""
    xr["metadata"]["name"] = xr_name or xr["metadata"]["name"]
    xr["metadata"]["labels"] = {
        "crossplane.io/claim-name": name,
        "crossplane.io/claim-namespace": namespace,
    }
    # The claim's identity is spec.claimRef (Crossplane's claim controller writes it); the
    # labels above are for people and never count (identity.py).
    xr["spec"]["claimRef"] = {
        "apiVersion": "platform.example.org/v1alpha1",
        "kind": "SACK8sComponentVersion",
        "name": name,
        "namespace": namespace,
    }
    for ns in xr["spec"].get("namespaces") or []:
        ns["name"] = f"{namespace}--{ns['name']}"
    for s in xr["spec"].get("secrets") or []:
        if s.get("namespace"):
            s["namespace"] = f"{namespace}--{s['namespace']}"
    return xr


@functools.cache
def observed_helm() -> tuple[dict[str, Any], ...]:
    from function.edge.render import load_docs

    return tuple(load_docs([REPO / "examples/observed/helm"]))


# -- schemas ----------------------------------------------------------------------------------


def crds_dir() -> Path:
    from conftest import CRDS

    return CRDS


@functools.cache
def crd_validators() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> a jsonschema validator for the CRD version's openAPIV3Schema."""
    import jsonschema
    import yaml

    out: dict[tuple[str, str], Any] = {}
    for f in sorted(crds_dir().glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group = doc["spec"]["group"]
            kind = doc["spec"]["names"]["kind"]
            for v in doc["spec"]["versions"]:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    cls = jsonschema.validators.validator_for(
                        schema, default=jsonschema.Draft7Validator
                    )
                    out[(f"{group}/{v['name']}", kind)] = cls(schema)
    return out


CORE_KINDS = {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret"}


@functools.cache
def _core_validator(api_version: str, kind: str) -> Any:
    """kubernetes_validate's strict 1.32 schema for a core kind, compiled once.

    ``kubernetes_validate.validate`` re-reads its 5 MB definitions file on every call; this
    builds the same Draft 2020-12 validator (same files, same registry) once per kind.
    """
    import re

    import jsonschema
    import kubernetes_validate.utils as kvu
    from referencing import Registry, Resource

    versions = [v for v in kvu.all_versions() if kvu.major_minor(v) <= "1.32"]
    schema_dir = f"v{versions[-1]}-local-strict"
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = kvu.schema_contents(
        f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{api}.json", "1.32"
    )
    defs = kvu.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", "1.32")
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.lru_cache(maxsize=4096)
def _core_valid(text: str) -> str | None:
    obj = json.loads(text)
    errors = list(_core_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj))
    if errors:
        return "; ".join(f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in errors[:3])
    return None


@functools.lru_cache(maxsize=4096)
def _crd_valid(text: str) -> str | None:
    obj = json.loads(text)
    v = crd_validators().get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if v is None:
        return f"no CRD schema for {obj.get('apiVersion')} {obj.get('kind')}"
    errors = sorted(v.iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        return "; ".join(f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in errors[:3])
    return None


def schema_problem(obj: dict[str, Any]) -> str | None:
    """Why ``obj`` does not pass its upstream schema, or None."""
    text = json.dumps(obj, sort_keys=True)
    if obj.get("kind") in CORE_KINDS and "/" not in obj.get("apiVersion", "v1").replace(
        "rbac.authorization.k8s.io/", ""
    ):
        return _core_valid(text)
    if obj.get("apiVersion", "").startswith("rbac.authorization.k8s.io/"):
        return _core_valid(text)
    return _crd_valid(text)
