"""protobuf Struct ↔ plain data, without the double trouble.

A Struct stores every number as a double, so ``replicas: 2`` in a claim arrives as ``2.0``.
Written back into a Kubernetes object (a Kustomize patch, Helm values) that ``2.0`` is
refused for an integer field. Integral doubles are therefore turned back into ints as
soon as data leaves a Struct; nothing in Kubernetes needs the distinction the other way.
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

from google.protobuf import json_format, struct_pb2

from function.cache import Memos, memo


def plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "struct_value":
        return {k: _value(x) for k, x in v.struct_value.fields.items()}
    if kind == "number_value":
        f = v.number_value
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    if kind == "bool_value":
        return v.bool_value
    return None


def to_dict(msg: Any) -> dict[str, Any]:
    """A Struct (or message) as plain data with integral numbers as ints.

    Structs are walked directly (about twice as fast as ``MessageToDict`` plus a second pass).
    """
    if msg is None:
        return {}
    if isinstance(msg, struct_pb2.Struct):
        return {k: _value(v) for k, v in msg.fields.items()}
    return plain(json_format.MessageToDict(msg, preserving_proto_field_name=True))


def fields(msg: struct_pb2.Struct, names: tuple[str, ...]) -> dict[str, Any]:
    """Only the named top-level fields of a Struct, as plain data (skip converting the rest)."""
    f = msg.fields
    return {n: _value(f[n]) for n in names if n in f}


#: Top-level fields converted once per distinct content: read on every reconcile and mostly
#: unchanged (an observed status, the XR's spec and status).
_BY_CONTENT = frozenset(("status", "spec"))


class Lazy(Mapping[str, Any]):
    """A Struct read as a mapping, each top-level field converted on first access.

    The core reads a few fields of each observed object (its Ready condition, the gate's
    fields, a held spec); converting the rest would be thrown away. A status or spec is
    converted once per distinct content (memo table ``observed``; what it returns is shared:
    read-only).
    """

    __slots__ = ("_done", "_memos", "_struct")

    def __init__(self, msg: struct_pb2.Struct, memos: Memos | None = None) -> None:
        self._struct = msg
        self._memos = memos
        self._done: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        try:
            return self._done[key]
        except KeyError:
            pass
        f = self._struct.fields
        if key not in f:
            raise KeyError(key)
        raw = f[key]
        if key in _BY_CONTENT:  # read on every reconcile, and mostly unchanged: by content
            value = memo(
                "observed",
                raw.SerializeToString(deterministic=True),
                lambda: _value(raw),
                lambda _: 4 * raw.ByteSize() + 200,
                self._memos,
            )
        else:
            value = _value(raw)
        self._done[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._struct.fields

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._struct.fields))

    def __len__(self) -> int:
        return len(self._struct.fields)

    def __repr__(self) -> str:
        return f"Lazy({dict(self)!r})"


def struct_bytes(obj: Mapping[str, Any], memos: Memos | None = None) -> bytes:
    """``obj`` as a serialized Struct, remembered by its content in ``memos``.

    The SDK's ``resource.update`` builds a Struct field by field in Python, the largest cost of
    an answer; composed objects mostly repeat from one reconcile to the next, so their
    serialized form is kept (memo table ``structs``) and merged in C. The key is ``marshal``'s
    serialization of the plain data (exact types, ~8x faster than ``json.dumps``); content
    marshal cannot write (never produced by the core) is built directly.
    """

    def build() -> bytes:
        msg = struct_pb2.Struct()
        msg.update(obj)
        return msg.SerializeToString()

    try:
        key = marshal.dumps(obj)
    except ValueError:
        return build()
    return memo("structs", key, build, lambda b: 2 * len(key) + len(b), memos)


def put(target: struct_pb2.Struct, obj: Mapping[str, Any], memos: Memos | None = None) -> None:
    """``target.update(obj)`` (top-level keys replaced), through :func:`struct_bytes`."""
    target.MergeFromString(struct_bytes(obj, memos))


# -- the response's desired objects on the wire -------------------------------------------------
# RunFunctionResponse.desired = 2 (State); State.resources = 2, a map<string, Resource> whose
# entries are messages {key = 1, value = 2}; Resource.resource = 1 (Struct), ready = 3 (enum).


_SMALL = [bytes((i,)) for i in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def resource_entry(key: str, resource: bytes, ready: int) -> bytes:
    """One ``desired.resources`` entry of a State, serialized: ``resource`` is the object's
    serialized Struct (:func:`struct_bytes`), ``ready`` a ``fnv1.Ready`` value.
    """
    value = _delimited(b"\x0a", resource) + b"\x18" + _varint(ready)
    return _delimited(
        b"\x12", _delimited(b"\x0a", key.encode("utf-8")) + _delimited(b"\x12", value)
    )


#: A packed claim is compressed in chunks of this size, each against the same stretch of its
#: component's reference claim (± the slack, for names of other lengths): zlib uses at most
#: the last 32 kB of a preset dictionary, so one dictionary cannot cover a longer claim.
_CHUNK = 16 * 1024
_SLACK = 8 * 1024
_REFERENCE = 512 * 1024  # the most of a reference claim kept


def _pack(raw: bytes, ref: bytes) -> bytes:
    """``raw`` compressed chunk by chunk against the matching stretches of ``ref``."""
    parts = []
    for start in range(0, len(raw), _CHUNK):
        packer = zlib.compressobj(6, zdict=ref[max(0, start - _SLACK) : start + _CHUNK + _SLACK])
        parts.append(packer.compress(raw[start : start + _CHUNK]) + packer.flush())
    return marshal.dumps(parts)


def _unpack(blob: bytes, ref: bytes) -> bytes:
    parts = marshal.loads(blob)  # noqa: S302 - our own marshal of a list of bytes (_pack)
    out = []
    for i, part in enumerate(parts):
        start = i * _CHUNK
        unpacker = zlib.decompressobj(zdict=ref[max(0, start - _SLACK) : start + _CHUNK + _SLACK])
        out.append(unpacker.decompress(part))
    return b"".join(out)


def _marshalled(value: Any) -> bytes | None:
    """``marshal`` of ``value``, the exact-content key of plain data; None for anything else."""
    try:
        return marshal.dumps(value)
    except ValueError:
        return None


class ClaimStructs:
    """The serialized objects of one claim's answer, kept per object and packed per claim.

    A fleet's composed objects outnumber what memo table ``structs`` holds one by one (10,000
    claims × ~37 objects), so a claim not composed lately would build every Struct again -- the
    largest cost of its compute path. Each claim's entries are therefore also kept together,
    compressed, in memo table ``packed_structs`` under the claim (``group``). Claims of one
    component differ mostly in names, so they are compressed against the first packed claim of
    the component (``family``, memo table ``struct_dictionaries``), chunk by chunk as preset
    dictionaries (:func:`_pack`). An entry is found only by a digest of its exact content
    (``marshal`` of the key and the object), so a stale or foreign group can only miss; the
    group is written again only when its set of entries changed (:meth:`close`).
    """

    __slots__ = ("_family", "_group", "_heads", "_memos", "_packed")

    def __init__(self, group: Hashable, memos: Memos | None, family: Hashable = None) -> None:
        self._group = group
        self._family = family
        self._memos = memos
        self._packed: dict[bytes, bytes] | None = None  # the group's entries, once unpacked
        self._heads: dict[bytes, bytes] = {}  # this answer's entries by digest

    def _load_group(self, memos: Memos) -> dict[bytes, bytes]:
        got = memos.tables["packed_structs"].get(self._group)
        if got is None:
            return {}
        _, ref_id, blob = got
        ref = b""
        if ref_id:
            known = memos.tables["struct_dictionaries"].get(self._family)
            if known is None or known[0] != ref_id:
                return {}  # its reference is gone: rebuilt, and packed again
            ref = known[1]
        try:
            # our own marshal of a dict of bytes → bytes, written by close() in this process
            heads = marshal.loads(_unpack(blob, ref))  # noqa: S302
        except (zlib.error, ValueError, EOFError, TypeError):
            return {}
        return heads if isinstance(heads, dict) else {}

    def _readable(self, memos: Memos, ref_id: bytes) -> bool:
        """Whether a group packed against reference ``ref_id`` can still be unpacked."""
        if not ref_id:
            return True
        known = memos.tables["struct_dictionaries"].peek(self._family)
        return known is not None and known[0] == ref_id

    def _cached(self, mkey: bytes, build: Callable[[], bytes]) -> bytes:
        memos = self._memos
        if memos is None:
            return build()
        hot = memos.tables["structs"]
        digest = hashlib.blake2b(mkey, digest_size=16).digest()
        hit = hot.get(mkey)
        if hit is not None:
            head: bytes = hit[0]
        else:
            if self._packed is None:
                self._packed = self._load_group(memos)
            found = self._packed.get(digest)
            if found is None:
                head = build()
                hot.put(mkey, (head,), 2 * len(mkey) + len(head))
            else:  # a claim not composed lately: its group holds it, one table is enough
                head = found
        self._heads[digest] = head
        return head

    def entry(self, key: str, obj: Mapping[str, Any], ready: int) -> bytes:
        """One of the claim's ``desired.resources`` entries (:func:`resource_entry`).

        An object mostly repeats under its key from one reconcile to the next, so the whole
        entry but its last byte (``ready``, one varint byte for every ``fnv1.Ready`` value) is
        kept: one lookup instead of the Struct's and the framing's.
        """
        return self._entry(key, obj, ready, _marshalled((key, obj)))

    def _entry(self, key: str, obj: Mapping[str, Any], ready: int, mkey: bytes | None) -> bytes:
        if mkey is None or not 0 <= ready < 0x80:  # not plain data, or ready past one byte
            return resource_entry(key, struct_bytes(obj, self._memos), ready)
        head = self._cached(mkey, lambda: resource_entry(key, struct_bytes(obj), 0)[:-1])
        return head + _SMALL[ready]

    def struct(self, obj: Mapping[str, Any]) -> bytes:
        """:func:`struct_bytes` of a Struct of the claim's answer (the XR's status)."""
        mkey = _marshalled(obj)
        if mkey is None:
            return struct_bytes(obj, self._memos)
        return self._cached(mkey, lambda: struct_bytes(obj))

    def answer(
        self, items: Sequence[tuple[str, Mapping[str, Any], int]], status: Mapping[str, Any]
    ) -> tuple[list[bytes], bytes]:
        """Every ``desired.resources`` entry of the claim's answer (``items``: key, object,
        ready) and its XR's status Struct, then :meth:`close`.

        A claim polled with nothing changed composes the very objects it composed last time:
        its last answer is kept whole (memo table ``claim_answers``, a few dozen claims) and
        given again when the marshal of every object, its readiness and the status are equal
        byte for byte -- one comparison instead of a digest and a lookup per object.
        """
        memos = self._memos
        mkeys = [_marshalled((key, obj)) for key, obj, _ in items]
        whole = None
        if None not in mkeys and all(0 <= ready < 0x80 for _, _, ready in items):
            whole = _marshalled((mkeys, bytes(ready for _, _, ready in items), status))
        table = None if memos is None else memos.tables["claim_answers"]
        if table is not None and whole is not None:
            last = table.get(self._group)
            if last is not None and last[0] == whole:
                return last[1], last[2]
        out = [
            self._entry(key, obj, ready, mkey)
            for (key, obj, ready), mkey in zip(items, mkeys, strict=True)
        ]
        st = self.struct({"status": status})
        self.close()
        if table is not None and whole is not None:
            table.put(self._group, (whole, out, st), len(whole) + sum(map(len, out)) + len(st))
        return out, st

    def close(self) -> None:
        """Write the group again if this answer's entries are not the ones it holds."""
        memos = self._memos
        if memos is None or not self._heads:
            return
        table = memos.tables["packed_structs"]
        fingerprint = hashlib.blake2b(b"".join(sorted(self._heads)), digest_size=16).digest()
        got = table.peek(self._group)
        if got is not None and got[0] == fingerprint and self._readable(memos, got[1]):
            return
        raw = marshal.dumps(self._heads)
        ref_id, ref = b"", b""
        if self._family is not None:
            refs = memos.tables["struct_dictionaries"]
            known = refs.get(self._family)
            # The component's first packed claim is the reference; a claim twice its size
            # replaces it (a first answer may hold only a few objects), so it changes at most
            # a few times and the groups packed against an old one are packed again once.
            if known is None or 2 * len(known[1]) < min(len(raw), _REFERENCE):
                ref = raw[:_REFERENCE]
                ref_id = hashlib.blake2b(ref, digest_size=16).digest()
                refs.put(self._family, (ref_id, ref), len(ref) + 200)
            else:
                ref_id, ref = known
        blob = _pack(raw, ref)
        table.put(self._group, (fingerprint, ref_id, blob), len(blob) + 200)


def desired_field(entries: list[bytes]) -> bytes:
    """A RunFunctionResponse's ``desired`` field holding ``entries`` (b"" when none): appended
    to a serialized response, protobuf merges it into the ``desired`` already there.
    """
    return _delimited(b"\x12", b"".join(entries)) if entries else b""
