"""The seam between the ConfigData engine and the composition core.

The core asks one question: "given this ConfigData, component, deployable content and
values, what goes into the Flux object?" The answer is a :class:`FluxMutation`: Helm values
for a HelmRelease, or patches for a Kustomization, plus a trace of every substitution (for
XR status) and any warnings. No I/O happens here.

OWNER: ConfigData engine (issue 14). This file fixes the interface; the engine fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from function.ocm.model import ComponentVersion, Resource

Flavour = Literal["helm", "kustomize"]


@dataclass(frozen=True)
class Trace:
    """One value the function writes, traceable to the rule that produced it."""

    rule: str  # "localization[0]" or "configuration.rules[2]"
    file: str
    document: int
    path: str
    value: Any
    old: Any = None


@dataclass(frozen=True)
class FluxMutation:
    helm_values: Mapping[str, Any] = field(default_factory=dict)
    kustomize_patches: tuple[Mapping[str, Any], ...] = ()
    trace: tuple[Trace, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # rules that address files outside this deployable, with why


Locate = Callable[[ComponentVersion, Resource], str]


def mutation_for(
    flavour: Flavour,
    configdata: bytes,
    component: ComponentVersion,
    files: Mapping[str, bytes],
    values: Mapping[str, Any] | None,
    *,
    configdata_name: str = "ConfigData",
    locate: Locate | None = None,
) -> FluxMutation:
    """Plan and apply every ConfigData rule for one deployable, for Flux."""
    raise NotImplementedError
