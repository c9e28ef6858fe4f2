"""The ``poincare`` index: HyperAmy's particles as a memcore :class:`~memcore.plugin.Index`.

Each record is a particle: its direction is its vector in ``config.space``, its initial
intensity, temperature and birth time come from its metadata (``v_key``, ``T_key``,
``born_key``; defaults ``default_v``, ``default_T`` and the record's ``created_at``) and
its links from ``record.links`` (the store holds the truth; Chroma keeps a derived
copy). The particles live in a Chroma collection (:mod:`memcore_chroma_support.home`: embedded inside the
index folder, or on a Chroma server) and are searched with the four steps of
:class:`~.retrieval.HyperAmyRetrieval` (with embedded Chroma, the cone and neighbour
steps read an in-memory particle mirror, :mod:`.mirror`, which also answers the cone;
saved incrementally with the index, :mod:`.snapshot`, and rebuilt from Chroma when no
valid snapshot is there). Scores are higher-is-better: ``-distance``
(``raw`` holds the distance, penalised for neighbours).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from memcore.plugin import Hit, IndexContext, Query, Record, ValidationError, VectorIndex

from .config import PoincareIndexConfig, PoincareQueryMode
from .mirror import ParticleMirror
from .snapshot import MirrorSnapshot
from memcore_chroma_support import CollectionHome, chunks
from .physics import ParticleProjector, TimePhysics, unit_directions
from .retrieval import HyperAmyRetrieval
from .types import Point

__all__ = ["PoincareIndex"]


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


class PoincareIndex(VectorIndex):
    """Hyperbolic emotional memory as an index (cone -> shell -> neighbourhood -> aggregate)."""

    format_version = 1
    score_name = "negative Poincaré distance"
    durable_writes = True  # every add/remove reaches Chroma (on disk or a server) before any save
    score_range = (None, 0.0)
    config: PoincareIndexConfig

    def __init__(self, config: PoincareIndexConfig, context: IndexContext):
        super().__init__(config, context, links=True)
        self.projector = ParticleProjector(config.curvature, config.scaling_factor, TimePhysics(config.f, config.g))
        self.retrieval = HyperAmyRetrieval(self, self.projector, cone=config.cone)
        safe = re.sub(r"[^a-zA-Z0-9._-]", "-", context.name)[:200]
        self.home = CollectionHome(
            config.connection,
            f"{config.collection_prefix}-{safe}",
            {"hnsw": {"space": "cosine"}},
            {"format_version": self.format_version, "kind": "poincare", "dim": self.dim},
            f"poincare index {context.name!r}",
            folder=context.directory,
            read_only=context.read_only,
        )
        self._use_mirror = config.mirror == "on" or (config.mirror == "auto" and config.connection.mode == "embedded")
        self._mirror: ParticleMirror | None = ParticleMirror(self.dim) if self._use_mirror else None  # a new index is empty: in step
        self.last_snapshot_save: str | None = None  # what the last save wrote of the mirror: "base", "delta" or "unchanged"

    # -- the particle source of HyperAmyRetrieval ----------------------------------------

    @property
    def collection(self) -> Any:
        return self.home.collection

    def existing(self, ids: Sequence[str]) -> set[str]:
        if not self.home.opened:
            return set()
        out: set[str] = set()
        for part in chunks([i for i in ids if isinstance(i, str)], self.home.batch_size):
            out.update(self.home.collection.get(ids=list(part), include=[])["ids"])
        return out

    def count(self) -> int:
        return int(self.home.collection.count()) if self.home.opened else 0

    def particle_mirror(self) -> ParticleMirror | None:
        """The in-memory particle mirror (:mod:`.mirror`): empty for a new index, read from
        the snapshot ``save`` wrote, else built from the collection on first use after a
        load; None when ``mirror`` is off or no collection exists yet."""
        if not self._use_mirror or not self.home.opened:
            return None
        if self._mirror is None:
            self._mirror = ParticleMirror.from_collection(self.home.collection, self.dim, self.home.batch_size)
        return self._mirror

    def __len__(self) -> int:
        return self.count()

    # -- validation ------------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        self._points(records)

    def _points(self, records: Sequence[Record]) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
        """Ids, unit directions and Chroma metadatas of ``records`` (typed errors first)."""
        cfg = self.config
        ids, matrix = self.record_matrix(records)
        metas = []
        for r in records:
            values = {}
            for key, default in ((cfg.v_key, cfg.default_v), (cfg.T_key, cfg.default_T), (cfg.born_key, r.created_at)):
                value = r.metadata.get(key, default) if r.metadata else default
                if not _number(value) or (key != cfg.born_key and value < 0):
                    raise ValidationError(
                        f"index {self.name!r}: record {r.id!r}: metadata {key!r} must be a finite number{'' if key == cfg.born_key else ' >= 0'}, got {value!r}"
                    )
                values[key] = float(value)
            links = list(dict.fromkeys(link.target for link in r.links))
            updated = r.updated_at or r.created_at or None
            metas.append(Point(r.id, None, values[cfg.v_key], values[cfg.T_key], values[cfg.born_key], updated, links).to_metadata())
        if not ids:
            return [], matrix, []
        x = matrix.astype(np.float64)
        zero = ~np.any(x != 0, axis=1)
        if zero.any():
            raise ValidationError(f"index {self.name!r}: the vector of record {records[int(np.argmax(zero))].id!r} is all zeros (it has no direction)")
        directions = unit_directions(x, f"index {self.name!r}: records")
        return ids, directions, metas

    def _mode(self, query: Query) -> PoincareQueryMode:
        mode: PoincareQueryMode = self.mode(query, PoincareQueryMode, defaults={})
        return mode

    def _query_point(self, query: Query, v: np.ndarray) -> tuple[Point, PoincareQueryMode, float]:
        """The query particle of ``query`` at its (checked) vector ``v``, its mode, its ``t_now``."""
        mode = self._mode(query)
        t_now = mode.t_now if mode.t_now is not None else time.time()
        point = Point(
            "query",
            np.asarray(v, dtype=np.float64),
            mode.v if mode.v is not None else self.config.default_v,
            mode.T if mode.T is not None else self.config.default_T,
            mode.born if mode.born is not None else t_now,
        )
        return point, mode, t_now

    def validate_query(self, query: Query) -> None:
        self._mode(query)
        point, _, t_now = self._query_point(query, self.query_vector(query))
        self.retrieval.query_state(point, t_now)

    # -- writing ---------------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        latest = list({r.id: r for r in records}.values())  # a repeated id: the last one wins
        ids, directions, metas = self._points(latest)
        collection = self.home.collection
        for sl in chunks(range(len(ids)), self.home.batch_size):
            collection.upsert(ids=ids[sl.start : sl.stop], embeddings=directions[sl.start : sl.stop], metadatas=metas[sl.start : sl.stop])
        if self._mirror is not None:
            self._mirror.upsert(ids, directions, metas)

    def remove(self, ids: Sequence[str]) -> None:
        if not self.home.opened:
            return
        ids = self.home.delete(ids)
        if ids and self._mirror is not None:
            self._mirror.delete(ids)

    # -- reading ---------------------------------------------------------------------------

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return self._search_batch([query], vector[None, :], k, allowed)[0]

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        """Queries with the same ``cone_width``/``max_neighbors``/``neighbor_penalty`` share
        one Chroma cone query (:meth:`HyperAmyRetrieval.search_many`); each keeps its own
        particle (v, T, born) and ``t_now``."""
        prepared = [self._query_point(q, v) for q, v in zip(queries, matrix)]
        if not self.home.opened:
            for point, _, t_now in prepared:
                self.retrieval.query_state(point, t_now)  # still validate the queries
            return [[] for _ in queries]
        cfg = self.config
        groups: dict[tuple[int | None, int, float], list[int]] = {}
        for i, (_, mode, _) in enumerate(prepared):
            knobs = (
                mode.cone_width if mode.cone_width is not None else cfg.cone_width,
                mode.max_neighbors if mode.max_neighbors is not None else cfg.max_neighbors,
                mode.neighbor_penalty if mode.neighbor_penalty is not None else cfg.neighbor_penalty,
            )
            groups.setdefault(knobs, []).append(i)
        out: list[list[Hit]] = [[] for _ in queries]
        for (cone_width, max_neighbors, neighbor_penalty), members in groups.items():
            points = [replace(prepared[i][0], current_time=prepared[i][2]) for i in members]  # each query's own t_now
            found = self.retrieval.search_many(
                points, top_k=int(k), cone_width=cone_width, max_neighbors=max_neighbors, neighbor_penalty=neighbor_penalty, allowed=allowed
            )
            for i, results in zip(members, found):
                out[i] = [Hit(r.id, -r.score, r.score, self.name) for r in results]
        return out

    # -- persistence -----------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.home.save(directory, {"count": self.count()})
        mirror = self.particle_mirror()
        snapshot = MirrorSnapshot(directory)
        if mirror is not None:
            # read back by load: no rebuild from Chroma; only the rows changed since the last save are written
            self.last_snapshot_save = snapshot.save(mirror, {"collection": self.home.collection.name})
        else:
            snapshot.clear()

    def load(self, directory: Path) -> None:
        self.home.load(Path(directory))
        # the saved snapshot (then caught up from the store's log like the collection), or
        # None: rebuilt from the loaded collection on the next search
        self._mirror = MirrorSnapshot(Path(directory)).load(self.dim, {"collection": self.home.collection.name}) if self._use_mirror else None

    def close(self) -> None:
        """Release the Chroma client; an unsaved (or dropped) generation is deleted."""
        self.home.close()
        self._mirror = None

    def stats(self) -> dict[str, Any]:
        return {
            "size": self.count(),
            "dim": self.dim,
            "space": self.config.space,
            "curvature": self.config.curvature,
            "scaling_factor": self.config.scaling_factor,
            "f": self.config.f.law,
            "g": self.config.g.law,
            "mode": self.config.connection.mode,
            "collection": self.home.collection.name if self.home.opened else None,
            "mirror": None if self._mirror is None else len(self._mirror),  # particles in the in-memory mirror (None: off or not built yet)
        }
