"""The seam between the ConfigData engine and the composition core.

The core asks one question: "given this ConfigData, component, deployable content, values
and resolved image references (one frozen :class:`MutationInput`), what goes into the Flux
object?" The answer (:func:`mutate`) is a :class:`FluxMutation`: Helm values
for a HelmRelease, or patches for a Kustomization, plus a trace of every substitution (for
XR status) and any warnings. No I/O happens here.

One ConfigData often serves several deployables (a chart and a Kustomize directory), so a
rule whose ``file`` is not in this deployable is skipped with a reason, not an error; if
rules exist but none applies, that is a warning (probably a wrong ``file``).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import zlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from function import budgets
from function.cache import Memos, approx_size, digest, files_digest
from function.configdata import helm, kustomize
from function.configdata.configure import SchemaViolations
from function.configdata.engine import plan
from function.configdata.localize import ImagePairDefect, enforce_image_pairs, image_pair_defects
from function.configdata.model import DUPLICATE_KEY, parse_configdata
from function.configdata.paths import format_path
from function.configdata.plain import plain
from function.configdata.substitution import Change, Substitution
from function.configdata.suggestions import suggestion_for
from function.configdata.unused import unused_hint, unused_values
from function.configdata.yamlfile import YamlFile, apply, load_file
from function.errors import InvalidConfigData, SackError
from function.ocm.images import ImageTable
from function.ocm.model import ComponentVersion
from function.yamlio import YamlError, load_one

Flavour = Literal["helm", "kustomize"]


@dataclass(frozen=True)
class Trace:
    """One value the function writes, traceable to the rule that produced it."""

    rule: str  # "localization[0]" or "configuration.rules[2]"
    file: str
    document: int
    path: str
    value: Any
    old: Any = None


@dataclass(frozen=True)
class FluxMutation:
    """What the ConfigData does to one Flux object. Memoised and shared: never mutate it."""

    helm_values: Mapping[str, Any] = field(default_factory=dict)
    kustomize_patches: tuple[Mapping[str, Any], ...] = ()
    trace: tuple[Trace, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # rules that address files outside this deployable, with why
    unused_values: tuple[str, ...] = ()  # claim value paths no applied configuration rule consumes
    unused_hint: str = ""  # "did you mean" for unused keys the ConfigData does not know
    # Applied localization values no repository:tag template can use; the policy decides
    # whether they are Fatal or Warnings (configData.imagePairs), so they are not in warnings.
    image_pair_defects: tuple[ImagePairDefect, ...] = ()


@dataclass(frozen=True)
class MutationInput:
    """Everything one Flux mutation depends on (the memo key is made of exactly this).

    ``files``: for ``helm`` the chart's files relative to the chart root (``values.yaml``,
    ``templates/...``); for ``kustomize`` the files of the tar relative to its root.
    ``images``: the request's image table (:func:`function.ocm.images.image_table`), built
    once by the caller.
    ``schema_violations``: the policy's ``configData.schemaViolations`` (``Warning`` reports
    schema violations of the values as warnings instead of failing). ``image_pairs``: the
    policy's ``configData.imagePairs``, settled here (Fatal raises the first defect, Warning
    appends every defect to the warnings); None leaves the defects to the caller.
    """

    flavour: Flavour
    configdata: bytes
    component: ComponentVersion
    files: Mapping[str, bytes]
    values: Mapping[str, Any] | None
    images: ImageTable
    configdata_name: str = "ConfigData"
    schema_violations: SchemaViolations = "Fatal"
    duplicate_keys: Literal["Warning", "Fatal"] = "Warning"  # configData.duplicateKeys
    deployable: str = ""  # the deployable's resource name, for errors in its files only
    image_pairs: Literal["Warning", "Fatal"] | None = None  # configData.imagePairs


def _trace(change: Change) -> Trace:
    return Trace(
        rule=change.rule,
        file=change.sub.file,
        document=change.document,
        path=format_path(change.path.steps),
        value=plain(change.value),
        old=plain(change.old),
    )


def mutate(inp: MutationInput, memos: Memos | None = None) -> FluxMutation:
    """Plan and apply every ConfigData rule for one deployable, for Flux.

    ``memos``: the edge's memo tables (:mod:`function.cache`); the whole mutation is memoised
    under :func:`_memo_key`, and the steps inside it (parsed ConfigData, validators,
    expressions, YAML) in their own tables.
    Raises :class:`function.errors.SackError` subclasses naming rule, field and file.
    """
    if inp.flavour not in ("helm", "kustomize"):
        raise ValueError(f"unknown flavour {inp.flavour!r}")
    key = _memo_key(inp, memos) if memos else None
    packed_key = None  # computed past a miss of ``mutations`` only, and kept for the store
    if memos is not None and key is not None:
        hit = memos.mutations.get(key)
        # The key holds the descriptor digest; the component itself is compared too, so two
        # different descriptors that claim one digest (hand-made ones) never share an entry.
        if hit is not None and (hit[0] is inp.component or hit[0] == inp.component):
            return _settled(hit[1], inp.image_pairs)
        # A fleet's mutations outnumber what the table holds as objects; each is also kept
        # packed (about a twentieth of the estimate), so a claim not seen lately unpacks its
        # mutation (~0.1 ms) instead of planning its ConfigData again.
        packed_key = _packed_key(key)
        packed = memos.tables["packed_mutations"].get(packed_key)
        if packed is not None and (packed[0] is inp.component or packed[0] == inp.component):
            # not put back into ``mutations``: a fleet that outgrew it would only churn it
            unpacked: FluxMutation = pickle.loads(zlib.decompress(packed[1]))  # noqa: S301 - ours
            return _settled(unpacked, inp.image_pairs)
    result = _checked(inp, memos)
    if memos is not None and key is not None:
        memos.mutations.put(key, (inp.component, result), _size(result))
        try:
            blob = zlib.compress(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL), 1)
        except (pickle.PicklingError, TypeError, AttributeError):
            blob = None
        if blob is not None:
            entry = (inp.component, blob)
            memos.tables["packed_mutations"].put(packed_key, entry, len(blob) + 200)
    return _settled(result, inp.image_pairs)


def _packed_key(key: Hashable) -> bytes:
    """The packed table's key: a digest of the memo key (strings, bytes and tuples, whose
    ``repr`` is their value), so an entry holds ~1.5 kB rather than the key's tuples.
    """
    return hashlib.sha256(repr(key).encode("utf-8")).digest()


def _settled(m: FluxMutation, image_pairs: Literal["Warning", "Fatal"] | None) -> FluxMutation:
    """The image-pair policy applied to a (memoised, shared) mutation: a Fatal defect raises
    on every call, Warning defects follow the other warnings (a copy; the memo is not touched).
    """
    if image_pairs is None or not m.image_pair_defects:
        return m
    lines = enforce_image_pairs(
        m.image_pair_defects,
        fatal=image_pairs == "Fatal",
        downgrade="Ops can make this a Warning while the ConfigData is fixed: policy "
        "configData.imagePairs: Warning",
    )
    return replace(m, warnings=m.warnings + lines)


def mutation_for(
    flavour: Flavour,
    configdata: bytes,
    component: ComponentVersion,
    files: Mapping[str, bytes],
    values: Mapping[str, Any] | None,
    *,
    configdata_name: str = "ConfigData",
    images: ImageTable,
    schema_violations: SchemaViolations = "Fatal",
    memos: Memos | None = None,
) -> FluxMutation:
    """:func:`mutate` with the inputs spelled out (for callers outside the core; ``images``:
    :func:`function.ocm.images.image_table` of ``component``, built once by the caller).
    """
    return mutate(
        MutationInput(
            flavour,
            configdata,
            component,
            files,
            values,
            images,
            configdata_name,
            schema_violations,
        ),
        memos,
    )


def _images_key(images: ImageTable) -> Hashable:
    return tuple(
        (
            k,
            e.reference,
            None if e.error is None else (type(e.error).__name__, e.error.where, e.error.message),
        )
        for k, e in sorted(images.items())
    )


def _memo_key(inp: MutationInput, memos: Memos | None = None) -> Hashable | None:
    """Content key of everything the mutation depends on, or None (then it is not memoised).

    The mutation is a pure function of the :class:`MutationInput`: the flavour, the
    ConfigData bytes, the component (name, version, descriptor digest, registry it is read
    from), the deployable's files, the values, the image table and the schema-violations
    policy. All of it is in the key, by content.
    """
    component, values = inp.component, inp.values
    if not component.descriptor_digest:
        return None
    if not _json_like(values, 0):
        return None
    vk = json.dumps(values, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return (
        inp.flavour,
        _digest_of(inp.configdata, digest, memos),
        _digest_of(inp.files, files_digest, memos),
        digest(vk),
        inp.configdata_name,
        _images_key(inp.images),
        component.name,
        component.version,
        component.descriptor_digest,
        component.repository,
        inp.schema_violations,
        inp.duplicate_keys,
    )


def _digest_of(obj: Any, compute: Callable[[Any], bytes], memos: Memos | None) -> bytes:
    """Immutable inputs (bytes, a read-only file map of bytes) are hashed once per object."""
    immutable = isinstance(obj, bytes) or (
        isinstance(obj, MappingProxyType) and all(type(v) is bytes for v in obj.values())
    )
    if memos is not None and immutable:
        return memos.digest_of(obj, compute)
    return compute(obj)


def _json_like(v: Any, depth: int) -> bool:
    """Plain JSON data only (string keys, exact scalar types), so its JSON text is a faithful
    key.
    """
    if depth > 100:
        return False
    t = type(v)
    if t is dict:
        return all(type(k) is str and _json_like(x, depth + 1) for k, x in v.items())
    if t is list:
        return all(_json_like(x, depth + 1) for x in v)
    return v is None or t in (str, int, float, bool)


def _size(m: FluxMutation) -> int:
    return (
        500
        + approx_size(m.helm_values)
        + sum(approx_size(p) for p in m.kustomize_patches)
        + sum(300 + approx_size(t.value) + approx_size(t.old) + len(t.path) for t in m.trace)
        + approx_size(list(m.warnings))
        + approx_size(list(m.skipped))
        + approx_size(list(m.unused_values))
        + len(m.unused_hint)
        + sum(300 + len(d.message) for d in m.image_pair_defects)
    )


def _checked(inp: MutationInput, memos: Memos | None) -> FluxMutation:
    try:
        return _mutation(inp, memos)
    except SackError as e:
        # Rule errors say "ConfigData localization[0] ..."; name the actual ConfigData resource,
        # and the component: one replica serves every tenant, so the operator reading the
        # error must learn whose content it is.
        where, message = _named(inp.configdata_name, e.where), e.message
        cv = inp.component
        if cv.name and cv.name not in where and cv.name not in message:
            message = f"{message} (component {cv.name}:{cv.version})"
        if (where, message) == (e.where, e.message):
            raise
        raise type(e)(where, message, reason=e.reason) from None


def _named(configdata_name: str, text: str) -> str:
    """``text`` with a leading ``"ConfigData "`` (how rules name their ConfigData) naming the
    actual ConfigData resource instead, for errors and warnings alike.
    """
    if (
        configdata_name != "ConfigData"
        and text.startswith("ConfigData ")
        and not text.startswith(configdata_name)
    ):
        return configdata_name + text[len("ConfigData") :]
    return text


def _mutation(inp: MutationInput, memos: Memos | None) -> FluxMutation:
    flavour, files, configdata_name = inp.flavour, inp.files, inp.configdata_name
    cd = parse_configdata(inp.configdata, configdata_name, memos)
    if inp.duplicate_keys == "Fatal":
        dups = [f for f in cd.findings if f.code == DUPLICATE_KEY]
        if dups:
            raise InvalidConfigData(
                configdata_name,
                "; ".join(f.message.removeprefix(f"{configdata_name}: ") for f in dups[:3]),
            )
    p = plan(
        cd,
        component=inp.component,
        values=inp.values,
        images=inp.images,
        schema_violations=inp.schema_violations,
        memos=memos,
    )

    loaded: dict[str, YamlFile] = {}
    roles: dict[str, str] = {}
    kust_docs: dict[str, Any] = {}
    helm_values: dict[str, Any] = {}
    patches: list[Mapping[str, Any]] = []
    traces: list[Trace] = []
    applied_subs: list[Substitution] = []
    skipped: list[str] = []
    hints: list[str] = []
    checked = 0
    what = "chart" if flavour == "helm" else "Kustomize directory"

    for sub in p.substitutions:
        budgets.check_cpu()
        if sub.file not in files:
            skipped.append(
                f"ConfigData {sub.rule}.{sub.field}: file {sub.file} is not in the {what}"
            )
            continue
        f = loaded.get(sub.file)
        if f is None:
            try:
                f = loaded[sub.file] = load_file(
                    files[sub.file], sub.file, round_trip=False, memos=memos
                )
            except YamlError as e:
                owner = f"resource {inp.deployable}" if inp.deployable else f"the {what}"
                raise YamlError(sub.where, f"{e.message} (a file of {owner})") from None
        if flavour == "helm":
            role = roles.setdefault(sub.file, helm.file_role(sub.file, f.docs))
            helm.check_substitution(sub, role)
            change = apply(f, sub)
            helm.add_to_values(helm_values, change, role, f.docs[change.document])
        else:
            kustomize.check_file(sub, f.docs)
            change = apply(f, sub)
            doc = f.docs[change.document]
            over = {}
            for kf in kustomize.kustomizations_over(sub.file, files):
                if kf not in kust_docs:
                    kust_docs[kf] = load_one(files[kf], kf, memos=memos)
                over[kf] = kust_docs[kf]
            kustomize.check_change(change, doc, over)
            patches.append(kustomize.patch_for(change, doc))
        traces.append(_trace(change))
        applied_subs.append(sub)
        hint = None
        if change.created and checked < budgets.current().suggestion_keys:
            checked += 1  # did-you-mean is capped (function.budgets), the rules are not
            hint = suggestion_for(f.docs, change)
        if hint is not None:
            hints.append(hint.describe(configdata_name))

    # Planning warnings only matter for substitutions that this deployable applies.
    applied = {(t.rule, t.file, t.path) for t in traces}
    warnings = [f.message for f in p.findings] + [
        s.warning
        for s in p.substitutions
        if s.warning and (s.rule, s.file, format_path(s.path.steps)) in applied
    ]
    warnings = [_named(configdata_name, w) for w in warnings]  # as errors name it
    warnings.extend(hints)  # suggestions name the resource already
    if p.substitutions and not traces:
        warnings.append(
            f"{configdata_name}: none of its {len(p.substitutions)} substitutions addresses a "
            "file of this "
            f"{what} (files named: {', '.join(sorted({s.file for s in p.substitutions}))}); "
            "check the rules' file fields"
        )
    unused = unused_values(cd, inp.values, files=files.keys(), memos=memos)
    return FluxMutation(
        helm_values=helm_values,
        kustomize_patches=tuple(patches),
        trace=tuple(traces),
        warnings=tuple(warnings),
        skipped=tuple(skipped),
        unused_values=unused,
        unused_hint=unused_hint(cd, unused),
        image_pair_defects=image_pair_defects(applied_subs, configdata_name),
    )


__all__ = ["Flavour", "FluxMutation", "MutationInput", "Trace", "mutate", "mutation_for"]
