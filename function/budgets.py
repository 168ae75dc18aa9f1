"""Cost budgets for work on component content: process settings of the shared replica.

Everything inside a component (descriptor, ConfigData, schema, chart, manifests) is written
by a service team, and one replica of the function serves every tenant. Each step that runs
on that content has a budget here that no input can exceed; over a budget the render stops
with one Fatal naming the component, resource, file and budget. The defaults are sized from
real components (docs/security.md lists the measurements); operators change them with
``sack8s serve --budget NAME=VALUE``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from function.errors import SackError


@dataclass(frozen=True)
class Budgets:
    """Caps on the work one render may spend on tenant content, each set by its dashed name
    (:func:`configure`).
    """

    # nodes of one YAML/JSON document as parsed, and as expanded through aliases (the
    # largest real document, ~1,900 nodes: docs/security.md)
    yaml_nodes: int = 50_000
    # keyword evaluations per schema validation (the example ConfigData: 14; nested anyOf
    # bombs: 2^depth)
    schema_steps: int = 20_000
    # nodes of the evaluated configuration (every rule value and the merged values, aliases
    # and repeated references expanded as they will be written)
    expression_nodes: int = 100_000
    # did-you-mean: created keys checked per mutation, and existing keys compared per created key
    suggestion_keys: int = 50
    suggestion_candidates: int = 500
    # CPU of one render's composition (its worker thread), checked in the loops above: a
    # backstop for the sum of bounded steps (benign renders: 50-500 ms)
    render_cpu_ms: int = 5_000


class RenderBudgetExceeded(SackError):
    """The render's composition used more CPU than the render-cpu-ms budget."""

    reason = "ComponentError"


_current = Budgets()


def current() -> Budgets:
    return _current


def names() -> list[str]:
    return [f.name.replace("_", "-") for f in dataclasses.fields(Budgets)]


def configure(settings: dict[str, int]) -> Budgets:
    """Set budgets by their dashed names (``schema-steps``); each must be a positive integer."""
    global _current  # noqa: PLW0603 - one process-wide setting, set once at startup
    known = set(names())
    for name, value in settings.items():
        if name not in known:
            raise ValueError(f"unknown budget {name!r} (known: {', '.join(sorted(known))})")
        if value <= 0:
            raise ValueError(f"budget {name} must be positive, got {value}")
    _current = dataclasses.replace(
        _current, **{k.replace("-", "_"): v for k, v in settings.items()}
    )
    return _current


class Offload(BaseException):
    """An inline composition ran past its allowance (:func:`cpu_deadline` ``inline_ms``).

    Raised from :func:`check_cpu` in a composition run on the event loop's thread because its
    component composed cheaply before; the edge runs it again in a worker thread
    (function/edge/fn.py), so a render that turns out long never holds the loop. A
    ``BaseException`` so that no handler in the core mistakes it for a failure of the content.
    """


# (render-cpu-ms deadline, inline allowance or None), in this thread's CPU time
_deadline: contextvars.ContextVar[tuple[float, float | None] | None] = contextvars.ContextVar(
    "render_cpu_deadline", default=None
)


@contextmanager
def cpu_deadline(inline_ms: float | None = None) -> Iterator[None]:
    """Within: :func:`check_cpu` raises once this thread spent ``render-cpu-ms`` of CPU, and
    :class:`Offload` once it spent ``inline_ms`` (when given).
    """
    now = time.thread_time()
    inline = None if inline_ms is None else now + inline_ms / 1000
    token = _deadline.set((now + _current.render_cpu_ms / 1000, inline))
    try:
        yield
    finally:
        _deadline.reset(token)


def check_cpu() -> None:
    """Called from the loops that work on component content (every few thousand steps)."""
    deadline = _deadline.get()
    if deadline is None:
        return
    spent = time.thread_time()
    if deadline[1] is not None and spent > deadline[1]:
        raise Offload
    if spent > deadline[0]:
        raise RenderBudgetExceeded(
            "",
            f"composing took more than {_current.render_cpu_ms} ms of CPU (the render-cpu-ms "
            "budget)",
        )
