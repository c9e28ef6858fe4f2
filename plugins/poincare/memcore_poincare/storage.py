"""HyperAmy storage: emotion particles in a Chroma collection (cosine space).

One Chroma record per :class:`~.types.Point`: the id, the normalised emotion vector as the
embedding (always passed explicitly: Chroma's default embedding function is never used)
and the metadata of :meth:`Point.to_metadata`. Writes are validated as a whole before
anything reaches Chroma (typed :mod:`memcore` errors) and sent in batches of Chroma's
``get_max_batch_size()``.

Links: on upsert, link targets that are neither in the batch nor stored are reported
(``unknown_links``: ``"error"`` raises, ``"drop"`` removes them, ``"keep"`` keeps them);
on delete, the points linking to a deleted id lose that link (``clean_links_on_delete``),
found with one metadata query on ``link_to``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from memcore.plugin import ConfigError, DimensionError, DuplicateIdError, NotFoundError, ValidationError

from memcore_chroma_support import ChromaConnection, chunks, open_client
from .chroma_state import write_position
from .mirror import ParticleMirror
from .snapshot import MirrorSnapshot
from .physics import unit_directions
from .types import Point

__all__ = ["HyperAmyStorage", "UpsertReport", "COLLECTION_NAME", "chunks"]

COLLECTION_NAME = "emotion_particles"
SNAPSHOT_DIR = "memcore-mirror"  # <persist_path>/memcore-mirror/<collection>/: the mirror snapshot
UnknownLinks = Literal["error", "drop", "keep"]


@dataclass
class UpsertReport:
    """What an upsert did: the ids written and, per point, link targets that exist nowhere."""

    ids: list[str]
    unknown_links: dict[str, set[str]] = field(default_factory=dict)


def check_collection_name(name: str) -> str:
    """Chroma's rule: 3-512 characters of ``[a-zA-Z0-9._-]``, alphanumeric at both ends."""
    ok = 3 <= len(name) <= 512 and all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in name)
    if not ok or not (name[0].isalnum() and name[-1].isalnum()):
        raise ConfigError(f"bad Chroma collection name {name!r}: 3-512 characters of [a-zA-Z0-9._-], alphanumeric at both ends")
    return name


class HyperAmyStorage:
    """Persistence of points in Chroma (embedded ``PersistentClient`` by default).

    ``persist_path``: the embedded database folder; ``connection``: a
    :class:`ChromaConnection` (``mode="http"`` for a Chroma server); ``client``: an
    already open Chroma client (overrides both). ``mirror``: keep the in-memory particle
    mirror the search reads (:mod:`.mirror`); default on for an embedded database this
    object opened, off for a server or a given client (other writers would not reach it).

    ``snapshot``: with the mirror on an embedded database this object opened, save the
    mirror in ``<persist_path>/memcore-mirror/<collection>/`` (:mod:`.snapshot`) on
    :meth:`save_snapshot` and :meth:`close` (incremental: only what changed since the last
    save), and read it back on reopen instead of rebuilding the mirror from Chroma. The
    snapshot records Chroma's write position (:mod:`.chroma_state`): after any later write
    to the collection (another process, or this one after its last save) it is stale and the
    mirror is rebuilt from Chroma, as are damaged snapshot files.
    """

    def __init__(
        self,
        persist_path: str | Path | None = "./hyperamy_db",
        *,
        connection: ChromaConnection | None = None,
        client: Any = None,
        collection_name: str = COLLECTION_NAME,
        clean_links_on_delete: bool = True,
        unknown_links: UnknownLinks = "error",
        mirror: bool | None = None,
        snapshot: bool = True,
    ):
        if unknown_links not in ("error", "drop", "keep"):
            raise ConfigError(f"unknown_links must be 'error', 'drop' or 'keep', got {unknown_links!r}")
        self.connection = connection or ChromaConnection()
        self.client = client if client is not None else open_client(self.connection, persist_path)
        self.collection_name = check_collection_name(collection_name)
        self.collection = self.client.get_or_create_collection(name=collection_name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        space = (self.collection.metadata or {}).get("hnsw:space", "cosine")
        if space != "cosine":
            raise ConfigError(f"Chroma collection {collection_name!r} uses space {space!r}; HyperAmy needs 'cosine'")
        self.clean_links_on_delete = clean_links_on_delete
        self.unknown_links: UnknownLinks = unknown_links
        self.batch_size = max(1, int(self.client.get_max_batch_size()))
        self.dim: int | None = None
        # the in-memory particle mirror (.mirror): on unless other processes may write (a server)
        self.use_mirror = (self.connection.mode != "http" and client is None) if mirror is None else bool(mirror)
        self._mirror: ParticleMirror | None = None
        if self.collection.count():
            first = self.collection.get(limit=1, include=["embeddings"])
            self.dim = int(np.asarray(first["embeddings"]).shape[1])
        self._empty_at_start = self.dim is None  # then the mirror starts empty, in step, with no read from Chroma
        embedded_here = self.connection.mode == "embedded" and client is None and persist_path is not None
        self._persist = Path(persist_path) if embedded_here and persist_path is not None else None
        self._snapshot: MirrorSnapshot | None = None
        if self._persist is not None and self.use_mirror and snapshot:
            self._snapshot = MirrorSnapshot(self._persist / SNAPSHOT_DIR / self.collection_name)

    # -- the mirror snapshot ---------------------------------------------------------------

    def _stamp(self) -> dict[str, Any] | None:
        """What a snapshot of this collection must match: its name and Chroma's write position."""
        if self._persist is None:
            return None
        position = write_position(self._persist, str(self.collection.id))
        return None if position is None else {"collection": self.collection_name, "chroma": position}

    def _load_snapshot(self) -> ParticleMirror | None:
        """The saved mirror if it is whole and Chroma has not changed since (else None)."""
        if self._snapshot is None or self.dim is None or not self._snapshot.manifest_path.is_file():
            return None
        stamp = self._stamp()
        mirror = self._snapshot.load(self.dim, stamp) if stamp is not None else None
        if mirror is not None and len(mirror) != self.count():
            return None
        return mirror

    def _mirror_before_write(self) -> None:
        """A write before the first search: read a valid snapshot first, so that the write is
        journaled on top of it and the next save stays incremental."""
        if self._mirror is None and self.use_mirror and not self._empty_at_start:
            self._mirror = self._load_snapshot()

    def save_snapshot(self) -> str | None:
        """Save the mirror's snapshot: ``"base"`` (every row), ``"delta"`` (the rows changed
        since the last save), ``"unchanged"``; None when there is nothing to save (no
        snapshot folder, mirror off or not built) or the mirror no longer matches Chroma's
        count (another writer: the snapshot is removed, the next open rebuilds)."""
        if self._snapshot is None or self._mirror is None:
            return None
        stamp = self._stamp()
        if stamp is None or len(self._mirror) != self.count():
            self._snapshot.clear()
            return None
        return self._snapshot.save(self._mirror, stamp)

    def close(self) -> None:
        """Save the mirror's snapshot (:meth:`save_snapshot`). The storage stays usable."""
        self.save_snapshot()

    def __enter__(self) -> "HyperAmyStorage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def upsert_point(self, point: Point) -> UpsertReport:
        """Store or replace one point (see :meth:`upsert_points`)."""
        return self.upsert_points([point])

    def upsert_points(self, points: Sequence[Point], unknown_links: UnknownLinks | None = None) -> UpsertReport:
        """Store or replace points in batches; everything is validated first.

        Raises :class:`memcore.ValidationError` (bad id, v, T, born or links; NaN, infinite
        or zero vectors), :class:`memcore.DimensionError` (a dimension other than the
        collection's), :class:`memcore.DuplicateIdError` (an id twice in the batch), and with
        ``unknown_links="error"`` a ValidationError naming the unknown link targets.
        """
        policy = unknown_links or self.unknown_links
        points = list(points)
        if not points:
            return UpsertReport([])
        ids = self._check_ids(points)
        embeddings = self._embeddings(points)
        for p in points:
            for name in ("v", "T", "born"):
                value = getattr(p, name)
                if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(value):
                    raise ValidationError(f"point {p.id!r}: {name} must be a finite number, got {value!r}")
            if p.current_time is not None and not math.isfinite(p.current_time):
                raise ValidationError(f"point {p.id!r}: current_time must be finite or None")
            if isinstance(p.links, str) or not all(isinstance(t, str) and t for t in p.links):
                raise ValidationError(f"point {p.id!r}: links must be a list of non-empty id strings")
        unknown = self._unknown_links(points, set(ids))
        if unknown and policy == "error":
            listed = "; ".join(f"{pid} -> {sorted(t)}" for pid, t in unknown.items())
            raise ValidationError(f"unknown link targets (neither stored nor in the batch): {listed}")
        now = time.time()
        metadatas = []
        for p in points:
            links = list(dict.fromkeys(p.links))
            if policy == "drop" and p.id in unknown:
                links = [t for t in links if t not in unknown[p.id]]
            metadatas.append(Point(p.id, None, p.v, p.T, p.born, p.current_time if p.current_time is not None else now, links).to_metadata())
        self._mirror_before_write()
        for sl in chunks(range(len(ids)), self.batch_size):
            self.collection.upsert(ids=ids[sl.start : sl.stop], embeddings=embeddings[sl.start : sl.stop], metadatas=metadatas[sl.start : sl.stop])
        if self._mirror is None and self.use_mirror and self._empty_at_start:
            self._mirror = ParticleMirror(int(embeddings.shape[1]))
        if self._mirror is not None:
            self._mirror.upsert(ids, embeddings, metadatas)
        self._empty_at_start = False
        if self.dim is None:
            self.dim = int(embeddings.shape[1])
        return UpsertReport(ids, unknown)

    def _check_ids(self, points: Sequence[Point]) -> list[str]:
        ids = [p.id for p in points]
        for rid in ids:
            if not isinstance(rid, str) or not rid:
                raise ValidationError(f"point ids must be non-empty strings, got {rid!r}")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise DuplicateIdError(f"point id {dup!r} appears twice in one upsert")
        return ids

    def _embeddings(self, points: Sequence[Point]) -> np.ndarray:
        rows = []
        for p in points:
            vec = np.asarray(p.emotion_vector.detach().cpu().numpy() if hasattr(p.emotion_vector, "detach") else p.emotion_vector, dtype=np.float64)
            if vec.ndim != 1:
                raise DimensionError(f"point {p.id!r}: emotion_vector must be 1-d, got shape {vec.shape}")
            if self.dim is not None and vec.shape[0] != self.dim:
                raise DimensionError(f"point {p.id!r}: expected a {self.dim}-d emotion_vector, got {vec.shape[0]}")
            rows.append(vec)
        if len({r.shape[0] for r in rows}) != 1:
            raise DimensionError("points of one upsert have emotion vectors of different dimensions")
        try:
            return unit_directions(np.stack(rows), "emotion_vector")
        except ValidationError as exc:
            raise ValidationError(str(exc).replace("vector ", "of point ", 1)) from None

    def _unknown_links(self, points: Sequence[Point], batch: set[str]) -> dict[str, set[str]]:
        targets = {t for p in points for t in p.links} - batch
        if not targets:
            return {}
        known = self.existing(sorted(targets))
        missing = targets - known
        return {p.id: {t for t in p.links if t in missing} for p in points if any(t in missing for t in p.links)}

    def delete(self, ids: Sequence[str], clean_links: bool | None = None) -> int:
        """Delete points (unknown ids are ignored); returns how many existed. With link
        cleaning (default: ``clean_links_on_delete``) the remaining points lose their links
        to the deleted ids."""
        ids = [i for i in dict.fromkeys(ids)]
        if not ids:
            return 0
        if not all(isinstance(i, str) and i for i in ids):
            raise ValidationError("ids to delete must be non-empty strings")
        present = sorted(self.existing(ids))
        if present:
            self._mirror_before_write()
        for part in chunks(present, self.batch_size):
            self.collection.delete(ids=list(part))
        if self._mirror is not None:
            self._mirror.delete(present)
        if present and (self.clean_links_on_delete if clean_links is None else clean_links):
            self._unlink(set(present))
        return len(present)

    def _unlink(self, gone: set[str]) -> None:
        """Remove links to ``gone`` from every point that has one (one ``get`` per 100 ids)."""
        targets = sorted(gone)
        for part in chunks(targets, 100):
            clauses = [{"link_to": {"$contains": t}} for t in part]
            where = clauses[0] if len(clauses) == 1 else {"$or": clauses}
            found = self.collection.get(where=where, include=["metadatas"])
            if not found["ids"]:
                continue
            metas = []
            for meta in found["metadatas"]:
                links = [t for t in json.loads(meta.get("links") or "[]") if t not in gone]
                metas.append({"links": json.dumps(links), "link_to": links or None})
            for sl in chunks(range(len(found["ids"])), self.batch_size):
                self.collection.update(ids=found["ids"][sl.start : sl.stop], metadatas=metas[sl.start : sl.stop])
            if self._mirror is not None:
                self._mirror.set_metadata(found["ids"], metas)

    # -- reading ---------------------------------------------------------------------------

    def existing(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that is stored (batched ``get`` without payload)."""
        out: set[str] = set()
        for part in chunks(list(ids), self.batch_size):
            out.update(self.collection.get(ids=list(part), include=[])["ids"])
        return out

    def get_points(self, ids: Sequence[str]) -> list[Point]:
        """The stored points (vectors normalised), in the order of ``ids``; NotFoundError if one is missing."""
        ids = list(ids)
        found = self.collection.get(ids=ids, include=["embeddings", "metadatas"]) if ids else {"ids": []}
        by_id = {rid: i for i, rid in enumerate(found["ids"])}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise NotFoundError(f"no point with id {missing[0]!r}")
        out = []
        for rid in ids:
            i = by_id[rid]
            meta = found["metadatas"][i]
            out.append(
                Point(
                    rid, np.asarray(found["embeddings"][i]), meta["v"], meta["T"], meta["born"], meta.get("last_updated"), json.loads(meta.get("links") or "[]")
                )
            )
        return out

    def count(self) -> int:
        """Number of stored points."""
        return int(self.collection.count())

    def particle_mirror(self) -> ParticleMirror | None:
        """The in-memory mirror of the stored points (built from Chroma on first use), or
        None when it is off or nothing is stored yet."""
        if not self.use_mirror or self.dim is None:
            return None
        if self._mirror is None:
            self._mirror = self._load_snapshot()
            if self._mirror is None:
                self._mirror = ParticleMirror.from_collection(self.collection, self.dim, self.batch_size)
        return self._mirror
