"""The ConfigData file, as a strict model.

Field names and shapes follow ocm-controller ``pkg/configdata/configdata.go``. Unknown keys
are refused (a typo such as ``localisation`` must not silently do nothing), except the ones
upstream writers are known to add and upstream ignores: ``metadata`` at the top and the
informational ``name`` on a localization rule (the MPAS generator, the fixture component).

``mapping`` (CUE) and ``referencePath`` are *parsed* so they can be refused with a precise
"unsupported" error naming the rule, rather than a generic "extra field" error.

The file is read as upstream read it (sigs.k8s.io/yaml: YAML 1.1, so a plain ``y`` is
``true``; :func:`function.yaml11.load_v1`), and a missing ``apiVersion``/``kind`` is accepted
(upstream never looked at them; most of its own test data has none). Both are reported as
findings (:attr:`ConfigData.findings`), never silently.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from function.cache import Memos, digest, memo
from function.configdata.findings import Finding
from function.errors import InvalidConfigData
from function.yaml11 import Retyped, read_v1
from function.yamlio import Duplicate, YamlError

API_VERSION = "config.ocm.software/v1alpha1"
KIND = "ConfigData"
LOCALIZATION_FIELDS = ("image", "registry", "repository", "fullyQualifiedRepository", "tag")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def normalise_file(v: str) -> str:
    """Rule files are relative to the resource root: ``./a.yaml`` is ``a.yaml``; no escaping it."""
    norm = posixpath.normpath(v)
    if v.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise ValueError(f"must be a file path relative to the resource root, got {v[:200]!r}")
    return norm


class ResourceItem(_Strict):
    """The resource a localization rule takes its image from, as upstream's ``ResourceRef``.

    ``referencePath`` is parsed only so that a rule using it is refused by name (resources of
    referenced components are not supported).
    """

    name: str = Field(min_length=1)
    extraIdentity: dict[str, str] = Field(default_factory=dict)
    referencePath: list[dict[str, Any]] | None = None


class Mapping(_Strict):
    """A CUE ``mapping`` of a localization rule: parsed only to be refused by name."""

    path: str = ""
    transform: str = ""


class LocalizationRule(_Strict):
    """One ``localization`` entry: which resource's image, written into which paths of a file.

    Each non-empty field among :data:`LOCALIZATION_FIELDS` holds the path that receives that
    part of the localized reference.
    """

    name: str | None = None  # informational label (MPAS generator); ignored, as upstream does
    resource: ResourceItem | None = None  # required, except on (refused) CUE mapping rules
    file: str = Field(min_length=1)
    image: str | None = None
    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    fullyQualifiedRepository: str | None = None
    mapping: Mapping | None = None
    referencePath: list[dict[str, Any]] | None = None

    _file = field_validator("file")(classmethod(lambda _cls, v: normalise_file(v)))

    def targets(self) -> list[tuple[str, str]]:
        """(field, path) for every non-empty localization field, in documented order."""
        return [(f, getattr(self, f)) for f in LOCALIZATION_FIELDS if getattr(self, f)]


class ConfigRule(_Strict):
    """One ``configuration.rules`` entry: write ``value`` (spiff evaluated) at ``path`` of
    ``file``.
    """

    value: Any = None
    path: str = Field(min_length=1)
    file: str = Field(min_length=1)

    _file = field_validator("file")(classmethod(lambda _cls, v: normalise_file(v)))


class Configuration(_Strict):
    """The ``configuration`` section: values the rules read, their schema, and the rules.

    ``schema`` is aliased to ``schema_`` because pydantic reserves the name.
    """

    defaults: dict[str, Any] = Field(default_factory=dict)
    schema_: dict[str, Any] | bool | None = Field(default=None, alias="schema")
    rules: list[ConfigRule] = Field(default_factory=list)

    @field_validator("defaults", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v


class ConfigData(_Strict):
    """A whole ConfigData document, frozen (it is memoised and shared between requests).

    Build one with :func:`parse_configdata`, which also records what loading found
    (:attr:`findings`).
    """

    apiVersion: str | None = None  # missing: accepted with a finding (upstream ignored it)
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    configuration: Configuration | None = None
    localization: list[LocalizationRule] = Field(default_factory=list)
    _findings: tuple[Finding, ...] = PrivateAttr(default=())

    @property
    def findings(self) -> tuple[Finding, ...]:
        """What loading the file found (missing apiVersion/kind, YAML 1.1 scalars)."""
        return self._findings

    @field_validator("apiVersion", "kind")
    @classmethod
    def _type_meta(cls, v: str | None, info: ValidationInfo) -> str | None:
        expected = API_VERSION if info.field_name == "apiVersion" else KIND
        if v is not None and v != expected:
            raise ValueError(f"must be {expected}, got {v!r}")
        return v

    @field_validator("localization", mode="before")
    @classmethod
    def _none_list(cls, v: Any) -> Any:
        return [] if v is None else v


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def parse_configdata(
    data: bytes | str, name: str = "ConfigData", memos: Memos | None = None
) -> ConfigData:
    """Load (with the YAML safety caps) and validate one ConfigData document.

    Memoised by content in ``memos`` (:mod:`function.cache`): the model is frozen and shared, so
    callers must not mutate the containers inside it (the engine copies what it changes).
    """
    return memo(
        "configdata",
        (digest(data), name),
        lambda: _parse_configdata(data, name),
        lambda _: 4 * len(data) + 1000,
        memos,
    )


MAX_RETYPED_SHOWN = 10


def _retyped_finding(name: str, r: Retyped) -> Finding:
    v1, v12 = json.dumps(r.v1), json.dumps(r.v12)
    return Finding(
        "YAML11Scalar",
        f"{name} {r.path}: the unquoted {r.text!r} is read as {v1} (YAML 1.1, as "
        f"ocm-controller v1 and Kubernetes tools read it), where a YAML 1.2 reader sees {v12}: "
        f"quote it if the string is meant, or write {v1}",
        path=r.path,
    )


def _load_findings(
    name: str, doc: dict[str, Any], retyped: tuple[Retyped, ...]
) -> tuple[Finding, ...]:
    out: list[Finding] = []
    missing = [k for k in ("apiVersion", "kind") if k not in doc]
    if missing:
        add = " and ".join(f"'{k}: {API_VERSION if k == 'apiVersion' else KIND}'" for k in missing)
        out.append(
            Finding(
                "MissingTypeMeta",
                f"{name}: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                "missing; read as a v1 ConfigData (ocm-controller v1 never checked "
                f"{'it' if len(missing) == 1 else 'them'}): add {add}",
                path=" ".join(missing),
            )
        )
    out += [_retyped_finding(name, r) for r in retyped[:MAX_RETYPED_SHOWN]]
    if len(retyped) > MAX_RETYPED_SHOWN:
        rest = ", ".join(r.path for r in retyped[MAX_RETYPED_SHOWN : MAX_RETYPED_SHOWN + 5])
        out.append(
            Finding(
                "YAML11Scalar",
                f"{name}: {len(retyped) - MAX_RETYPED_SHOWN} more unquoted scalars are read as "
                f"YAML 1.1 types that a YAML 1.2 reader types differently ({rest}, …): quote them "
                "if strings are meant",
            )
        )
    return tuple(out)


def _parse_configdata(data: bytes | str, name: str) -> ConfigData:
    try:
        read = read_v1(data, name)
    except YamlError as e:
        raise InvalidConfigData(e.where, e.message) from None
    doc, retyped = read.value, read.retyped
    if not isinstance(doc, dict):
        raise InvalidConfigData(name, f"must be a YAML map, got {type(doc).__name__}")
    try:
        cd = ConfigData.model_validate(doc)
    except ValidationError as e:
        problems = []
        by_path = {r.path: r for r in retyped}
        for err in e.errors()[:5]:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown field (not part of ConfigData)"
            r = by_path.get(_loc(err["loc"]))
            if r is not None:
                msg += (
                    f" (the unquoted {r.text!r} is {json.dumps(r.v1)} in YAML 1.1, as upstream "
                    "read it: quote it)"
                )
            problems.append(f"{_loc(err['loc'])}: {msg}")
        more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
        raise InvalidConfigData(name, "; ".join(problems) + more) from None
    cd._findings = _load_findings(name, doc, retyped) + tuple(
        _duplicate_finding(name, d) for d in read.duplicates
    )
    return cd


DUPLICATE_KEY = "DuplicateKey"


def _duplicate_finding(name: str, d: Duplicate) -> Finding:
    return Finding(
        DUPLICATE_KEY,
        f"{name}: {d.describe()}; the value on line {d.second} is used, as ocm-controller v1 "
        "did: remove one (the policy's configData.duplicateKeys: Fatal refuses this)",
        path=d.key,
    )
