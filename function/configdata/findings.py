"""Findings: what the ConfigData engine warns about, as data.

An error stops composition; a finding does not, but someone must see it: the function turns
each into a Warning result, ``sack8s localize|configure|mutate`` print them on stderr, and
``sack8s check`` lists them. So the engine returns them from loading and planning (never logs
them itself), each with the place it is about.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One warning. ``message`` is complete and starts with the place (``ConfigData
    configuration.rules[0].value (file a.yaml): …``); the other fields locate it for tools.
    """

    code: str  # stable kind, e.g. "MissingTypeMeta", "YAML11Scalar", "SchemaViolation"
    message: str
    rule: str | None = (
        None  # "configuration.rules[2]", "localization[0].tag", "configuration.defaults"
    )
    file: str | None = None  # the rule's file, when it has one
    path: str | None = None  # the target path in that file, or the value's path

    def __str__(self) -> str:
        return self.message
