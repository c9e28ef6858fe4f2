"""The ``chroma`` index: a memcore :class:`~memcore.plugin.Index` kept in a Chroma collection.

- vectors come from the collection's embedding space (``config.space``) and are always
  passed to Chroma explicitly (its default embedding function is never used); cosine
  vectors are normalised, NaN/infinite (and, for cosine, zero) vectors are refused with a
  typed error before anything reaches Chroma;
- adds are upserts in batches of Chroma's ``get_max_batch_size()``, removals deletes
  (unknown ids ignored);
- ``allowed`` is pushed down: the ids Chroma holds among them are passed as ``ids=`` to
  the query, so Chroma searches only those;
- ``save``/``load``/``close``: :mod:`memcore_chroma_support.home` (embedded: a PersistentClient in ``<dir>/chroma``;
  http: the collection on the Chroma server), plus ``state.json``.

Scores (higher is better): cosine ``1 - distance`` (cosine similarity, clipped to
[-1, 1]), ip ``1 - distance`` (the inner product), l2 ``-distance`` (minus the squared
Euclidean distance).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from memcore.plugin import Hit, IndexContext, Query, Record, ValidationError, VectorIndex

from .config import ChromaIndexConfig
from memcore_chroma_support import CollectionHome, chunks

__all__ = ["ChromaIndex"]

_SCORES = {
    "cosine": ("cosine similarity", (-1.0, 1.0)),
    "ip": ("inner product", (None, None)),
    "l2": ("negative squared L2 distance", (None, 0.0)),
}


class ChromaIndex(VectorIndex):
    """Vector search in a Chroma collection (embedded or on a Chroma server)."""

    format_version = 1
    config: ChromaIndexConfig
    durable_writes = True  # every add/remove reaches Chroma (on disk or a server) before any save

    def __init__(self, config: ChromaIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.score_name, self.score_range = _SCORES[config.metric]
        safe = re.sub(r"[^a-zA-Z0-9._-]", "-", context.name)[:200]
        self.home = CollectionHome(
            config.connection,
            f"{config.collection_prefix}-{safe}",
            config.configuration(),
            {"format_version": self.format_version, "kind": "chroma", "dim": self.dim, "metric": config.metric},
            f"chroma index {context.name!r}",
            folder=context.directory,
            read_only=context.read_only,
        )

    # -- validation ------------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        self._matrix(records)

    def _matrix(self, records: Sequence[Record]) -> tuple[list[str], np.ndarray]:
        """The records' ids and vectors, checked (:meth:`record_matrix`) and ready for Chroma
        (cosine: normalised), as one float32 matrix; zero norms (cosine) and squares float32
        cannot hold (ip/l2) refused in one array pass (the first bad record named)."""
        ids, x = self.record_matrix(records)
        if not len(x):
            return ids, x
        cosine = self.config.metric == "cosine"
        with np.errstate(over="ignore", invalid="ignore"):
            # cosine vectors are normalised (in float64); ip/l2 ones reach Chroma's float32 arithmetic as they are
            x64 = x.astype(np.float64) if cosine else None
            square: np.ndarray = np.einsum("ij,ij->i", x64, x64) if x64 is not None else np.einsum("ij,ij->i", x, x)
        bad = ~np.isfinite(square)  # finite values (checked), squares past float32 (ip/l2)
        if bad.any():
            raise ValidationError(f"index {self.name!r}: the vector of record {ids[int(np.argmax(bad))]!r} has values too large for float32 arithmetic")
        if x64 is None:
            return ids, np.ascontiguousarray(x)
        zero = square == 0.0
        if zero.any():
            raise ValidationError(f"index {self.name!r}: the vector of record {ids[int(np.argmax(zero))]!r} is all zeros: it has no cosine direction")
        unit: np.ndarray = (x64 / np.sqrt(square)[:, None]).astype(np.float32)
        return ids, unit

    def validate_query(self, query: Query) -> None:
        self._prepare_query(self.query_vector(query))

    def _prepare_query(self, v: np.ndarray) -> np.ndarray:
        """A checked query vector as float32 (1, dim), normalised (in float64) for cosine:
        ip/l2 ones reach Chroma's float32 arithmetic as they are."""
        what = f"index {self.name!r}: query vector"
        x = np.asarray(v, dtype=np.float32)
        cosine = self.config.metric == "cosine"
        x64 = x.astype(np.float64) if cosine else None
        with np.errstate(over="ignore", invalid="ignore"):
            square = float(np.dot(x64, x64) if x64 is not None else np.dot(x, x))
        if not math.isfinite(square):
            raise ValidationError(f"{what} has values too large for float32 arithmetic")
        if x64 is None:
            return np.ascontiguousarray(x).reshape(1, -1)
        if square == 0.0:
            raise ValidationError(f"{what} is all zeros: it has no cosine direction")
        return (x64 / math.sqrt(square)).astype(np.float32).reshape(1, -1)

    # -- writing ---------------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        ids, vectors = self._matrix(records)  # every record is checked, even one a later repeat replaces
        last = {rid: i for i, rid in enumerate(ids)}  # a repeated id: the last one wins
        if len(last) != len(ids):
            ids, vectors = list(last), vectors[list(last.values())]
        collection = self.home.collection
        for sl in chunks(range(len(ids)), self.home.batch_size):
            collection.upsert(ids=ids[sl.start : sl.stop], embeddings=vectors[sl.start : sl.stop])

    def remove(self, ids: Sequence[str]) -> None:
        self.home.delete(ids)

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.home.collection.count()) if self.home.opened else 0

    def held(self, ids: AbstractSet[str]) -> list[str]:
        """The ids among ``ids`` that the collection holds (batched ``get`` without payload)."""
        if not ids or not self.home.opened:
            return []
        out: list[str] = []
        wanted = [i for i in ids if isinstance(i, str)]
        for part in chunks(wanted, self.home.batch_size):
            out.extend(self.home.collection.get(ids=list(part), include=[])["ids"])
        return out

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return self._query(self._prepare_query(vector), k, allowed)[0]

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        return self._query(np.concatenate([self._prepare_query(v) for v in matrix]), k, allowed)

    def _query(self, x: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        empty: list[list[Hit]] = [[] for _ in range(len(x))]
        if not self.home.opened:
            return empty
        if allowed is None:
            found = self.home.collection.query(query_embeddings=x, n_results=k, include=["distances"])
        else:
            found = self._query_allowed(x, k, allowed)
            if found is None:
                return empty
        metric, source = self.config.metric, self.name
        out = []
        for row_ids, row_d in zip(found["ids"], found["distances"]):
            d = np.asarray(row_d, dtype=np.float64)
            if metric == "l2":
                scores = -d
            elif metric == "cosine":
                scores = np.clip(1.0 - d, -1.0, 1.0)
            else:
                scores = 1.0 - d
            out.append([Hit(rid, s, r, source) for rid, s, r in zip(row_ids, scores.tolist(), d.tolist())])
        return out

    def _query_allowed(self, x: np.ndarray, k: int, allowed: AbstractSet[str]) -> dict[str, Any] | None:
        """The query restricted to ``allowed`` (None when the index holds none of them).

        The allowed set a collection passes is made of this index's members, so it is
        first sent to Chroma as is (one call); Chroma refuses ids it does not hold, and
        only then are the held ones looked up (one more ``get``) and the query repeated.
        """
        ids = [i for i in allowed if isinstance(i, str)]
        if not ids:
            return None
        found: dict[str, Any]  # chromadb's QueryResult
        try:
            found = self.home.collection.query(query_embeddings=x, n_results=min(k, len(ids)), ids=ids, include=["distances"])
            return found
        except Exception:  # noqa: BLE001 - chromadb: "Error finding id" (an allowed id it does not hold)
            held = self.held(set(ids))
        if not held:
            return None
        found = self.home.collection.query(query_embeddings=x, n_results=min(k, len(held)), ids=held, include=["distances"])
        return found

    # -- persistence -----------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        self.home.save(Path(directory), {"count": len(self)})

    def load(self, directory: Path) -> None:
        self.home.load(Path(directory))

    def close(self) -> None:
        """Release the Chroma client; an unsaved (or dropped) generation is deleted."""
        self.home.close()

    def stats(self) -> dict[str, Any]:
        return {
            "size": len(self),
            "dim": self.dim,
            "space": self.config.space,
            "metric": self.config.metric,
            "mode": self.config.connection.mode,
            "collection": self.home.collection.name if self.home.opened else None,
        }
