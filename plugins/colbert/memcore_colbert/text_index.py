"""What the in-process and the remote colbert index check alike: records and queries have text."""

from __future__ import annotations

from typing import ClassVar, Sequence

from memcore.plugin import Index, Query, Record, ValidationError

from .config import ColbertQueryMode


class ColbertTextIndex(Index):
    """The checks of both colbert index kinds: a record needs text, a query needs text and a
    valid query mode (``extras[<kind>]``, parsed once per query)."""

    label: ClassVar[str] = "colbert"
    """The kind named in messages."""

    def validate(self, records: Sequence[Record]) -> None:
        for r in records:
            if not isinstance(r.text, str):
                raise ValidationError(f"index {self.name!r}: record {r.id!r} has no text")

    def validate_query(self, query: Query) -> None:
        self._mode(query)
        self._text(query)

    def _text(self, query: Query) -> str:
        """The query's text (ValidationError when it has none)."""
        if not (isinstance(query.text, str) and query.text.strip()):
            raise ValidationError(f"index {self.name!r} ({self.label}) searches text: the query text is empty")
        return query.text

    def _mode(self, query: Query) -> ColbertQueryMode | None:
        mode: ColbertQueryMode | None = self.mode(query, ColbertQueryMode)
        return mode
