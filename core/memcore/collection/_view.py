"""What a pipeline stage may touch of a collection: a read-only view.

Stages search and read; they never write. :class:`CollectionView` is what
``Stage.check(collection)`` and ``PipelineContext.collection`` give them: the collection's
searches and reads, no insert, delete, state or index management (those are a service's).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from ._collection import Collection
    from ..retrieval._fusion import Fusion
    from ..model._hit import Hit
    from ..model._query import Query
    from ..model._record import Record
    from ..embedders._space import Space

__all__ = ["CollectionView"]


class CollectionView:
    """A read-only view of a :class:`memcore.Collection` for pipeline stages."""

    __slots__ = ("_collection",)

    def __init__(self, collection: "Collection | CollectionView"):
        self._collection: Collection = collection._collection if isinstance(collection, CollectionView) else collection

    @property
    def spaces(self) -> Mapping[str, "Space"]:
        """The embedding spaces by name (read-only)."""
        return MappingProxyType(self._collection.spaces)

    def list_indexes(self) -> list[dict[str, Any]]:
        """Each index: name, kind, config, size, score name and requirements."""
        return self._collection.list_indexes()

    def has_index(self, name: str) -> bool:
        """True when an index of that name exists."""
        return self._collection.has_index(name)

    def search_index(self, name: str, query: "Query", k: int, *, list_name: str | None = None) -> list["Hit"]:
        """Search one index (embedding and filters handled), see :meth:`Collection.search_index`."""
        return self._collection.search_index(name, query, k, list_name=list_name)

    def build_fusion(self, fusion: str | Mapping[str, Any] | "Fusion") -> "Fusion":
        """A fusion strategy from a registered name, a config dict or an instance."""
        return self._collection.build_fusion(fusion)

    def vectors(self, ids: Sequence[str], space: str) -> tuple[Any, Any]:
        """Stored vectors of ``ids`` in ``space``: ``(matrix, present mask)``."""
        return self._collection.vectors(ids, space)

    def query_vector(self, query: "Query", space: str) -> Any:
        """The query's vector in ``space`` (embedded once and cached on the query)."""
        return self._collection.query_vector(query, space)

    def get(self, id: str) -> "Record":
        """One record (NotFoundError when absent)."""
        return self._collection.get(id)

    def get_many(self, ids: Sequence[str]) -> list["Record | None"]:
        """Records by id in order, None for unknown ids."""
        return self._collection.get_many(ids)

    def count(self, **kwargs: Any) -> int:
        """Number of records (``index``, ``where``, ``scope`` as in :meth:`Collection.count`)."""
        return self._collection.count(**kwargs)

    def ids(self, **kwargs: Any) -> list[str]:
        """Ids in insertion order (``index``, ``where``, ``scope`` as in :meth:`Collection.ids`)."""
        return self._collection.ids(**kwargs)

    def __repr__(self) -> str:
        return f"CollectionView({self._collection.path or 'in memory'})"
