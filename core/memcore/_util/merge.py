"""Deep merge of settings tables (settings layers, pipeline preset overrides)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["merge_layers"]


def merge_layers(lower: Mapping[str, Any], upper: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``upper`` over ``lower``; a table whose ``kind`` changes is replaced whole.

    So ``store={"kind": "memory"}`` over a file's ``[store] kind = "sqlite" ...`` drops the
    sqlite options, while ``MEMCORE_INDEXES__VECTOR__METRIC=ip`` only tunes one option.
    """
    out = dict(lower)
    for key, value in upper.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping) and not ("kind" in value and value.get("kind") != below.get("kind")):
            out[key] = merge_layers(below, value)
        else:
            out[key] = value
    return out
