"""Searches of one shape, run together: what ``POST /v1/search`` hands the read pool.

A search through the service (``Memory.retrieve``) by a query text alone, or by a vector
alone, can run with other such searches of the same caller in one ``Memory.retrieve_many``
call (one index search and one record read for all; :mod:`.calls` takes those waiting
together). :func:`search_batch` says how: its shape (text or vector, ``k``, ``where``,
``where_document``, ``min_score``, the service options and the scope asked for: the
searches of one batch differ only in their query), the query, and the batched call.
A search by text and vector together, or by neither, runs alone.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Hashable, Sequence

from .schemas import SearchBody
from .tenancy import Served

__all__ = ["search_batch"]

Many = Callable[[Served, list[Any]], Sequence[list[dict[str, Any]]]]


def search_batch(body: SearchBody, options: dict[str, Any]) -> tuple[Callable[[], Hashable], Any, Many] | None:
    """``(shape, query, many)`` of a search that may run with others of its shape (see the
    module; ``options`` are the service options with the scope asked for), None for one
    that runs alone. ``shape()`` is the shape as canonical JSON (computed only when the
    read pool looks for company; None: alone), ``many(memory, queries)`` is
    ``memory.retrieve_many`` of the shape."""
    by_vector = body.vector is not None
    if by_vector == (body.query is not None):  # both, or neither: alone
        return None
    k, where, where_document, min_score = body.k, body.where, body.where_document, body.min_score

    def shape() -> Hashable:
        try:
            return json.dumps([by_vector, k, where, where_document, min_score, options], sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):  # something JSON cannot say as it came: alone
            return None

    def many(m: Served, queries: list[Any]) -> Sequence[list[dict[str, Any]]]:
        if by_vector:
            return m.retrieve_many(vectors=queries, k=k, where=where, where_document=where_document, min_score=min_score, **options)
        return m.retrieve_many(queries, k=k, where=where, where_document=where_document, min_score=min_score, **options)

    return shape, body.vector if by_vector else body.query, many
