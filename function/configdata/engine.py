"""The pure engine: ConfigData + component + values → ordered substitutions → changed files.

Upstream ran localization first and configuration second, each in rule order; a later
substitution on the same path wins and its trace shows the earlier one's value as ``old``.
No file or network I/O happens here: callers pass bytes in and get text and changes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from function.configdata.findings import Finding
from function.configdata.localize import plan_localization
from function.configdata.model import ConfigData
from function.configdata.substitution import Change, Substitution
from function.configdata.yamlfile import YamlFile, apply, dump_file, load_file
from function.ocm.images import ImageTable
from function.ocm.model import ComponentVersion

if TYPE_CHECKING:
    from function.cache import Memos
    from function.configdata.configure import SchemaViolations


@dataclass(frozen=True)
class Plan:
    """``warnings``: localization warnings (each is also on its substitution). ``findings``:
    what loading and configuration found, whichever files a deployable has; a substitution's
    own ``warning`` matters only where it is applied. :meth:`all_findings` is both, for tools
    that look at the ConfigData as a whole (``sack8s check``).
    """

    substitutions: tuple[Substitution, ...]
    warnings: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()

    def all_findings(self) -> tuple[Finding, ...]:
        """:attr:`findings` plus every substitution's own warning, as findings.

        For tools that judge the ConfigData as a whole (``sack8s check``), where it does not
        matter which deployable a rule would be applied to.
        """
        subs = tuple(
            Finding(
                "Rule",
                s.warning,
                rule=f"{s.rule}.{s.field}" if s.field != "path" else s.rule,
                file=s.file,
                path=str(s.path),
            )
            for s in self.substitutions
            if s.warning
        )
        return self.findings + subs


def plan(
    cd: ConfigData,
    *,
    component: ComponentVersion | None = None,
    values: Mapping[str, Any] | None = None,
    localize: bool = True,
    configure: bool = True,
    images: ImageTable,
    only_file: str | None = None,
    schema_violations: SchemaViolations = "Fatal",
    memos: Memos | None = None,
) -> Plan:
    """Every substitution the ConfigData asks for, localization first (upstream order).

    ``images``: the request's image table, as the caller built it
    (:func:`function.ocm.images.image_table`; empty when there is no component).
    ``schema_violations="Warning"`` (the ops policy switch, the CLI flag) turns schema
    violations of the values into findings instead of an error. ``memos``: the edge's memo
    tables (:mod:`function.cache`).
    """
    subs: list[Substitution] = []
    warnings: list[str] = []
    findings: list[Finding] = list(cd.findings)
    if localize and cd.localization:
        if component is None:
            raise ValueError("localization needs a component")
        loc = plan_localization(cd, component, images, only_file=only_file)
        subs.extend(loc.substitutions)
        warnings.extend(loc.warnings)
    if configure:
        # Imported here: it loads jsonschema, which `sack8s localize` never needs.
        from function.configdata.configure import configure as configure_values

        conf = configure_values(cd, values, schema_violations=schema_violations, memos=memos)
        subs.extend(conf.substitutions)
        findings.extend(conf.findings)
    return Plan(tuple(subs), tuple(warnings), tuple(findings))


@dataclass(frozen=True)
class FileResult:
    """One file after :func:`apply_to_file`: its new text, the changes made (for the trace),
    the substitutions addressing other files, and what applying found.
    """

    text: str
    changes: tuple[Change, ...]
    not_applicable: tuple[Substitution, ...]
    findings: tuple[Finding, ...] = ()


def apply_to_file(
    text: bytes | str, file: str, substitutions: Iterable[Substitution]
) -> FileResult:
    """Apply the substitutions that address ``file`` to its text; the rest are returned
    unapplied.
    """
    f: YamlFile = load_file(text, file)
    changes: list[Change] = []
    other: list[Substitution] = []
    for sub in substitutions:
        if sub.file != file:
            other.append(sub)
            continue
        changes.append(apply(f, sub))
    findings: tuple[Finding, ...] = ()
    if changes and len(f.docs) > 1:
        findings = (
            Finding(
                "MultiDocumentFile",
                f"{file} holds {len(f.docs)} YAML documents: every one is kept, and each rule "
                "writes into the one document its path resolves in (ocm-controller v1 wrote back "
                "only the first document and dropped the others)",
                file=file,
            ),
        )
    return FileResult(
        dump_file(f) if changes else _as_text(text), tuple(changes), tuple(other), findings
    )


def _as_text(text: bytes | str) -> str:
    return text.decode("utf-8") if isinstance(text, bytes) else text
