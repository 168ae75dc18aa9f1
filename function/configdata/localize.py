"""Localization rules → substitutions: point manifests at the images the component ships.

Each rule names a resource of *this* component (name plus the extraIdentity upstream ignored;
an ambiguous name is an error) and the paths that receive parts of its localized reference.
The reference itself comes from the request's image table (built once by the caller with
:func:`function.ocm.images.image_table`, which applies the packaging contract and the
allowlist, and parsed there); its parts follow go-containerregistry, see
:mod:`function.ocm.imageref`.

Refused, naming the rule: CUE ``mapping`` rules, ``referencePath`` (resources of referenced
components), and a rule with no target field.

A ``tag`` rule writes ``TAG@sha256:…`` for a reference that has both (upstream wrote the bare
digest, which no ``repository:tag`` template can use). Values no such template can use are
*defects* (:class:`ImagePairDefect`): a bare digest as a tag (the reference names no tag), and
a ``repository`` without the registry of a reference that has one and no ``registry`` rule
beside it (the image would be pulled from Docker Hub, not from the transfer target). Whether
a defect is Fatal (the default) or a Warning is the caller's policy
(:func:`enforce_image_pairs`), decided only for substitutions that are actually applied:
one ConfigData serves a chart and a Kustomize directory, and a rule for the other one must
not fail this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from function.configdata.model import ConfigData, LocalizationRule
from function.configdata.paths import parse_path
from function.configdata.substitution import Substitution
from function.errors import InvalidConfigData, SackError, UnsupportedRule
from function.ocm.imageref import DEFAULT_REGISTRY, BadReference, ImageRef, parse_reference
from function.ocm.images import ImageTable
from function.ocm.model import ComponentVersion, Resource
from function.ocm.select import find_resource
from function.ocm.source import resource_key


def field_value(ref: ImageRef, field: str) -> str:
    """The part of ``ref`` a localization rule's ``field`` writes.

    Args:
        ref: The localized image reference.
        field: One of :data:`function.configdata.model.LOCALIZATION_FIELDS`.

    Returns:
        The name, registry, repository, fully qualified repository, or the tag pinned by
        digest (``TAG@sha256:…``).
    """
    return {
        "image": ref.name,
        "registry": ref.registry,
        "repository": ref.repository,
        "fullyQualifiedRepository": ref.fully_qualified_repository,
        "tag": ref.pinned_tag,
    }[field]


@dataclass(frozen=True)
class LocalizedSubstitution(Substitution):
    """A localization substitution; ``defect`` says why no ``repository:tag`` template can use
    it.
    """

    defect: str | None = None  # Fatal or Warning by policy, and only if the substitution is applied


@dataclass(frozen=True)
class ImagePairDefect:
    """An invalid or unlocalized reference a rule would write into a ``repository:tag`` pair."""

    rule: str
    field: str
    file: str
    path: str
    message: str
    configdata: str = (
        "ConfigData"  # how errors name the ConfigData ("ConfigData (resource config)")
    )

    @property
    def where(self) -> str:
        """How the error names the defect: ConfigData, rule, field and file."""
        return f"{self.configdata} {self.rule}.{self.field} (file {self.file})"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class Localized:
    """What localization plans: substitutions in rule order, and the warnings on the way
    (each is also on its substitution, for whoever applies it).
    """

    substitutions: tuple[Substitution, ...]
    warnings: tuple[str, ...]


def image_pair_defects(
    subs: Iterable[Substitution], configdata: str = "ConfigData"
) -> tuple[ImagePairDefect, ...]:
    """The defects among ``subs`` (pass only the substitutions that are applied), in order."""
    return tuple(
        ImagePairDefect(s.rule, s.field, s.file, str(s.path), s.defect, configdata)
        for s in subs
        if isinstance(s, LocalizedSubstitution) and s.defect
    )


def enforce_image_pairs(
    defects: Iterable[ImagePairDefect], *, fatal: bool, downgrade: str
) -> tuple[str, ...]:
    """Raise the first defect (``fatal``), or return every defect as a warning line.

    ``downgrade`` tells the reader how to make it a warning (the policy field or the CLI flag).
    """
    found = list(defects)
    if not found:
        return ()
    if fatal:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise InvalidConfigData(
            first.where, f"{first.message}{more}. {downgrade}", reason="InvalidImageReference"
        )
    return tuple(str(d) for d in found)


def _published_tag(resource: Resource) -> str:
    """The tag a localBlob image was published with (its ``referenceName``), or ""."""
    name = resource.access.get("referenceName")
    if not isinstance(name, str) or not name or len(name) > 1024:
        return ""
    try:
        ref = parse_reference(name)
    except BadReference:
        return ""
    return ref.tag


def _defect(
    ref: ImageRef, field: str, value: str, path: str, *, has_registry_rule: bool
) -> str | None:
    if field == "tag" and ref.digest and not ref.tag:
        return (
            f"{path} would receive the bare digest {value[:19]}…, which is not a tag: a template "
            f"of the form 'repository:tag' renders '{ref.repository}:sha256:…', an invalid "
            "reference, and the reference names no tag to write before the digest. Use an "
            "'image' rule for the full reference, or write the digest into the chart's digest "
            "field"
        )
    if field == "repository" and not has_registry_rule and ref.registry != DEFAULT_REGISTRY:
        return (
            f"{path} would receive {value!r}, the repository without its registry "
            f"{ref.registry!r}: a 'repository:tag' template then pulls from Docker Hub, not "
            "from the registry the component was transferred to. Use 'fullyQualifiedRepository' "
            "(registry included), or add a 'registry' rule for the template's registry value"
        )
    return None


def _warning(
    ref: ImageRef, field: str, value: str, path: str, *, has_registry_rule: bool
) -> str | None:
    if field == "repository" and not has_registry_rule and ref.registry == DEFAULT_REGISTRY:
        return (
            f"{path} receives {value!r}, the repository without its registry {ref.registry!r} "
            "(upstream semantics); unless the template prepends the registry from a 'registry' "
            "rule, use 'fullyQualifiedRepository'"
        )
    return None


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


RuleKey = tuple[str, tuple[tuple[str, str], ...], str]  # resource name, extraIdentity, file


def _key(rule: LocalizationRule) -> RuleKey | None:
    if rule.resource is None:
        return None
    return (rule.resource.name, tuple(sorted(rule.resource.extraIdentity.items())), rule.file)


def registry_rules(cd: ConfigData) -> frozenset[RuleKey]:
    """The (resource, file) pairs some rule writes a ``registry`` for."""
    return frozenset(k for r in cd.localization if r.registry and (k := _key(r)) is not None)


def plan_localization(
    cd: ConfigData,
    cv: ComponentVersion,
    images: ImageTable,
    *,
    only_file: str | None = None,
) -> Localized:
    """Every localization substitution, in rule order then field order.

    ``images`` is the request's image table (:func:`function.ocm.images.image_table`), built
    once by the caller: the core and the CLI pass the one they built.
    ``only_file`` restricts planning to the rules addressing that file (the CLI works on one
    file; rule numbers stay those of the ConfigData).
    """
    subs: list[Substitution] = []
    warnings: list[str] = []
    with_registry = registry_rules(cd)
    for i, rule in enumerate(cd.localization):
        if only_file is not None and rule.file != only_file:
            continue
        planned = plan_rule(i, rule, cv, images, with_registry)
        subs.extend(planned)
        warnings.extend(s.warning for s in planned if s.warning)
    return Localized(tuple(subs), tuple(warnings))


def plan_rule(
    i: int,
    rule: LocalizationRule,
    cv: ComponentVersion,
    images: ImageTable,
    with_registry: frozenset[RuleKey] = frozenset(),
) -> tuple[LocalizedSubstitution, ...]:
    """The substitutions of ``localization[i]`` (``sack8s check`` plans rule by rule).

    ``images``: the request's image table, as the caller built it.
    ``with_registry``: :func:`registry_rules` of the ConfigData; a ``repository`` for a
    resource and file that also get a ``registry`` is completed by the template.
    """
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
            raise InvalidConfigData("", f"{resource.describe()} has no entry in the image table")
        ref = entry.require()
    except BadReference as e:
        raise BadReference(
            f"ConfigData {rid}.resource ({resource.describe()})", e.message
        ) from None
    except SackError as e:
        raise type(e)(
            f"ConfigData {rid}.resource", f"{e.where}: {e.message}" if e.where else e.message
        ) from None
    if ref.digest and not ref.tag:
        tag = _published_tag(resource)
        if tag:
            ref = replace(ref, tag=tag)
    has_registry = bool(rule.registry) or _key(rule) in with_registry
    out: list[LocalizedSubstitution] = []
    for field, raw_path in rule.targets():
        path = parse_path(raw_path, where=f"ConfigData {rid}.{field} (file {rule.file})")
        value = field_value(ref, field)
        label = f"ConfigData {rid}.{field} (file {rule.file})"
        warning = _warning(ref, field, value, str(path), has_registry_rule=has_registry)
        if not out and not ref.digest:
            warning = (
                f"{resource.describe()} is not pinned by digest ({entry.reference[:200]!r}): the "
                "registry can change what runs (accepted only because unpinned images are "
                "allowed: policy source.allowUnpinnedImages, or sack8s --allow-unpinned)"
                + (f"; also: {warning}" if warning else "")
            )
        defect = _defect(ref, field, value, str(path), has_registry_rule=has_registry)
        out.append(
            LocalizedSubstitution(
                rid,
                field,
                rule.file,
                path,
                value,
                f"{label}: {warning}" if warning else None,
                defect,
            )
        )
    return tuple(out)
