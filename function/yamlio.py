"""Loading YAML from people we do not trust, without letting it eat the process.

Claims, ConfigData files, values and manifests all arrive as YAML written by service teams.
A "billion laughs" document is a few hundred bytes that expands to gigabytes once aliases
are followed (which converting to JSON or a protobuf Struct does). So every load here
caps the input size and the *expanded* node count, and refuses with a message naming the
file instead of expanding.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from function.cache import active_memos, digest
from function.errors import SackError

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 64
MAX_EXPANDED_TEXT = 4 * 1024 * 1024  # no more text than the largest document without aliases
_SURROGATE = re.compile("[\ud800-\udfff]")


class YamlError(SackError):
    reason = "InvalidYAML"


def _safe() -> YAML:
    y = YAML(typ="safe", pure=True)
    return y


def check_expansion(
    data: Any,
    where: str,
    *,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    max_text: int = MAX_EXPANDED_TEXT,
) -> bool:
    """Walk ``data`` as it would be expanded and refuse past the node, depth or text budget.

    Aliases are walked every time they are used, so a small document whose anchors are
    repeated (a "huge anchor" bomb: one 100 KB string referenced 1,000 times) is measured
    at its expanded size. Returns whether some string holds UTF-16 surrogates (JSON's
    ``\ud83d\ude00`` escapes), which :func:`_fix_surrogates` then repairs.
    """
    count = 0
    text = 0
    surrogates = False
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > max_nodes:
            raise YamlError(
                where, f"document expands to more than {max_nodes} nodes (YAML alias bomb?)"
            )
        if depth > max_depth:
            raise YamlError(where, f"document nests deeper than {max_depth} levels")
        if isinstance(node, str):
            text += len(node)
            if text > max_text:
                raise YamlError(
                    where,
                    f"document expands to more than {max_text} characters of text (YAML alias "
                    "bomb?)",
                )
            if not surrogates and not node.isascii():
                surrogates = _SURROGATE.search(node) is not None
        elif isinstance(node, dict):
            for k, v in node.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return surrogates


def _fix_surrogates(node: Any, where: str) -> Any:
    """Join surrogate pairs into the characters they encode; refuse a lone surrogate."""
    if isinstance(node, str):
        if _SURROGATE.search(node) is None:
            return node
        try:
            return node.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeError:
            raise YamlError(
                where,
                "holds a lone UTF-16 surrogate escape (\\uD800-\\uDFFF) that encodes no character",
            ) from None
    if isinstance(node, dict):
        return {_fix_surrogates(k, where): _fix_surrogates(v, where) for k, v in node.items()}
    if isinstance(node, list):
        return [_fix_surrogates(v, where) for v in node]
    return node


def _to_text(data: bytes | str, where: str, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise YamlError(where, f"is {len(data)} bytes, more than the {max_bytes} byte limit")
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlError(where, f"is not UTF-8 text (byte {e.start})") from None
    return data


def load_all(data: bytes | str, where: str, *, max_bytes: int = MAX_BYTES) -> list[Any]:
    """Every document of a YAML stream as plain Python data (empty documents dropped).

    Parsing is pure-Python (ruamel's YAML 1.2 safe loader), so a parsed stream is memoised
    by the SHA-256 of its bytes (:mod:`function.cache`, when the edge bound memo tables);
    every caller gets its own copy. Only valid streams are kept: an invalid one is parsed,
    and refused, every time.
    """
    if len(data) > max_bytes:
        _to_text(data, where, max_bytes)  # raises, naming the file
    memos = active_memos()
    if memos is None:
        return _load_all(data, where, max_bytes)
    key = (digest(data), max_bytes)
    blob = memos.yaml_docs.get(key)
    if blob is None:
        docs = _load_all(data, where, max_bytes)
        blob = pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL)
        memos.yaml_docs.put(key, blob, len(blob) + 200)
        return docs
    return pickle.loads(blob)  # noqa: S301 - our own pickle of an already parsed document


def syntax_error(where: str, e: YAMLError) -> YamlError:
    """One error for a YAML parse failure: where, the line and column, and ruamel's problem."""
    mark = getattr(e, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or type(e).__name__
    return YamlError(where, f"is not valid YAML{at}: {problem}")


def _load_all(data: bytes | str, where: str, max_bytes: int) -> list[Any]:
    text = _to_text(data, where, max_bytes)
    try:
        docs = [d for d in _safe().load_all(io.StringIO(text)) if d is not None]
    except YAMLError as e:
        raise syntax_error(where, e) from None
    except RecursionError:
        raise YamlError(where, f"nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as e:
        # ruamel raises plain ValueErrors for some scalars (e.g. `._` read as a float).
        raise YamlError(where, f"is not valid YAML: {type(e).__name__} reading a scalar") from None
    for i, d in enumerate(docs):
        if check_expansion(d, where):
            docs[i] = _fix_surrogates(d, where)
    return docs


def load_one(data: bytes | str, where: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """Exactly one YAML document (JSON is YAML too)."""
    docs = load_all(data, where, max_bytes=max_bytes)
    if len(docs) != 1:
        raise YamlError(where, f"must hold exactly one YAML document, found {len(docs)}")
    return docs[0]
