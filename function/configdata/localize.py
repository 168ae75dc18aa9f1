"""Localization rules → substitutions: point manifests at the images the component ships.

Each rule names a resource of *this* component (name plus the extraIdentity upstream ignored;
an ambiguous name is an error) and the paths that receive parts of its localized reference.
The reference itself comes from ``locate`` (by default :func:`function.ocm.access.localized_reference`,
which applies the packaging contract); its parts follow go-containerregistry, see
:mod:`function.configdata.imageref`.

Refused, naming the rule: CUE ``mapping`` rules, ``referencePath`` (resources of referenced
components), and a rule with no target field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from function.configdata.imageref import ImageRef, parse_reference
from function.configdata.model import ConfigData, LocalizationRule
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.errors import InvalidConfigData, SackError, UnsupportedRule
from function.ocm.model import ComponentVersion, Resource
from function.ocm.select import find_resource

Locate = Callable[[ComponentVersion, Resource], str]


def default_locate(cv: ComponentVersion, resource: Resource) -> str:
    from function.ocm.access import localized_reference  # lazy: owned by another module

    return localized_reference(cv, resource)


def field_value(ref: ImageRef, field: str) -> str:
    return {
        "image": ref.name,
        "registry": ref.registry,
        "repository": ref.repository,
        "fullyQualifiedRepository": ref.fully_qualified_repository,
        "tag": ref.identifier,
    }[field]


@dataclass(frozen=True)
class Localized:
    substitutions: tuple[Substitution, ...]
    warnings: tuple[str, ...]


def _check_supported(rule: LocalizationRule, where: str) -> None:
    if rule.mapping is not None:
        raise UnsupportedRule(
            where,
            "CUE 'mapping' rules are not supported: use the image/registry/repository/tag/"
            "fullyQualifiedRepository fields with a path each",
        )
    if rule.resource is None:
        raise InvalidConfigData(where, "resource is missing: name the component resource (resource: {name: ...})")
    if rule.referencePath or rule.resource.referencePath:
        raise UnsupportedRule(
            where,
            "referencePath (a resource of a referenced component) is not supported: "
            "only resources of the component itself can be localized",
        )
    if not rule.targets():
        raise InvalidConfigData(
            where, "no substitution target given: set at least one of image, registry, repository, tag, "
            "fullyQualifiedRepository"
        )


def plan_localization(
    cd: ConfigData, cv: ComponentVersion, locate: Locate | None = None, *, only_file: str | None = None
) -> Localized:
    """Every localization substitution, in rule order then field order.

    ``only_file`` restricts planning to the rules addressing that file (the CLI works on one
    file; rule numbers stay those of the ConfigData).
    """
    locate = locate or default_locate
    subs: list[Substitution] = []
    warnings: list[str] = []
    for i, rule in enumerate(cd.localization):
        if only_file is not None and rule.file != only_file:
            continue
        rid = f"localization[{i}]"
        where = f"ConfigData {rid} (file {rule.file})"
        _check_supported(rule, where)
        assert rule.resource is not None
        resource = find_resource(
            cv.descriptor, rule.resource.name, rule.resource.extraIdentity, where=f"ConfigData {rid}.resource"
        )
        try:
            text = locate(cv, resource)
        except SackError as e:
            raise type(e)(f"ConfigData {rid}.resource", f"{e.where}: {e.message}" if e.where else e.message) from None
        ref = parse_reference(text, where=f"ConfigData {rid}.resource ({resource.describe()})")
        for field, raw_path in rule.targets():
            path = parse_path(raw_path, where=f"ConfigData {rid}.{field} (file {rule.file})")
            value = field_value(ref, field)
            warning = None
            if field == "tag" and ref.digest:
                warning = (
                    f"ConfigData {rid}.tag (file {rule.file}): {resource.describe()} is pinned by digest, so "
                    f"{path} receives {ref.digest!r}; a template of the form 'repository:tag' then yields "
                    f"an invalid reference ('{ref.repository}:sha256:…'). Pin by digest instead: use an "
                    "'image' rule for the full reference, or write the digest into the chart's digest field"
                )
            elif field == "repository" and not rule.registry:
                warning = (
                    f"ConfigData {rid}.repository (file {rule.file}): {path} receives {value!r}, the "
                    f"repository without its registry {ref.registry!r} (upstream semantics); unless the "
                    "template prepends the registry from a 'registry' rule, use 'fullyQualifiedRepository'"
                )
            subs.append(Substitution(rid, field, rule.file, path, value, warning))
            if warning:
                warnings.append(warning)
    return Localized(tuple(subs), tuple(warnings))
