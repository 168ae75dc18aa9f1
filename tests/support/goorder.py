"""Serialize a protobuf message as grpc-go does: every map's entries in random order.

Crossplane's function runner marshals requests with grpc-go's default codec, which writes
protobuf maps (every field of every ``Struct``) in Go's random map-iteration order: the same
content arrives as different bytes on every call. Python's serializer writes one order only,
so the tests make Crossplane's bytes here: fields in number order (as Go does), each map's
entries shuffled, recursively. The result parses back to an equal message.
"""

from __future__ import annotations

import random
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_LEN = 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _scalar(msg: Message, fd: FieldDescriptor, value: Any) -> bytes:
    """One scalar field as the standard serializer writes it (through a one-field copy)."""
    tmp = type(msg)()
    getattr(tmp, fd.name).append(value) if _repeated(fd) else setattr(tmp, fd.name, value)
    return tmp.SerializeToString()


def _repeated(fd: FieldDescriptor) -> bool:
    rep = getattr(fd, "is_repeated", None)
    return bool(rep) if rep is not None else fd.label == FieldDescriptor.LABEL_REPEATED


def go_order(msg: Message, rng: random.Random) -> bytes:
    out = []
    for fd, value in sorted(msg.ListFields(), key=lambda p: p[0].number):
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            keys = list(value.keys())
            rng.shuffle(keys)
            for k in keys:
                entry = _delimited(1, k.encode("utf-8"))
                v = value[k]
                if vfd.message_type is not None:
                    entry += _delimited(2, go_order(v, rng))
                else:
                    entry += _delimited(2, v if isinstance(v, bytes) else str(v).encode())
                out.append(_delimited(fd.number, entry))
        elif fd.message_type is not None:
            items = value if _repeated(fd) else [value]
            out += [_delimited(fd.number, go_order(v, rng)) for v in items]
        elif _repeated(fd):
            out += [_scalar(msg, fd, v) for v in value]
        else:
            out.append(_scalar(msg, fd, value))
    return b"".join(out)
