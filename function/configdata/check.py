"""Lint a ConfigData against its deployables: what ``sack8s check`` reports before a team publishes.

The engine stops at the first error, because a deployment must never get half a ConfigData.
A team fixing its ConfigData wants every problem at once, so this module asks the engine's
questions rule by rule and keeps going:

* every rule addresses a file that is in a deployable, and a path that exists there (a path
  the engine would create is a warning that says so: it is usually a typo);
* what each applier refuses (a chart template instead of values.yaml, a kustomization file);
* the defaults satisfy the schema (a required key without a default is a warning: every
  deployment must supply it);
* configuration values resolve against the defaults (a key only user values can supply is a
  warning);
* localization produces valid references, pinned by digest, and no image-pair defect
  (:mod:`function.configdata.localize`); a ``repository``/``fullyQualifiedRepository`` plus
  ``tag`` rule is checked as the reference a ``repository:tag`` template renders;
* a path that creates a key next to a similar existing one gets the engine's "did you mean"
  (:mod:`function.configdata.suggestions`);
* given values (``--values``), the values no configuration rule consumes
  (:func:`function.configdata.unused.unused_values`);
* finally the engine itself runs once per deployable (``mutation_for``, what the function
  does) and once on the ConfigData as a whole (``Plan.all_findings()``: loading, YAML 1.1,
  expression and schema findings, and every substitution's warning), and every warning it
  returns, and any error not reported yet, becomes a finding, so new engine warnings show up
  here without changes to this module.

Pure: the caller reads files and the component; findings come back as data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from function.configdata import helm, kustomize
from function.configdata.localize import plan_rule, registry_rules
from function.configdata.model import ConfigData, parse_configdata
from function.configdata.paths import Path, parse_path
from function.configdata.substitution import Substitution
from function.configdata.suggestions import suggestion_for
from function.configdata.yamlfile import YamlFile, apply, load_file
from function.errors import InvalidValues, SackError, UnsupportedRule
from function.ocm.imageref import BadReference, parse_reference
from function.ocm.images import ImageTable
from function.ocm.model import ComponentVersion
from function.yamlio import YamlError, load_one

Severity = Literal["error", "warning"]
Flavour = Literal["helm", "kustomize"]

_WHERE = re.compile(
    r"^ConfigData(?: \([^)]*\))?(?: (?P<rule>[^\s(:]+))?(?: \(file (?P<file>[^)]*)\))?$"
)


@dataclass(frozen=True)
class Finding:
    """One problem ``sack8s check`` reports: how bad, which rule, file and path, and what.

    Frozen (hashable) so that a problem found both rule by rule and by the engine's own run
    is reported once.
    """

    severity: Severity
    rule: (
        str  # "localization[0].tag", "configuration.rules[1]", "configuration.schema", "ConfigData"
    )
    file: str = "-"
    path: str = "-"
    message: str = ""

    def line(self) -> str:
        """The finding as one output line, ``severity: rule: file: path: message``.

        The message's line breaks and runs of blanks are folded, so every finding stays on one
        line for ``grep`` and CI logs.
        """
        message = " ".join(self.message.split())
        return f"{self.severity}: {self.rule}: {self.file}: {self.path}: {message}"


@dataclass(frozen=True)
class Deployable:
    """Files a ConfigData's rules address: a chart, a Kustomize directory, or a plain
    directory.
    """

    name: str  # "resource chart", "--root ./chart"
    flavour: Flavour | None  # None: a directory of YAML files (no applier rules)
    files: Mapping[str, bytes]


def _split_where(where: str) -> tuple[str, str]:
    """(rule, file) from an engine ``where`` such as ``ConfigData localization[0].tag (file
    a.yaml)``.
    """
    m = _WHERE.match(where.strip())
    if not m:
        return where or "ConfigData", "-"
    return m.group("rule") or "ConfigData", m.group("file") or "-"


def _from_text(severity: Severity, text: str, path: str = "-") -> Finding:
    """A finding from an engine message ``WHERE: WHAT`` (warnings are plain strings)."""
    head, sep, rest = text.partition(": ")
    rule, file = _split_where(head) if sep else ("ConfigData", "-")
    if rule == head and not head.startswith("ConfigData"):
        return Finding(severity, "ConfigData", "-", path, text)
    return Finding(severity, rule, file, path, rest if sep else text)


def _from_error(e: SackError, path: str = "-") -> Finding:
    rule, file = _split_where(e.where)
    if not e.where.startswith("ConfigData"):
        return Finding("error", "ConfigData", file, path, str(e))
    return Finding("error", rule, file, path, e.message)


class _Report:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self._seen: set[Finding] = set()

    def add(self, f: Finding) -> None:
        if f not in self._seen:
            self._seen.add(f)
            self.findings.append(f)

    def mentions(self, message: str) -> bool:
        norm = " ".join(message.split())
        return any(
            norm in " ".join(f.message.split()) or " ".join(f.message.split()) in norm
            for f in self.findings
        )


def check(
    configdata: bytes,
    *,
    deployables: Sequence[Deployable],
    component: ComponentVersion | None = None,
    images: ImageTable | None,
    values: Mapping[str, Any] | None = None,
    image_pairs_fatal: bool = True,
    complete: bool = True,
    name: str = "ConfigData",
) -> list[Finding]:
    """Every finding for ``configdata``, in rule order, then what the engine says on its own.

    ``images``: the component's image table as the caller built it
    (:func:`function.ocm.images.image_table`); None exactly when ``component`` is.
    ``values``: what a claim would give (None: the defaults alone; then the values no rule
    consumes are not checked). ``complete``: ``deployables``
    are all the component ships, so a rule whose file is in none of them is an error;
    otherwise (one directory given) it is a warning: the function skips such rules, and
    another deployable may hold the file.
    """
    from function.configdata.engine import plan
    from function.configdata.fluxmutation import mutation_for
    from function.configdata.unused import unused_values

    report = _Report()
    try:
        cd = parse_configdata(configdata, name)
    except SackError as e:
        report.add(Finding("error", "ConfigData", "-", "-", str(e)))
        return report.findings
    if (component is None) != (images is None):
        raise ValueError(
            "check needs the component's image table exactly when a component is given"
        )
    _localization(
        report,
        cd,
        component,
        images,
        deployables,
        image_pairs_fatal=image_pairs_fatal,
        complete=complete,
    )
    _configuration(report, cd, deployables, values, complete=complete)
    for path in unused_values(cd, values):
        report.add(
            Finding(
                "warning",
                "values",
                "-",
                path,
                "reaches no configuration rule of the ConfigData (for any file), so it is "
                "never applied: check for a typo, or a rule the ConfigData lacks",
            )
        )

    # The engine end to end, as the function runs it (per deployable), and its plan on its own:
    # their warnings, and errors not reported yet.
    runs: list[Any] = []
    table: ImageTable = {} if images is None else images  # no component: no images
    if component is not None:
        for d in deployables:
            if d.flavour is not None:
                runs.append(
                    lambda d=d: mutation_for(
                        d.flavour, configdata, component, d.files, values, images=table
                    ).warnings
                )
    localize = component is not None

    def planned(*, configure: bool) -> list[str]:
        p = plan(
            cd,
            component=component,
            values=values,
            images=table,
            localize=localize,
            configure=configure,
        )
        return [f.message for f in p.all_findings()]

    runs.append(lambda: planned(configure=True))
    # planning warnings, when values the defaults lack stop the run above
    runs.append(lambda: planned(configure=False))
    for run in runs:
        try:
            warnings = run()
        except InvalidValues as e:
            if values is None:
                continue  # the schema checks above already said what values must supply
            if not report.mentions(e.message):
                report.add(_from_error(e))
            continue
        except SackError as e:
            if not report.mentions(e.message):
                report.add(_from_error(e))
            continue
        for w in warnings:
            if not report.mentions(w.partition(": ")[2] or w):
                report.add(_from_text("warning", w))
    return report.findings


# --------------------------------------------------------------------------- files and paths


def _homes(file: str, deployables: Sequence[Deployable]) -> list[Deployable]:
    return [d for d in deployables if file in d.files]


def _no_home(rule: str, file: str, deployables: Sequence[Deployable], *, complete: bool) -> Finding:
    def names(d: Deployable) -> str:
        shown = sorted(d.files)[:6]
        more = ", …" if len(d.files) > 6 else ""
        return f"{d.name} ({', '.join(shown)}{more})"

    where = "; ".join(names(d) for d in deployables) or "no deployable given"
    if complete:
        return Finding(
            "error", rule, file, "-", f"file {file} is in none of the deployables: {where}"
        )
    return Finding(
        "warning",
        rule,
        file,
        "-",
        f"file {file} is not in {where}: the function skips this rule for that deployable (it may "
        "belong to another one the component ships)",
    )


def _check_target(report: _Report, d: Deployable, sub: Substitution) -> str | None:
    """Apply one substitution to a fresh copy of its file, as the deployable's applier would.

    Returns how the path would be created (for one warning over every deployable), or None.
    """
    shown = str(sub.path)
    rule = f"{sub.rule}.{sub.field}" if sub.field != "path" else sub.rule
    try:
        if d.flavour == "helm" and sub.file != helm.VALUES_FILE:
            try:
                docs = load_file(d.files[sub.file], sub.file).docs
            except YamlError:
                docs = []  # a template is not YAML: it is a chart file other than values.yaml
            helm.check_substitution(sub, helm.file_role(sub.file, docs))
        f: YamlFile = load_file(d.files[sub.file], sub.file)
        if d.flavour == "helm":
            helm.check_substitution(sub, helm.file_role(sub.file, f.docs))
        elif d.flavour == "kustomize":
            kustomize.check_file(sub, f.docs)
        change = apply(f, sub)
        if d.flavour == "kustomize":
            over = {
                k: load_one(d.files[k], k) for k in kustomize.kustomizations_over(sub.file, d.files)
            }
            kustomize.check_change(change, f.docs[change.document], over)
    except (SackError, YamlError) as e:
        report.add(Finding("error", rule, sub.file, shown, e.message))
        return None
    hint = suggestion_for(f.docs, change)
    if hint is not None:
        report.add(_from_text("warning", hint.describe(), shown))
    if change.created:
        doc = f" document {change.document}" if len(f.docs) > 1 else ""
        return f"{d.name}{doc}: {change.created} missing key(s)"
    return None


def _targets(
    report: _Report,
    subs: Iterable[Substitution],
    deployables: Sequence[Deployable],
    *,
    complete: bool,
) -> None:
    for sub in subs:
        homes = _homes(sub.file, deployables)
        label = f"{sub.rule}.{sub.field}" if sub.field != "path" else sub.rule
        if not homes:
            report.add(_no_home(label, sub.file, deployables, complete=complete))
        created = [c for d in homes if (c := _check_target(report, d, sub))]
        if created:
            report.add(
                Finding(
                    "warning",
                    label,
                    sub.file,
                    str(sub.path),
                    f"does not exist; it would be created ({'; '.join(created)}): check for a typo",
                )
            )


# --------------------------------------------------------------------------- localization


def _localization(
    report: _Report,
    cd: ConfigData,
    cv: ComponentVersion | None,
    images: ImageTable | None,
    deployables: Sequence[Deployable],
    *,
    image_pairs_fatal: bool,
    complete: bool,
) -> None:
    with_registry = registry_rules(cd)
    if cd.localization and cv is None:
        report.add(
            Finding(
                "warning",
                "localization",
                "-",
                "-",
                "no component given (--component): the values the localization rules write are not "
                "checked, only their files and paths",
            )
        )
    for i, rule in enumerate(cd.localization):
        rid = f"localization[{i}]"
        if cv is None or images is None:
            subs = []
            for field, raw in rule.targets():
                try:
                    subs.append(
                        Substitution(
                            rid,
                            field,
                            rule.file,
                            parse_path(raw, where=f"ConfigData {rid}.{field}"),
                            "<localized>",
                        )
                    )
                except SackError as e:
                    report.add(_from_error(e, raw))
            _targets(report, subs, deployables, complete=complete)
            continue
        try:
            planned = plan_rule(i, rule, cv, images, with_registry)
        except SackError as e:
            report.add(_from_error(e))
            continue
        _targets(report, planned, deployables, complete=complete)
        for sub in planned:
            label = f"{rid}.{sub.field}"
            if sub.defect:
                report.add(
                    Finding(
                        "error" if image_pairs_fatal else "warning",
                        label,
                        sub.file,
                        str(sub.path),
                        sub.defect.removeprefix(f"{sub.path} "),
                    )
                )
            if sub.warning:
                report.add(_from_text("warning", sub.warning, str(sub.path)))
        _pair(report, rid, planned)


def _pair(report: _Report, rid: str, planned: Sequence[Any]) -> None:
    """What ``{{ repository }}:{{ tag }}`` renders from this rule's values, checked as a
    reference.
    """
    values = {s.field: s for s in planned}
    tag = values.get("tag")
    if tag is None or tag.defect:
        return
    if "fullyQualifiedRepository" in values:
        repo = values["fullyQualifiedRepository"]
        rendered = f"{repo.value}:{tag.value}"
    elif "repository" in values and "registry" in values and not values["repository"].defect:
        repo = values["repository"]
        rendered = f"{values['registry'].value}/{repo.value}:{tag.value}"
    else:
        return
    try:
        ref = parse_reference(rendered)
    except BadReference as e:
        report.add(
            Finding(
                "error",
                f"{rid}.tag",
                tag.file,
                str(tag.path),
                f"'repository:tag' renders {rendered[:200]!r}, which is not a valid reference: "
                f"{e.message}",
            )
        )
        return
    if not ref.digest:
        report.add(
            Finding(
                "warning",
                f"{rid}.tag",
                tag.file,
                str(tag.path),
                f"'repository:tag' renders {rendered[:200]!r}, which is not pinned by digest",
            )
        )


# --------------------------------------------------------------------------- configuration


def _configuration(
    report: _Report,
    cd: ConfigData,
    deployables: Sequence[Deployable],
    values: Mapping[str, Any] | None,
    *,
    complete: bool,
) -> None:
    from function.configdata.configure import deep_merge, evaluate, validator_for

    conf = cd.configuration
    if conf is None:
        return
    defaults = dict(conf.defaults)
    merged = deep_merge(defaults, dict(values)) if values else defaults
    if conf.schema_ is not None:
        try:
            validator = validator_for(conf.schema_)
            errors = sorted(
                validator.iter_errors(defaults), key=lambda e: list(map(str, e.absolute_path))
            )
        except SackError as e:
            report.add(_from_error(e))
            errors = []
        except RecursionError:
            report.add(Finding("error", "configuration.schema", "-", "-", "has a $ref cycle"))
            errors = []
        except Exception as e:
            report.add(
                Finding(
                    "error",
                    "configuration.schema",
                    "-",
                    "-",
                    f"cannot be applied to the defaults ({type(e).__name__})",
                )
            )
            errors = []
        for err in errors:
            at = "defaults" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path
            )
            schema_rule = "/".join(str(p) for p in err.schema_path)
            msg = err.message if len(err.message) <= 200 else err.message[:197] + "..."
            if err.validator == "required":
                report.add(
                    Finding(
                        "warning",
                        "configuration.schema",
                        "-",
                        at,
                        f"{msg} and the defaults do not supply it: every deployment must set it "
                        f"in its values (schema rule {schema_rule})",
                    )
                )
            else:
                report.add(
                    Finding(
                        "error",
                        "configuration.defaults",
                        "-",
                        at,
                        f"the default breaks the schema: {msg} (schema rule {schema_rule})",
                    )
                )
    subs = []
    for i, rule in enumerate(conf.rules):
        rid = f"configuration.rules[{i}]"
        try:
            path: Path = parse_path(rule.path, where=f"ConfigData {rid}.path (file {rule.file})")
        except SackError as e:
            report.add(_from_error(e, rule.path))
            continue
        value: Any = "<value>"
        try:
            value = evaluate(rule.value, merged, f"ConfigData {rid}.value (file {rule.file})")
        except UnsupportedRule as e:
            report.add(_from_error(e, rule.path))
        except SackError as e:
            report.add(
                Finding(
                    "warning",
                    rid,
                    rule.file,
                    rule.path,
                    f"{e.message}; the defaults do not supply it, so every deployment must set it "
                    "in its values",
                )
            )
        subs.append(Substitution(rid, "path", rule.file, path, value))
    _targets(report, subs, deployables, complete=complete)


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any finding is an error: ``sack8s check`` fails on errors, not on warnings.

    Args:
        findings: What :func:`check` returned.

    Returns:
        True when at least one finding has severity ``error``.
    """
    return any(f.severity == "error" for f in findings)


__all__ = ["Deployable", "Finding", "check", "has_errors"]
