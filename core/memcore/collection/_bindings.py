"""What a call binds on a collection beside its scope (:mod:`memcore.model._binding`): a
text filter every filtered read applies, and query vectors embedded ahead in one batch.

Both are context variables (per thread and per asyncio task) of the collection's state, set
for a ``with`` block: how :class:`memcore.Memory` passes ``where_document`` and a batch of
queries through any service and pipeline without a keyword of their own.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from ..model._document import DocumentFilter, both, parse_where_document
from ._base import CollectionBase

__all__ = ["CallBindings"]


class CallBindings(CollectionBase):
    """The per-call bindings of a collection's read path (a part of :class:`CollectionReader`)."""

    @contextmanager
    def text_filtered(self, where_document: Mapping[str, Any] | None) -> Iterator[DocumentFilter | None]:
        """Bind a text filter on the record text (``{"$contains": "..."}``) for what runs inside
        the ``with`` block (this thread or task): every filtered read (index searches, hence
        pipelines and services; :meth:`ids`, :meth:`count`) sees only records whose text
        matches it, AND-ed with any text filter bound outside. How :meth:`memcore.Memory.retrieve`
        and ``query`` pass ``where_document`` through any service. ``None`` binds nothing new.
        Raises :class:`~memcore.errors.FilterError` for a malformed filter (before the block)."""
        var = self._state.text_filter
        if where_document is None:  # the common call: nothing to parse or bind
            yield var.get()
            return
        parsed = parse_where_document(where_document)
        token = var.set(both(var.get(), parsed))
        try:
            yield var.get()
        finally:
            var.reset(token)

    @contextmanager
    def embedded_queries(self, texts: Sequence[str]) -> Iterator[None]:
        """Embed ``texts`` as queries in one batch per space (the spaces of this collection's
        indexes) for what runs inside the ``with`` block (this thread or task): a search of
        one of them uses its vector instead of embedding it alone. How
        :meth:`memcore.Memory.retrieve_many` embeds a batch of queries in one embedder call."""
        unique = list(dict.fromkeys(t for t in texts if isinstance(t, str) and t.strip()))
        with self._lock:
            self._check_open()
            spaces = [s for s in self._spaces_of(h for h in self._indexes.values() if h.error is None) if s in self._spaces]
        vectors: dict[tuple[str, str], Any] = dict(self._state.query_vectors.get() or {})
        for space in spaces:
            todo = [t for t in unique if (space, t) not in vectors]
            if todo:
                vectors.update(zip(((space, t) for t in todo), self._spaces[space].embed_queries(todo)))
        token = self._state.query_vectors.set(vectors)
        try:
            yield
        finally:
            self._state.query_vectors.reset(token)

    def _text_filter(self, parsed: DocumentFilter | None) -> DocumentFilter | None:
        """``parsed`` AND the text filter bound for this call."""
        return both(self._state.text_filter.get(), parsed)
