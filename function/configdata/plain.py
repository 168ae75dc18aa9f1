"""Round-trip YAML nodes back to plain data, for anything that leaves the engine.

ruamel's round-trip containers and styled scalars are what keep a file's comments and
quotes, but Helm values, JSON patches and XR status need plain dicts, lists and scalars.
"""

from __future__ import annotations

import datetime
from typing import Any


def plain(node: Any) -> Any:
    """``node`` as plain dicts, lists and scalars, with no ruamel types left inside.

    Map keys that are not scalars become their text, and dates their ISO form, as JSON (Helm
    values, patches, status) has no place for them.

    Args:
        node: A round-trip YAML node, or plain data.

    Returns:
        A copy of ``node`` made of ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``
        and ``None`` only.
    """
    if isinstance(node, dict):
        return {
            str(k) if not isinstance(k, str | int | float | bool) else k: plain(v)
            for k, v in node.items()
        }
    if isinstance(node, list | tuple):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, datetime.date | datetime.datetime):
        return node.isoformat()
    return str(node)
