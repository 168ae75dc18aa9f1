"""``sack8s serve`` with the fn.py change proposed in docs/benchmarks.md ("What limits speed").

Benchmark-only (``run.py --proposed``): it measures what the proposed change to
``function/fn.py`` would save, in the same run, before anyone edits fn.py. The change:
RunFunction converts each *observed* composed resource to a dict only as far as the core
reads it (``apiVersion``, ``kind``, ``status``: readiness and the OCM gate; key presence for
the rest), and the observed XR without the status it wrote last time (only
``status.component`` is read back, for sticky versions), with a direct protobuf ``Struct``
walk instead of ``json_format.MessageToDict``.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from typing import Any

from google.protobuf import struct_pb2

import function.fn as fnmod
from function import structs


def _value(v: Any) -> Any:
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
    if msg is None:
        return {}
    if isinstance(msg, struct_pb2.Struct):
        return {k: _value(v) for k, v in msg.fields.items()}
    return structs.to_dict(msg)


def _observed(res: struct_pb2.Struct) -> dict[str, Any]:
    f = res.fields
    return {n: _value(f[n]) for n in ("apiVersion", "kind", "status") if n in f}


def _xr(res: struct_pb2.Struct) -> dict[str, Any]:
    """The observed XR as far as RunFunction reads it: identity, spec, and status.component
    (sticky version resolution); not the rest of the status it wrote last time."""
    f = res.fields
    out = {n: _value(f[n]) for n in ("apiVersion", "kind", "metadata", "spec") if n in f}
    if "status" in f:
        st = f["status"].struct_value.fields
        out["status"] = {"component": _value(st["component"])} if "component" in st else {}
    return out


def _replace(method: str, old: str, new: str) -> None:
    src = inspect.getsource(getattr(fnmod.FunctionRunner, method))
    if old not in src:  # applied already (or fn.py moved on): serve fn.py as it is
        print(f"proposed_fn: {method} has no {old!r}; serving fn.py unchanged there", file=sys.stderr)
        return
    ns: dict[str, Any] = {}
    exec(textwrap.dedent(src.replace(old, new)), fnmod.__dict__, ns)  # noqa: S102
    setattr(fnmod.FunctionRunner, method, ns[method])


def install() -> None:
    if getattr(fnmod, "_xr", None) is _xr:
        return
    fnmod.to_dict = to_dict
    fnmod._observed = _observed
    fnmod._xr = _xr
    old = "observed = {k: _struct(v.resource) for k, v in req.observed.resources.items()}"
    _replace("_run", old, old.replace("_struct(", "_observed("))
    _replace("RunFunction", "xr = _struct(req.observed.composite.resource)", "xr = _xr(req.observed.composite.resource)")


if __name__ == "__main__":
    install()
    from function.cli import main

    sys.exit(main())
