"""The API: the claim (XR) and policy models, their parsing, and the XRDs generated from them.

One package so the rules the function enforces and the schema ops install cannot drift.
"""
