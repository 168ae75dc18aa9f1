"""Applying changes to a YAML file while keeping it the file its author wrote.

Service teams read the CLI's output as a diff against their own manifest, so comments,
key order, quoting, indentation and ``---`` separators must survive; only the substituted
values change. ruamel's round-trip mode does that; we guess the indentation from the text
and keep a replaced string's quoting style. Input is first loaded with
:mod:`function.yamlio`'s caps (size, alias expansion) before the round-trip parse.

Two rules for what other tools read back:

* a file whose content is JSON is written back as JSON (2-space indentation, key order kept),
  as upstream did (ocm ``api/utils/subst/subst.go``: the format is chosen by content, so YAML
  in a ``.json`` file stays YAML);
* every string written is quoted when a YAML 1.1 reader (Helm, kubectl, sigs.k8s.io/yaml)
  would type it differently (:func:`function.yaml11.needs_quotes`: ``no``, ``on``, ``0777``…),
  keys of written maps included. What the author wrote is never restyled.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    FoldedScalarString,
    LiteralScalarString,
    ScalarString,
    SingleQuotedScalarString,
)

from function.cache import Memos, copied_memo, digest
from function.configdata.paths import get
from function.configdata.plain import plain
from function.configdata.substitution import Change, Substitution, apply_to_documents
from function.yaml11 import needs_quotes
from function.yamlio import YamlError, compose_all, load_all


@dataclass
class YamlFile:
    """A parsed multi-document YAML file (round-trip nodes) plus how to write it back."""

    name: str
    docs: list[Any]
    explicit_start: bool
    mapping_indent: int
    sequence_indent: int
    sequence_offset: int
    preamble: str = ""  # comments before a leading '---', which ruamel drops
    json: bool = False  # the content is JSON: written back as JSON


def _guess_indent(text: str) -> tuple[int, int, int]:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mapping = 2
    seq_offset: int | None = None
    for prev, cur in itertools.pairwise(lines):
        p_ind = len(prev) - len(prev.lstrip())
        c_ind = len(cur) - len(cur.lstrip())
        if not prev.rstrip().endswith(":") or prev.lstrip().startswith("- "):
            continue
        if cur.lstrip().startswith("- "):
            if seq_offset is None:
                seq_offset = c_ind - p_ind
        elif c_ind > p_ind and mapping == 2:
            mapping = c_ind - p_ind
            break
    for prev, cur in itertools.pairwise(lines):
        if seq_offset is not None:
            break
        if prev.rstrip().endswith(":") and cur.lstrip().startswith("- "):
            seq_offset = (len(cur) - len(cur.lstrip())) - (len(prev) - len(prev.lstrip()))
    offset = max(0, seq_offset or 0)
    return max(2, mapping), max(2, offset + 2), offset


def _rt() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    return y


def load_file(
    text: bytes | str, name: str, *, round_trip: bool = True, memos: Memos | None = None
) -> YamlFile:
    """The parsed file, ready to edit in place (the caller's own copy).

    ``round_trip=False`` (the function, which never writes the file back): the same
    round-trip types and scalar styles, composed by :func:`function.yamlio.compose_all`
    (libyaml's parser, the node and depth caps while parsing) with comments dropped; ruamel's
    pure-Python round-trip parser costs ~10 us a byte (a 4 MB values file: ~40 s of CPU on
    the replica every tenant shares).

    Parsing is the slowest thing the engine does (every claim of a component parses the same
    files), and a component's files do not change, so the parse is memoised by content in
    ``memos`` (:mod:`function.cache`), either way; each call
    gets a fresh copy of the documents (pickle keeps ruamel's comments and styles exactly,
    where ``copy.deepcopy`` does not).
    """
    load = _load_file if round_trip else _load_events
    return copied_memo(
        "yaml_files",
        (digest(text), name, round_trip),
        lambda: load(text, name, memos),
        memos,
        300,
    )


def _load_events(text: bytes | str, name: str, memos: Memos | None) -> YamlFile:
    load_all(text, name, memos=memos)  # size, alias-bomb, tags, numbers and duplicate keys first
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    nodes, _ = compose_all(text, name)
    constructor = _rt().constructor
    try:
        docs = [constructor.construct_document(n) for n in nodes if n is not None]
    except YAMLError as e:  # pragma: no cover - load_all above already constructed it
        raise YamlError(name, f"is not valid YAML: {type(e).__name__}") from None
    docs = [d for d in docs if d is not None] or [CommentedMap()]
    return YamlFile(
        name,
        docs,
        explicit_start=False,
        mapping_indent=2,
        sequence_indent=2,
        sequence_offset=0,
        json=_is_json(text),
    )


def _load_file(text: bytes | str, name: str, memos: Memos | None) -> YamlFile:
    load_all(text, name, memos=memos)  # size, alias-bomb and validity caps first
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        docs = list(_rt().load_all(io.StringIO(text)))
    except YAMLError as e:  # pragma: no cover - load_all above already parsed it
        raise YamlError(name, f"is not valid YAML: {type(e).__name__}") from None
    docs = [d for d in docs if d is not None]
    if not docs:
        docs = [
            CommentedMap()
        ]  # an empty file is an empty map, as yq treats it (values.yaml may be empty)
    lead = re.match(r"\A((?:[ \t]*#[^\n]*\n|[ \t]*\n)*)---", text)
    m, s, o = _guess_indent(text)
    return YamlFile(name, docs, bool(lead), m, s, o, lead.group(1) if lead else "", _is_json(text))


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)  # NaN / Infinity are not JSON (Python's json would accept them)


def _is_json(text: str) -> bool:
    """Is the whole content one JSON value? (upstream: yq's JSON decoder succeeds on it)."""
    if not text.strip() or text.lstrip()[0] not in '{["-0123456789tfn':
        return False
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return False
    return True


def dump_file(f: YamlFile) -> str:
    """The text of ``f`` after changes, in the file's own style.

    A JSON file stays JSON; a YAML file keeps its indentation, document start marker, leading
    comments and quoting, so the diff a team reviews shows only the values that changed.
    """
    if f.json:
        return json.dumps(plain(f.docs[0]), indent=2, ensure_ascii=False) + "\n"
    y = _rt()
    y.indent(mapping=f.mapping_indent, sequence=f.sequence_indent, offset=f.sequence_offset)
    y.explicit_start = f.explicit_start
    out = io.StringIO()
    if not f.docs:
        return ""
    y.dump_all(f.docs, out)
    text = out.getvalue()
    if f.preamble and not text.startswith(f.preamble):
        text = f.preamble + text
    return text


_UNICODE_BREAKS = ("\x85", "\u2028", "\u2029")


def _styled(old: Any, new: Any) -> Any:
    """Keep the quoting of a replaced string scalar; quote what YAML 1.1 readers would retype;
    turn plain containers into round-trip ones.
    """
    if isinstance(new, str) and not isinstance(new, ScalarString):
        if any(c in new for c in _UNICODE_BREAKS):
            return DoubleQuotedScalarString(
                new
            )  # ruamel mangles these in plain/single-quoted style
        for style in (
            DoubleQuotedScalarString,
            SingleQuotedScalarString,
            LiteralScalarString,
            FoldedScalarString,
        ):
            if isinstance(old, style) and (
                style not in (LiteralScalarString, FoldedScalarString) or "\n" in new
            ):
                return style(new)
        if len(new) > 1 and new[0] in "?:" and new[1] not in " \t":
            # ruamel writes '?0' / ':0' plain, which its own parser refuses inside flow collections
            return DoubleQuotedScalarString(new)
        if needs_quotes(new):
            return SingleQuotedScalarString(new)  # a plain `no` is false to Helm and kubectl
    if isinstance(new, dict):
        m = CommentedMap()
        for k, v in new.items():
            m[_styled(None, k) if isinstance(k, str) else k] = _styled(None, v)
        return m
    if isinstance(new, list):
        return CommentedSeq([_styled(None, v) for v in new])
    return new


def apply(f: YamlFile, sub: Substitution) -> Change:
    """Resolve and write one substitution into the file's documents (in place)."""
    # Resolve first with the plain value to learn the document, then restyle in place.
    change = apply_to_documents(f.docs, sub, make_map=CommentedMap)
    styled = _styled(change.old, sub.value)
    if styled is not sub.value:
        parent = (
            get(f.docs[change.document], type(sub.path)(sub.path.steps[:-1]))
            if len(sub.path) > 1
            else (f.docs[change.document])
        )
        parent[sub.path.steps[-1]] = styled
    return change
