"""The gRPC edge: where Crossplane's requests come in and the registry's bytes come from.

Everything here does I/O or speaks protobuf: the RunFunction servicer (:mod:`fn`), the server
with its answer reuse (:mod:`server`, :mod:`reads`), the required-resource round trips
(:mod:`requirements`), the OCM sources (:mod:`sources`), the protobuf ↔ dict conversion
(:mod:`structs`), metrics, and the in-process render (:mod:`render`, :mod:`settle`). The pure
core (:mod:`function.compose`, :mod:`function.configdata`) never imports from here.
"""
