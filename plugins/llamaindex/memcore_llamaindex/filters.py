"""LlamaIndex ``MetadataFilters`` as memcore ``where`` filters."""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from memcore import FilterError

__all__ = ["to_where"]

OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
"""The LlamaIndex operators memcore filters express (the others raise FilterError)."""

CONDITIONS = {FilterCondition.AND: "$and", FilterCondition.OR: "$or"}


def to_where(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """The memcore ``where`` filter of LlamaIndex ``filters`` (None for none).

    :raises FilterError: an operator or condition memcore filters cannot express
        (``text_match``, ``contains``, ``any``, ``all``, ``is_empty``, ``not``).
    """
    if filters is None or not filters.filters:
        return None
    return _group(filters)


def _group(filters: MetadataFilters) -> dict[str, Any]:
    condition = CONDITIONS.get(filters.condition or FilterCondition.AND)
    if condition is None:
        raise FilterError(f"memcore filters have no {filters.condition!r} condition; use and / or")
    parts = [_group(f) if isinstance(f, MetadataFilters) else _one(f) for f in filters.filters]
    return parts[0] if len(parts) == 1 else {condition: parts}


def _one(condition: MetadataFilter) -> dict[str, Any]:
    operator = OPERATORS.get(condition.operator)
    if operator is None:
        raise FilterError(f"memcore filters have no {condition.operator.value!r} operator; use one of {[o.value for o in OPERATORS]}")
    value = list(condition.value) if isinstance(condition.value, (list, tuple)) else condition.value
    return {condition.key: {operator: value}}
