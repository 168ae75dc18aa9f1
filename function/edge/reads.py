"""What the function reads from a request: one projection, the input of every answer.

Crossplane sends each claim's request again on every reconcile, freshly serialized (Go writes
protobuf maps in random order) and with fields the function never looks at changing between
calls: ``resourceVersion`` and ``managedFields`` on every object, ``lastTransitionTime`` and
unrelated status on the composed objects. :func:`view` keeps only what the function reads, and
the whole compute path (``FunctionRunner``) runs on that view, never on the request itself. So
the view is, by construction, everything an answer depends on besides the registry facts
recorded while computing it (``function.cache.Facts``), and :func:`key` -- the SHA-256 of its
deterministic serialization -- is a sound key for reusing answers: two requests with one key
get the same answer, whatever their bytes or ``meta.tag``.

Adding a read means adding it here, or the core never sees it (an observed field missing from
the view is simply absent in ``observed``, which a test of the new read shows at once). The
view is conservative where a neighbour may read more: every metadata label and annotation of
every observed object (ownership marks), the whole status of the observed OCM Component (the
gate: version, digest, observedGeneration), every condition of every other observed object
(readiness) without its ``lastTransitionTime``, and everything of the XR except
``resourceVersion``, ``managedFields`` and the status fields it does not read back. Whatever
the function copies into its answer unread (``desired`` from earlier steps, ``context``) and
everything else in the request (input, credentials, required resources but for their churn,
``meta.capabilities``) is kept whole. Only ``meta.tag`` is left out of the key: it names the
request's bytes, not its content (the answer echoes it; see function/edge/server.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2

from function.compose import gates, ocmobjects

#: The XR's status fields the function reads back: the sticky version (component), what was
#: already reported (warnings, blockedBy) and the version the Flux objects carry (deploy).
XR_STATUS_READ = ("component", "warnings", "blockedBy", "deploy")
#: The XR's top-level fields read (status only as far as ``XR_STATUS_READ``).
XR_READ = ("apiVersion", "kind", "metadata", "spec", "status")
#: Metadata that changes on every write without the object changing: never read, on any object.
METADATA_CHURN = ("resourceVersion", "managedFields")
#: An observed composed object's metadata as read: its identity and ownership marks (labels,
#: annotations, Crossplane's controller reference: namespaces.observed_own), and for
#: the objects whose spec is read (``gates.OBSERVED_SPEC_KEYS``) the generation the gate compares.
OBSERVED_METADATA_READ = ("name", "namespace", "labels", "annotations", "ownerReferences")
#: What a condition carries that is read (everything but when it last changed).
CONDITION_CHURN = ("lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime")


def view(req: fnv1.RunFunctionRequest, *, in_place: bool = False) -> fnv1.RunFunctionRequest:
    """A copy of ``req`` holding only what the function reads (``meta.tag`` kept: see
    :func:`key`); ``in_place``: ``req`` itself, pruned (for a request nothing else reads).
    """
    if in_place:
        v = req
    else:
        v = fnv1.RunFunctionRequest()
        v.CopyFrom(req)
    _xr(v.observed.composite.resource)
    for k, r in v.observed.resources.items():
        _observed(k, r.resource)
    for reqd in (*v.required_resources.values(), *v.extra_resources.values()):
        for item in reqd.items:
            _drop(_sub(item.resource, "metadata"), METADATA_CHURN)
    return v


def _content_digest(msg: fnv1.RunFunctionRequest) -> bytes:
    """SHA-256 of the deterministic serialization with ``meta.tag`` left out (the tag is
    computed before required resources are filled in, so it never stands for content).
    """
    tag = msg.meta.tag
    msg.meta.tag = ""
    try:
        data = msg.SerializeToString(deterministic=True)
    finally:
        msg.meta.tag = tag
    return hashlib.sha256(data).digest()


def key(v: fnv1.RunFunctionRequest) -> bytes:
    """The reuse key of a :func:`view`."""
    return _content_digest(v)


def exact_key(req: fnv1.RunFunctionRequest) -> bytes:
    """The digest of the request's exact content: cheaper than :func:`view`, and a function
    of the content like it, so it can stand for the view's :func:`key` of a request seen
    before (``Responses.alias``).
    """
    return _content_digest(req)


def _xr(s: struct_pb2.Struct) -> None:
    _keep(s, XR_READ)
    _drop(_sub(s, "metadata"), METADATA_CHURN)
    _keep(_sub(s, "status"), XR_STATUS_READ)


def _observed(k: str, s: struct_pb2.Struct) -> None:
    # The hot loop of a reused answer (one call per observed object), as cheap as upb allows:
    # :func:`_only` tests for names (no key strings made) and lists the keys only when a
    # name it does not know is there.
    f = s.fields
    spec_read = k in _SPEC_KEYS
    if spec_read:
        _only(f, _TOP_SPEC, ())
    else:
        _only(f, _TOP, _TOP_CHURN)
    if "metadata" in f:
        mv = f["metadata"]
        if mv.WhichOneof("kind") == "struct_value":
            if spec_read:
                _only(mv.struct_value.fields, _META_GEN, _META_CHURN_GEN)
            else:
                _only(mv.struct_value.fields, _META, _META_CHURN)
    if k == _COMPONENT or "status" not in f:
        return  # the OCM Component's whole status is read (the gate)
    sv = f["status"]
    if sv.WhichOneof("kind") != "struct_value":
        return
    sf = sv.struct_value.fields
    _only(sf, _STATUS_SPEC if spec_read else _STATUS, ())
    if "conditions" in sf:
        cv = sf["conditions"]
        if cv.WhichOneof("kind") == "list_value":
            for c in cv.list_value.values:
                if c.WhichOneof("kind") == "struct_value":
                    cf = c.struct_value.fields
                    for name in CONDITION_CHURN:
                        if name in cf:
                            del cf[name]


def _only(f: Any, allowed: tuple[str, ...], churn: tuple[str, ...]) -> None:
    """Keep only the ``allowed`` names of Struct fields ``f``: the usual ``churn`` deleted by
    name first, then the keys listed (two thirds of the cost) only if any other is left.
    """
    for name in churn:
        if name in f:
            del f[name]
    present = 0
    for name in allowed:
        if name in f:
            present += 1
    if present != len(f):
        keep = frozenset(allowed)
        for name in [n for n in f if n not in keep]:
            del f[name]


_SPEC_KEYS = frozenset(gates.OBSERVED_SPEC_KEYS)
_COMPONENT = ocmobjects.key_component()
_TOP = ("apiVersion", "kind", "metadata", "status")
_TOP_SPEC = (*_TOP, "spec")
_TOP_CHURN = ("spec",)  # what is usually there and not read: deleted by name
_META = OBSERVED_METADATA_READ
_META_GEN = (*_META, "generation")
_META_CHURN_GEN = (*METADATA_CHURN, "uid", "creationTimestamp")
_META_CHURN = (*_META_CHURN_GEN, "generation")
_STATUS = ("conditions",)
_STATUS_SPEC = (*_STATUS, "observedGeneration")


def _sub(s: struct_pb2.Struct | None, name: str) -> struct_pb2.Struct | None:
    """The Struct under ``name`` (None when absent or not an object; never creates it)."""
    if s is None or name not in s.fields:
        return None
    value = s.fields[name]
    return value.struct_value if value.WhichOneof("kind") == "struct_value" else None


def _keep(s: struct_pb2.Struct | None, names: tuple[str, ...]) -> None:
    if s is not None:
        _only(s.fields, names, ())


def _drop(s: struct_pb2.Struct | None, names: Iterable[str]) -> None:
    if s is None:
        return
    f = s.fields
    for name in names:
        if name in f:
            del f[name]
