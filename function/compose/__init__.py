"""The pure composition core: claim, policy and fetched component data in, desired state out.

No I/O happens here (the edge, :mod:`function.edge`, fetches and answers); see
:mod:`function.compose.core` for the one entry point.
"""
