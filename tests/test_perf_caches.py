"""The performance caches (issue 11) are keyed by content or carry a TTL, and invalidate.

Every warm-path cache must give exactly what recomputing would, and change as soon as its
input changes: the ConfigData model, the compiled schema, parsed YAML (round-trip and
plain), the whole Flux mutation, the loaded component (by descriptor digest), and the tag
list (by TTL). No timing here: the benchmark suite is benchmarks/run.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from test_configdata_fluxmutation import tiny_cv

from function.api.claim import Spec
from function.cache import MB, Cache, Lru, Memos, digest, files_digest
from function.configdata.configure import validator_for
from function.configdata.fluxmutation import mutation_for
from function.configdata.model import parse_configdata
from function.configdata.yamlfile import apply, dump_file, load_file
from function.edge.fn import parse_policy
from function.edge.render import input_from_composition, load_docs
from function.edge.sources import SourceFactory, claim_repository
from function.errors import InvalidConfigData, InvalidValues
from function.ocm.images import image_table
from function.ocm.model import ComponentVersion
from function.yamlio import YamlError, load_all

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "configdata" / "backend"
D = "sha256:" + "11342fe5f5b1c4cdbb90bbff3033e909cb45cfd1a87d2323587e2e914f90ddf1"


@pytest.fixture
def memos() -> Memos:
    """Memo tables as the edge owns them, passed explicitly (nothing is memoised without)."""
    return Memos()


def cv(
    ref: str = f"r.io:5000/team/app:1@{D}", digest: str = "sha256:" + "0" * 64
) -> ComponentVersion:
    """The fluxmutation tests' one-image component, under the descriptor digest ``digest``."""
    return dataclasses.replace(tiny_cv(ref), descriptor_digest=digest)


CONFIG = """apiVersion: config.ocm.software/v1alpha1
kind: ConfigData
localization:
  - file: deploy.yaml
    image: spec.template.spec.containers[0].image
    resource: {name: image}
configuration:
  defaults: {replicas: 1, message: hello}
  schema:
    type: object
    properties: {replicas: {type: integer}, message: {type: string}}
  rules:
    - {value: (( replicas )), file: deploy.yaml, path: spec.replicas}
    - {value: (( message )), file: deploy.yaml, path: metadata.labels.message}
"""
DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app  # the app
  labels: {app: app}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: app
          image: "example.org/app:0.1"
"""


def patches(m) -> list[Any]:
    return [json.loads(p["patch"]) for p in m.kustomize_patches]


# -- the Flux mutation ---------------------------------------------------------------------


def test_mutation_is_memoised_and_equal_to_a_fresh_computation(memos):
    files = {"deploy.yaml": DEPLOY.encode()}
    first = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        files,
        {"replicas": 3},
        memos=memos,
        images=image_table(cv()),
    )
    hits = memos.mutations.stats.hits
    again = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        dict(files),
        {"replicas": 3},
        memos=memos,
        images=image_table(cv()),
    )
    assert again is first  # served from the memo (equal component, same content)
    assert memos.mutations.stats.hits == hits + 1
    memos.clear()
    fresh = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        files,
        {"replicas": 3},
        memos=memos,
        images=image_table(cv()),
    )
    assert fresh == first and fresh is not first


def test_a_mutation_evicted_as_an_object_is_unpacked_equal(memos):
    """A fleet outgrows the object table: each mutation is also kept packed, and a claim not
    seen lately gets exactly what recomputing would give, without recomputing it.
    """
    files = {"deploy.yaml": DEPLOY.encode()}

    def mutate(values: dict[str, Any]) -> Any:
        return mutation_for(
            "kustomize",
            CONFIG.encode(),
            cv(),
            files,
            values,
            memos=memos,
            images=image_table(cv()),
        )

    first = mutate({"replicas": 3})
    packed = memos.tables["packed_mutations"]
    assert len(packed) == 1
    memos.mutations.clear()  # evicted as an object, still packed
    hits = packed.stats.hits
    again = mutate({"replicas": 3})
    assert packed.stats.hits == hits + 1
    assert again == first and again is not first
    # unpacked again, not put back: a fleet that outgrew the object table does not churn it
    assert mutate({"replicas": 3}) == first and packed.stats.hits == hits + 2
    assert len(memos.mutations) == 0
    other = mutate({"replicas": 4})
    assert other != first and len(packed) == 2  # other values: another entry


@pytest.mark.parametrize(
    "change",
    [
        "configdata",
        "files",
        "values",
        "flavour-values",
        "component",
        "same-digest-other-descriptor",
        "name",
    ],
)
def test_mutation_changes_with_every_input(change: str, memos):
    files = {"deploy.yaml": DEPLOY.encode()}
    base = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        files,
        {"replicas": 3},
        memos=memos,
        images=image_table(cv()),
    )
    args: dict[str, Any] = {
        "configdata": CONFIG.encode(),
        "component": cv(),
        "files": files,
        "values": {"replicas": 3},
    }
    name = "ConfigData"
    if change == "configdata":
        args["configdata"] = CONFIG.replace("hello", "bonjour").encode()
    elif change == "files":
        args["files"] = {"deploy.yaml": DEPLOY.replace("name: app ", "name: other ").encode()}
    elif change == "values":
        args["values"] = {"replicas": 4}
    elif change == "flavour-values":
        args["values"] = {"replicas": 3, "message": "hi"}
    elif change == "component":
        args["component"] = cv(ref=f"r.io:5000/team/other:1@{D}", digest="sha256:" + "1" * 64)
    elif (
        change == "same-digest-other-descriptor"
    ):  # hand-made descriptors may share a digest string
        args["component"] = cv(ref=f"r.io:5000/team/other:1@{D}")
    elif change == "name":
        name = "ConfigData (resource other)"
        args["configdata"] = CONFIG.replace("(( message ))", "(( nope ))").encode()
    if change == "name":
        with pytest.raises(InvalidConfigData, match=r"ConfigData \(resource other\)"):
            mutation_for(
                "kustomize",
                args["configdata"],
                args["component"],
                args["files"],
                args["values"],
                configdata_name=name,
                memos=memos,
                images=image_table(args["component"]),
            )
        return
    got = mutation_for(
        "kustomize",
        args["configdata"],
        args["component"],
        args["files"],
        args["values"],
        memos=memos,
        images=image_table(args["component"]),
    )
    assert got != base
    memos.clear()
    assert got == mutation_for(
        "kustomize",
        args["configdata"],
        args["component"],
        args["files"],
        args["values"],
        memos=memos,
        images=image_table(args["component"]),
    )


def test_the_schema_violations_policy_is_part_of_the_mutation_key(memos):
    """A mutation composed under configData.schemaViolations: Warning is never served to a
    request whose policy makes the same violation Fatal."""
    files = {"deploy.yaml": DEPLOY.encode()}
    bad = {"replicas": "three"}
    warned = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        files,
        bad,
        schema_violations="Warning",
        memos=memos,
        images=image_table(cv()),
    )
    assert any("is not of type 'integer'" in w for w in warned.warnings)
    assert len(memos.mutations) == 1
    with pytest.raises(InvalidValues, match="values.replicas: 'three' is not of type 'integer'"):
        mutation_for(
            "kustomize", CONFIG.encode(), cv(), files, bad, memos=memos, images=image_table(cv())
        )
    again = mutation_for(
        "kustomize",
        CONFIG.encode(),
        cv(),
        files,
        bad,
        schema_violations="Warning",
        memos=memos,
        images=image_table(cv()),
    )
    assert again is warned


def test_values_that_json_cannot_tell_apart_are_not_memoised_together():
    from function.configdata.fluxmutation import MutationInput, _memo_key

    def key(values: Any) -> Any:
        c = cv()
        return _memo_key(
            MutationInput(
                "kustomize",
                CONFIG.encode(),
                c,
                {"deploy.yaml": DEPLOY.encode()},
                values,
                image_table(c),
            )
        )

    assert key({1: "x"}) is None  # JSON would turn the key 1 into "1": such values are not memoised
    assert key({"a": (1, 2)}) is None  # a tuple would become a list
    assert key({"1": "x"}) is not None
    assert len({key({"a": 1}), key({"a": True}), key({"a": 1.0}), key({"a": "1"})}) == 4


def test_errors_are_never_cached(memos):
    bad = CONFIG.replace("type: integer", "type: string").encode()
    files = {"deploy.yaml": DEPLOY.encode()}
    for _ in range(2):
        with pytest.raises(InvalidValues):
            mutation_for(
                "kustomize",
                bad,
                cv(),
                files,
                {"replicas": 3},
                memos=memos,
                images=image_table(cv()),
            )
    assert len(memos.mutations) == 0


def test_a_cached_mutation_is_not_changed_by_its_users():
    """compose copies what it changes; the memoised object stays what the engine computed."""
    from function.edge.fn import FunctionRunner
    from function.edge.render import render

    xr = load_docs([REPO / "examples/xr-kustomize.yaml"])[0]
    policy = input_from_composition(load_docs([REPO / "examples/composition.yaml"])[0], "c")
    policy["mirrors"][0]["path"] = str(REPO / policy["mirrors"][0]["path"])
    runner = FunctionRunner()  # owns its memo tables and passes them down every request
    outs = [asyncio.run(render(xr, policy, runner=runner)).yaml() for _ in range(3)]
    assert outs[0] == outs[1] == outs[2]
    assert runner.memos.mutations.stats.hits >= 2


# -- parsing memos ---------------------------------------------------------------------------


def test_configdata_model_follows_content(memos):
    a = parse_configdata(CONFIG.encode(), "cd", memos)
    assert parse_configdata(CONFIG.encode(), "cd", memos) is a
    b = parse_configdata(CONFIG.replace("hello", "bonjour").encode(), "cd", memos)
    assert b is not a and b.configuration.defaults["message"] == "bonjour"
    for _ in range(2):  # an invalid file is refused every time, naming the file
        with pytest.raises(InvalidConfigData, match="cd"):
            parse_configdata(CONFIG.replace("ConfigData", "Other").encode(), "cd", memos)


def test_validator_follows_the_schema(memos):
    s1 = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert validator_for(s1, memos) is validator_for(json.loads(json.dumps(s1)), memos)
    s2 = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert validator_for(s2, memos) is not validator_for(s1, memos)
    assert not validator_for(s2, memos).is_valid({"a": 1})


def test_round_trip_files_are_fresh_copies_and_follow_content(memos):
    f1 = load_file(DEPLOY, "deploy.yaml", memos=memos)
    f1.docs[0]["spec"]["replicas"] = 99
    f2 = load_file(DEPLOY, "deploy.yaml", memos=memos)
    assert f2.docs[0]["spec"]["replicas"] == 1  # the memo is not touched by an edit
    assert dump_file(f2) == DEPLOY  # comments and quotes survive the copy
    f3 = load_file(DEPLOY.replace("replicas: 1", "replicas: 2"), "deploy.yaml", memos=memos)
    assert f3.docs[0]["spec"]["replicas"] == 2
    with pytest.raises(YamlError):
        load_file("a: [", "broken.yaml", memos=memos)
    with pytest.raises(YamlError):
        load_file("a: [", "broken.yaml", memos=memos)


def test_applying_to_a_copy_equals_applying_to_a_fresh_parse(memos):
    from function.configdata.engine import plan

    cd = parse_configdata(CONFIG.encode(), memos=memos)
    c = cv()
    p = plan(cd, component=c, values={"replicas": 5}, images=image_table(c), memos=memos)
    outs = []
    for _ in range(2):
        memos.yaml_files.clear() if not outs else None
        f = load_file(DEPLOY, "deploy.yaml", memos=memos)
        for sub in p.substitutions:
            apply(f, sub)
        outs.append(dump_file(f))
    assert outs[0] == outs[1] and "replicas: 5" in outs[0]


def test_plain_yaml_streams_are_fresh_copies(memos):
    a = load_all("a: {b: [1, 2]}\n---\nc: 1\n", "x", memos=memos)
    a[0]["a"]["b"].append(3)
    assert load_all("a: {b: [1, 2]}\n---\nc: 1\n", "x", memos=memos) == [
        {"a": {"b": [1, 2]}},
        {"c": 1},
    ]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(6)
    )
    for _ in range(2):  # the alias-bomb cap still holds, on every call
        with pytest.raises(YamlError, match="alias bomb"):
            load_all(bomb, "bomb.yaml", memos=memos)


def test_memo_is_bounded():
    m = Lru("t", max_entries=3, max_bytes=1000)
    for i in range(5):
        m.put(i, i, 10)
    assert len(m) == 3 and m.get(0) is None and m.get(4) == 4 and m.stats.evictions == 2
    m.put("big", 1, 600)
    m.put("big2", 1, 600)
    assert m.get("big") is None and m.size_bytes <= 1000


def test_a_doorkeeper_keeps_a_scan_out_of_a_full_table():
    m = Lru("t", max_entries=100, doorkeeper=True)
    for i in range(100):  # room: kept at once
        m.put(i, i, 1)
    assert len(m) == 100 and m.stats.refused == 0
    # A round-robin over more keys than the table holds: each key comes back 1,000 puts
    # later, further than the doorkeeper remembers, so none evicts a resident.
    for _ in range(3):
        for i in range(1000, 2000):
            assert m.get(i) is None
            m.put(i, i, 1)
    assert m.stats.evictions == 0 and m.stats.refused == 3000
    assert all(m.get(i) == i for i in range(100))  # what was kept still answers
    # A key put twice while remembered is kept, evicting the least recent.
    m.put("hot", 1, 1)
    assert m.get("hot") is None
    m.put("hot", 1, 1)
    assert m.get("hot") == 1 and m.stats.evictions == 1 and len(m) == 100
    # By bytes as well as entries.
    b = Lru("b", max_bytes=10, doorkeeper=True)
    b.put("x", 1, 10)
    b.put("y", 2, 5)
    assert b.get("y") is None and b.get("x") == 1
    b.put("y", 2, 5)
    assert b.get("y") == 2 and b.get("x") is None


def test_a_fleet_larger_than_the_per_claim_tables_does_not_turn_them_over():
    # specs, observed and claim_answers are written per claim on every request: past their
    # size, a fleet polled round-robin would evict an entry on every request and read none.
    memos = Memos(4 * MB)
    for name in ("specs", "observed", "claim_answers"):
        t = memos.tables[name]
        n = 0
        while t.stats.evictions == 0 and t.stats.refused == 0:
            t.put(("claim", n), n, 20_000)
            n += 1
        for key in range(3 * n, 6 * n):
            t.put(("claim", key), key, 20_000)
        assert t.stats.evictions == 0 and t.stats.refused > 2 * n, name
    assert memos.tables["packed_structs"].stats.refused == 0


def test_identity_digests_follow_the_object_and_are_bounded():
    m = Memos()
    m.digests.max_entries, m.digests.max_bytes = 2, 100
    calls = []

    def compute(o: Any) -> bytes:
        calls.append(o)
        return files_digest(o) if isinstance(o, MappingProxyType) else digest(o)

    a, b, c = (MappingProxyType({"f": bytes([i]) * 10}) for i in range(3))
    assert m.digest_of(a, compute) == files_digest(a) and m.digest_of(a, compute) == files_digest(a)
    assert len(calls) == 1  # the same object: hashed once
    twin = MappingProxyType(dict(a))
    assert (
        m.digest_of(twin, compute) == files_digest(a) and len(calls) == 2
    )  # an equal object is hashed itself
    m.digest_of(b, compute), m.digest_of(c, compute)
    m.digest_of(a, compute)
    assert len(calls) == 5  # a was evicted (two entries at most)
    big = b"x" * 200
    (
        m.digest_of(big, compute),
        m.digest_of(big, compute),
    )  # larger than the budget: computed, never kept
    assert len(calls) == 7 and len(m.digests) <= 2


# -- the loaded component (descriptor digest) and the tag list (TTL) -------------------------


class CountingSource:
    """Wraps a real source: counts reads and can pretend the descriptor was re-pushed."""

    def __init__(self, inner: Any, digest: str | None) -> None:
        self.inner, self.digest, self.blobs, self.lists = inner, digest, 0, 0

    async def list_versions(self, component: str) -> list[str]:
        self.lists += 1
        return await self.inner.list_versions(component)

    async def get(self, component: str, version: str) -> ComponentVersion:
        got = await self.inner.get(component, version)
        return dataclasses.replace(got, descriptor_digest=self.digest) if self.digest else got

    async def blob(self, cv: ComponentVersion, digest: str, media_type: str) -> bytes:
        self.blobs += 1
        return await self.inner.blob(cv, digest, media_type)


class Factory(SourceFactory):
    digest: str | None = None
    last: CountingSource | None = None

    def open(self, *args: Any, **kwargs: Any) -> Any:
        self.last = CountingSource(super().open(*args, **kwargs), self.digest)
        return self.last


def test_loaded_component_is_cached_by_descriptor_digest():
    xr = load_docs([REPO / "examples/xr.yaml"])[0]
    policy = parse_policy(
        input_from_composition(load_docs([REPO / "examples/composition.yaml"])[0], "c")
    )
    spec = Spec.model_validate(xr["spec"])
    repo = claim_repository(spec)
    f = Factory(cache=Cache())

    def load() -> Any:
        return asyncio.run(f.load(spec, policy, repo, status={}, credentials={}, base_dir=REPO))

    first = load()
    assert f.last.blobs > 0
    second = load()
    assert second is first and f.last.blobs == 0  # warm: nothing read, nothing extracted
    f.digest = "sha256:" + "ab" * 32  # the same version re-pushed with another descriptor
    third = load()
    assert third is not first and f.last.blobs > 0
    assert third.contents == first.contents


def test_tag_list_expires_after_its_ttl():
    now = [0.0]
    cache = Cache(ttl=60, clock=lambda: now[0])
    calls = []

    async def fetch() -> tuple[str, ...]:
        calls.append(1)
        return ("1.0.0",)

    async def go() -> None:
        await cache.short_lived(("tags", "h", "r"), fetch)
        now[0] = 59.0
        await cache.short_lived(("tags", "h", "r"), fetch)
        assert len(calls) == 1
        now[0] = 60.5
        await cache.short_lived(("tags", "h", "r"), fetch)
        assert len(calls) == 2

    asyncio.run(go())


# -- who owns the memo tables ---------------------------------------------------------------


def test_nothing_is_memoised_without_bound_tables(memos):
    """The tables are the edge's: outside a request (the CLI, a bare call) every call computes."""

    def twice(m: Memos | None) -> tuple[Any, Any]:
        return parse_configdata(CONFIG.encode(), "cd", m), parse_configdata(
            CONFIG.encode(), "cd", m
        )

    a, b = twice(None)
    assert a == b and a is not b
    a, b = twice(memos)  # with the fixture's tables passed
    assert a is b


def test_memo_budget_is_the_operators():
    m = Memos(max_bytes=10 * 1024 * 1024)
    assert sum(t.max_bytes for t in m.tables.values()) <= 10 * 1024 * 1024
    assert all(t.max_bytes > 0 for t in m.tables.values())
