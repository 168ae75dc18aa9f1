"""The seam between the ConfigData engine and the composition core.

The core asks one question: "given this ConfigData, component, deployable content and
values, what goes into the Flux object?" The answer is a :class:`FluxMutation`: Helm values
for a HelmRelease, or patches for a Kustomization, plus a trace of every substitution (for
XR status) and any warnings. No I/O happens here.

One ConfigData often serves several deployables (a chart and a Kustomize directory), so a
rule whose ``file`` is not in this deployable is skipped with a reason, not an error; if
rules exist but none applies, that is a warning (probably a wrong ``file``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from function.configdata import helm, kustomize
from function.configdata.engine import plan
from function.configdata.model import parse_configdata
from function.configdata.paths import format_path
from function.configdata.plain import plain
from function.configdata.substitution import Change
from function.configdata.yamlfile import YamlFile, apply, load_file
from function.errors import SackError
from function.ocm.model import ComponentVersion, Resource
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
    helm_values: Mapping[str, Any] = field(default_factory=dict)
    kustomize_patches: tuple[Mapping[str, Any], ...] = ()
    trace: tuple[Trace, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # rules that address files outside this deployable, with why


Locate = Callable[[ComponentVersion, Resource], str]


def _trace(change: Change) -> Trace:
    return Trace(
        rule=change.rule,
        file=change.sub.file,
        document=change.document,
        path=format_path(change.path.steps),
        value=plain(change.value),
        old=plain(change.old),
    )


def mutation_for(
    flavour: Flavour,
    configdata: bytes,
    component: ComponentVersion,
    files: Mapping[str, bytes],
    values: Mapping[str, Any] | None,
    *,
    configdata_name: str = "ConfigData",
    locate: Locate | None = None,
) -> FluxMutation:
    """Plan and apply every ConfigData rule for one deployable, for Flux.

    ``files``: for ``helm`` the chart's files relative to the chart root (``values.yaml``,
    ``templates/...``); for ``kustomize`` the files of the tar relative to its root.
    Raises :class:`function.errors.SackError` subclasses naming rule, field and file.
    """
    if flavour not in ("helm", "kustomize"):
        raise ValueError(f"unknown flavour {flavour!r}")
    try:
        return _mutation_for(flavour, configdata, component, files, values, configdata_name, locate)
    except SackError as e:
        # Rule errors say "ConfigData localization[0] ..."; name the actual ConfigData resource.
        if configdata_name != "ConfigData" and e.where.startswith("ConfigData "):
            raise type(e)(configdata_name + e.where[len("ConfigData"):], e.message) from None
        raise


def _mutation_for(
    flavour: Flavour,
    configdata: bytes,
    component: ComponentVersion,
    files: Mapping[str, bytes],
    values: Mapping[str, Any] | None,
    configdata_name: str,
    locate: Locate | None,
) -> FluxMutation:
    cd = parse_configdata(configdata, configdata_name)
    p = plan(cd, component=component, values=values, locate=locate)

    loaded: dict[str, YamlFile] = {}
    roles: dict[str, str] = {}
    kust_docs: dict[str, Any] = {}
    helm_values: dict[str, Any] = {}
    patches: list[Mapping[str, Any]] = []
    traces: list[Trace] = []
    skipped: list[str] = []
    what = "chart" if flavour == "helm" else "Kustomize directory"

    for sub in p.substitutions:
        if sub.file not in files:
            skipped.append(f"ConfigData {sub.rule}.{sub.field}: file {sub.file} is not in the {what}")
            continue
        f = loaded.get(sub.file)
        if f is None:
            try:
                f = loaded[sub.file] = load_file(files[sub.file], sub.file)
            except YamlError as e:
                raise YamlError(sub.where, e.message) from None
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
                    kust_docs[kf] = load_one(files[kf], kf)
                over[kf] = kust_docs[kf]
            kustomize.check_change(change, doc, over)
            patches.append(kustomize.patch_for(change, doc))
        traces.append(_trace(change))

    # Planning warnings only matter for substitutions that this deployable applies.
    applied = {(t.rule, t.file, t.path) for t in traces}
    warnings = [
        s.warning for s in p.substitutions
        if s.warning and (s.rule, s.file, format_path(s.path.steps)) in applied
    ]
    if p.substitutions and not traces:
        warnings.append(
            f"{configdata_name}: none of its {len(p.substitutions)} substitutions addresses a file of this "
            f"{what} (files named: {', '.join(sorted({s.file for s in p.substitutions}))}); check the rules' file fields"
        )
    return FluxMutation(
        helm_values=helm_values,
        kustomize_patches=tuple(patches),
        trace=tuple(traces),
        warnings=tuple(warnings),
        skipped=tuple(skipped),
    )


__all__ = ["Flavour", "FluxMutation", "Locate", "Trace", "mutation_for"]
