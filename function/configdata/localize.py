"""Localization rules → substitutions: point manifests at the images the component ships.

Each rule names a resource of *this* component (name plus the extraIdentity upstream ignored;
an ambiguous name is an error) and the paths that receive parts of its localized reference.
The reference itself comes from the request's image table (resolved once by the core with
:func:`function.ocm.access.image_table`, which applies the packaging contract, and parsed
there); its parts follow go-containerregistry, see :mod:`function.ocm.imageref`.

Refused, naming the rule: CUE ``mapping`` rules, ``referencePath`` (resources of referenced
components), and a rule with no target field.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.configdata.model import ConfigData, LocalizationRule
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.errors import InvalidConfigData, SackError, UnsupportedRule
from function.ocm.access import ImageTable, image_table
from function.ocm.imageref import BadReference, ImageRef
from function.ocm.model import ComponentVersion
from function.ocm.select import find_resource
from function.ocm.source import resource_key


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
        raise InvalidConfigData(
            where, "resource is missing: name the component resource (resource: {name: ...})"
        )
    if rule.referencePath or rule.resource.referencePath:
        raise UnsupportedRule(
            where,
            "referencePath (a resource of a referenced component) is not supported: "
            "only resources of the component itself can be localized",
        )
    if not rule.targets():
        raise InvalidConfigData(
            where,
            "no substitution target given: set at least one of image, registry, repository, tag, "
            "fullyQualifiedRepository",
        )


def plan_localization(
    cd: ConfigData,
    cv: ComponentVersion,
    images: ImageTable | None = None,
    *,
    only_file: str | None = None,
) -> Localized:
    """Every localization substitution, in rule order then field order.

    ``images`` is the request's image table (default: :func:`function.ocm.access.image_table`
    of ``cv``, as the CLI needs). ``only_file`` restricts planning to the rules addressing that
    file (the CLI works on one file; rule numbers stay those of the ConfigData).
    """
    if images is None:
        images = image_table(cv)
    subs: list[Substitution] = []
    warnings: list[str] = []
    for i, rule in enumerate(cd.localization):
        if only_file is not None and rule.file != only_file:
            continue
        rid = f"localization[{i}]"
        where = f"ConfigData {rid} (file {rule.file})"
        _check_supported(rule, where)
        assert rule.resource is not None  # noqa: S101 - _check_supported refused a rule without one
        resource = find_resource(
            cv.descriptor,
            rule.resource.name,
            rule.resource.extraIdentity,
            where=f"ConfigData {rid}.resource",
        )
        entry = images.get(resource_key(resource))
        try:
            if entry is None:
                raise InvalidConfigData(
                    "", f"{resource.describe()} has no entry in the image table"
                )
            ref = entry.require()
        except BadReference as e:
            raise BadReference(
                f"ConfigData {rid}.resource ({resource.describe()})", e.message
            ) from None
        except SackError as e:
            raise type(e)(
                f"ConfigData {rid}.resource", f"{e.where}: {e.message}" if e.where else e.message
            ) from None
        for field, raw_path in rule.targets():
            path = parse_path(raw_path, where=f"ConfigData {rid}.{field} (file {rule.file})")
            value = field_value(ref, field)
            warning = None
            if field == "tag" and ref.digest:
                warning = (
                    f"ConfigData {rid}.tag (file {rule.file}): {resource.describe()} is pinned "
                    "by digest, so "
                    f"{path} receives {ref.digest!r}; a template of the form 'repository:tag' "
                    "then yields "
                    f"an invalid reference ('{ref.repository}:sha256:…'). Pin by digest instead: "
                    "use an "
                    "'image' rule for the full reference, or write the digest into the chart's "
                    "digest field"
                )
            elif field == "repository" and not rule.registry:
                warning = (
                    f"ConfigData {rid}.repository (file {rule.file}): {path} receives {value!r}, "
                    "the "
                    f"repository without its registry {ref.registry!r} (upstream semantics); "
                    "unless the "
                    "template prepends the registry from a 'registry' rule, use "
                    "'fullyQualifiedRepository'"
                )
            subs.append(Substitution(rid, field, rule.file, path, value, warning))
            if warning:
                warnings.append(warning)
    return Localized(tuple(subs), tuple(warnings))
