"""The hybrid retrieval pipeline: cone -> shell -> neighbourhood -> aggregate.

1. **Cone**: one Chroma vector query for ``cone_width`` candidates by direction (cosine),
   embeddings and metadata included (``ids`` restricts it to an allowed set).
2. **Shell**: every candidate is projected at ``t_now`` and its exact Poincaré distance
   to the query computed in one array operation (:meth:`ParticleProjector.distance`);
   the ``top_k`` closest are kept.
3. **Neighbourhood**: the links of those ``top_k`` are expanded, at most
   ``max_neighbors`` per node and ``max_neighbors · top_k`` in all (in rank order, then
   link order), ids already kept excluded, fetched in one ``get`` and scored in one array
   operation; a neighbour's distance is multiplied by ``neighbor_penalty`` (1.1: 10%
   farther), so an indirect match ranks below an equally close direct one.
4. **Aggregate**: direct and neighbour results merged, sorted by score (distance, smaller
   is better; direct first on ties), top ``top_k`` returned.

With a particle mirror (:mod:`.mirror`, the source's ``particle_mirror()``; on by default
for embedded Chroma) the mirror answers the cone itself (``cone="auto"``: the exact cosine
top ``cone_width`` over its directions, :meth:`ParticleMirror.cone`) and the candidates'
directions, v/T/born and metadata come from the in-memory copy, as do the neighbours of
step 3: Chroma is not called at all. ``cone="chroma"`` keeps Chroma's HNSW query for step 1
(asked for ids only). Without a mirror, everything is read from Chroma.

When ``cone_width`` is not given it is derived from the collection size N:
``cone_width(N, top_k) = max(top_k, min(N, max(50, ceil(10·ln N))))`` (the design's
"log N · 10", never below 50 nor above N).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Collection as AbstractSet, Literal, Protocol, Sequence

import numpy as np

from memcore.plugin import ValidationError

from .mirror import ParticleMirror, parse_links
from .physics import ParticleProjector, ParticleStates
from .storage import HyperAmyStorage
from .types import MatchType, Point, SearchResult

__all__ = ["HyperAmyRetrieval", "ParticleSource", "default_cone_width", "Candidates", "MirrorCandidates", "neighbour_ids", "check_search_args"]

MIN_CONE = 50
ConeSource = Literal["auto", "chroma"]


def default_cone_width(n: int, top_k: int) -> int:
    """``max(top_k, min(N, max(50, ceil(10·ln N))))``: the cone width used when none is given."""
    scaled = math.ceil(10.0 * math.log(n)) if n > 1 else 1
    return max(top_k, min(n, max(MIN_CONE, scaled)))


def _int_arg(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_search_args(top_k: Any, cone_width: Any, max_neighbors: Any, neighbor_penalty: Any) -> tuple[int, int | None, int, float]:
    """Validated ``(top_k, cone_width, max_neighbors, neighbor_penalty)``."""
    top_k = _int_arg("top_k", top_k, 1)
    cone = None if cone_width is None else _int_arg("cone_width", cone_width, 1)
    maxn = _int_arg("max_neighbors", max_neighbors, 0)
    if (
        isinstance(neighbor_penalty, bool)
        or not isinstance(neighbor_penalty, (int, float, np.floating))
        or not math.isfinite(neighbor_penalty)
        or neighbor_penalty < 1.0
    ):
        raise ValidationError(f"neighbor_penalty must be a finite number >= 1, got {neighbor_penalty!r}")
    return top_k, cone, maxn, float(neighbor_penalty)


@dataclass
class Candidates:
    """Rows fetched from Chroma: ids, unit directions (n, d) and metadatas."""

    ids: list[str]
    directions: np.ndarray
    metadatas: list[dict[str, Any]]

    @classmethod
    def from_chroma(cls, ids: Sequence[str], embeddings: Any, metadatas: Sequence[dict[str, Any]]) -> "Candidates":
        matrix = np.asarray(embeddings, dtype=np.float32) if len(ids) else np.zeros((0, 0), dtype=np.float32)
        return cls(list(ids), matrix, list(metadatas))

    def __len__(self) -> int:
        return len(self.ids)

    def id_at(self, i: int) -> str:
        """The id of candidate ``i``."""
        return self.ids[i]

    def links_at(self, i: int) -> Sequence[str]:
        """The link targets of candidate ``i``."""
        return _links(self.metadatas[i])

    def result(self, i: int, score: float, match: MatchType) -> SearchResult:
        """Candidate ``i`` as a :class:`SearchResult`."""
        return SearchResult(self.ids[i], score, self.metadatas[i], self.directions[i].tolist(), match)

    def states(self, projector: ParticleProjector, t_now: float) -> ParticleStates:
        """All candidates projected at ``t_now`` (metadata read into arrays once)."""
        metas = self.metadatas
        v = np.fromiter((m["v"] for m in metas), dtype=np.float64, count=len(metas))
        T = np.fromiter((m["T"] for m in metas), dtype=np.float64, count=len(metas))
        born = np.fromiter((m["born"] for m in metas), dtype=np.float64, count=len(metas))
        return projector.states(self.directions, v, T, born, t_now)


class MirrorCandidates:
    """Rows of the particle mirror: nothing is copied out of it but the directions and
    v/T/born the projection reads; ids, metadata and links are looked up for the rows a
    step needs (the top ``k`` and their links), not for the whole cone."""

    def __init__(self, mirror: ParticleMirror, rows: np.ndarray):
        self.mirror = mirror
        self.rows = rows.tolist()  # Python ints: list indexing with numpy integers is slower
        self._array = rows

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def ids(self) -> list[str]:
        """Every candidate's id."""
        return [self.mirror.ids[r] for r in self.rows]

    def id_at(self, i: int) -> str:
        """The id of candidate ``i``."""
        return self.mirror.ids[int(self.rows[i])]

    def links_at(self, i: int) -> Sequence[str]:
        """The link targets of candidate ``i`` (parsed once per metadata version)."""
        return self.mirror.links_of(self.rows[i])

    def result(self, i: int, score: float, match: MatchType) -> SearchResult:
        """Candidate ``i`` as a :class:`SearchResult`."""
        row = self.rows[i]
        return SearchResult(self.mirror.ids[row], score, self.mirror.metadatas[row], self.mirror.direction(row).tolist(), match)

    def states(self, projector: ParticleProjector, t_now: float) -> ParticleStates:
        """All candidates projected at ``t_now`` (v/T/born from the mirror's arrays)."""
        directions, vtb = self.mirror.arrays(self._array)
        return projector.states(directions, vtb[:, 0], vtb[:, 1], vtb[:, 2], t_now)


def neighbour_ids(link_lists: Sequence[Sequence[str]], max_neighbors: int, exclude: AbstractSet[str], allowed: AbstractSet[str] | None = None) -> list[str]:
    """Link targets to expand: at most ``max_neighbors`` per node (its first links) and
    ``max_neighbors · len(link_lists)`` in all, de-duplicated in rank then link order,
    without ``exclude`` (and only ``allowed`` ones when given)."""
    cap = max_neighbors * len(link_lists)
    out: dict[str, None] = {}
    for links in link_lists:
        for target in links[:max_neighbors]:
            if target not in exclude and (allowed is None or target in allowed):
                out.setdefault(target, None)
        if len(out) >= cap:
            break
    return list(out)[:cap]


def _links(meta: dict[str, Any]) -> tuple[str, ...]:
    return parse_links(meta.get("links"))


class ParticleSource(Protocol):
    """What the search reads from: a :class:`HyperAmyStorage`, or the ``poincare`` index."""

    @property
    def collection(self) -> Any: ...

    @property
    def dim(self) -> int | None: ...

    def existing(self, ids: Sequence[str]) -> set[str]: ...

    def count(self) -> int: ...

    def particle_mirror(self) -> ParticleMirror | None:
        """The in-memory mirror of the particles (built on first use), or None to search Chroma."""
        ...


class HyperAmyRetrieval:
    """The four-step search over a :class:`HyperAmyStorage` with a :class:`ParticleProjector`."""

    def __init__(self, storage: HyperAmyStorage | ParticleSource, projector: ParticleProjector | None = None, cone: ConeSource = "auto"):
        if cone not in ("auto", "chroma"):
            raise ValidationError(f"cone must be 'auto' or 'chroma', got {cone!r}")
        self.storage = storage
        self.projector = projector or ParticleProjector()
        self.cone_source: ConeSource = cone

    @property
    def collection(self) -> Any:
        """The Chroma collection searched (the storage's current one)."""
        return self.storage.collection

    def _cone(self, direction: np.ndarray, cone: int, restrict: list[str] | None, payload: bool = True) -> dict[str, Any] | None:
        """Step 1's Chroma query (ids only without ``payload``: the mirror has the rest).
        ``restrict`` is sent as is first (an allowed set usually holds stored ids only);
        Chroma refuses unknown ids, and only then are the stored ones looked up (one more
        ``get``). None when none of them is stored."""
        include = ["metadatas", "embeddings"] if payload else []
        found: dict[str, Any]  # chromadb's QueryResult
        if restrict is None:
            found = self.collection.query(query_embeddings=direction, n_results=cone, include=include)
            return found
        try:
            found = self.collection.query(query_embeddings=direction, n_results=cone, ids=restrict, include=include)
            return found
        except Exception:  # noqa: BLE001 - chromadb: "Error finding id" (an id it does not hold)
            held = sorted(self.storage.existing(restrict))
        if not held:
            return None
        found = self.collection.query(query_embeddings=direction, n_results=min(cone, len(held)), ids=held, include=include)
        return found

    def query_state(self, query_point: Point, t_now: float) -> tuple[np.ndarray, ParticleStates]:
        """The query's unit direction (1, d) and its projected state at ``t_now``."""
        raw = query_point.emotion_vector
        raw = raw.detach().cpu().numpy() if hasattr(raw, "detach") else raw
        vec = np.asarray(raw, dtype=np.float64)
        if vec.ndim != 1 or vec.shape[0] == 0:
            raise ValidationError(f"query emotion_vector must be 1-d and not empty, got shape {vec.shape}")
        dim = self.storage.dim
        if dim is not None and vec.shape[0] != dim:
            from memcore.plugin import DimensionError

            raise DimensionError(f"query emotion_vector has dimension {vec.shape[0]}, the stored points {dim}")
        for name in ("v", "T", "born"):
            value = getattr(query_point, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(value):
                raise ValidationError(f"query point: {name} must be a finite number, got {value!r}")
        norm = math.sqrt(float(vec @ vec))  # NaN or inf when a value is (or when the squares overflow)
        if not math.isfinite(norm):
            if not np.isfinite(vec).all():
                raise ValidationError("query emotion_vector: vector 0 contains NaN or infinite values")
            vec = vec / np.abs(vec).max()
            norm = math.sqrt(float(vec @ vec))
        if norm < 1e-12:
            raise ValidationError("query emotion_vector: vector 0 is all zeros (it has no direction)")
        direction = (vec / norm).astype(np.float32).reshape(1, -1)
        return direction, self.projector.states(direction, query_point.v, query_point.T, query_point.born, t_now)

    def search(
        self,
        query_point: Point,
        top_k: int = 3,
        cone_width: int | None = None,
        max_neighbors: int = 20,
        neighbor_penalty: float = 1.1,
        *,
        t_now: float | None = None,
        allowed: AbstractSet[str] | None = None,
    ) -> list[SearchResult]:
        """The ``top_k`` best results by hyperbolic distance (smaller first).

        ``t_now``: evaluation time (default: the query's ``current_time``, else now);
        ``allowed``: restrict results (direct and neighbours) to these ids.
        """
        return self.search_many([query_point], top_k, cone_width, max_neighbors, neighbor_penalty, t_now=t_now, allowed=allowed)[0]

    def search_many(
        self,
        query_points: Sequence[Point],
        top_k: int = 3,
        cone_width: int | None = None,
        max_neighbors: int = 20,
        neighbor_penalty: float = 1.1,
        *,
        t_now: float | None = None,
        allowed: AbstractSet[str] | None = None,
    ) -> list[list[SearchResult]]:
        """:meth:`search` for several query points at once: one Chroma cone query for all of
        them, then steps 2-4 per query. ``t_now`` (default: each query's ``current_time``,
        else now) applies to every query."""
        top_k, cone_width, max_neighbors, neighbor_penalty = check_search_args(top_k, cone_width, max_neighbors, neighbor_penalty)
        prepared = []
        for point in query_points:
            t = t_now if t_now is not None else (point.current_time if point.current_time is not None else time.time())
            direction, state = self.query_state(point, float(t))
            prepared.append((direction, state, float(t)))
        empty: list[list[SearchResult]] = [[] for _ in prepared]
        if not prepared:
            return empty
        restrict: list[str] | None = None
        allowed_set: set[str] | None = None
        if allowed is not None:
            restrict = sorted(i for i in allowed if isinstance(i, str))
            if not restrict:
                return empty
            allowed_set = set(restrict)
        mirror_of = getattr(self.storage, "particle_mirror", None)
        mirror = mirror_of() if callable(mirror_of) else None
        if restrict is not None:
            cone = min(cone_width if cone_width is not None else default_cone_width(len(restrict), top_k), len(restrict))
        elif cone_width is not None:
            cone = cone_width  # Chroma returns fewer when it holds fewer: no count() round trip
        else:
            total = len(mirror) if mirror is not None else self.storage.count()
            if total == 0:
                return empty
            cone = default_cone_width(total, top_k)

        directions = np.concatenate([d for d, _, _ in prepared])
        if mirror is not None and self.cone_source == "auto":
            # 1. cone: the mirror's exact top cone_width (among the allowed rows it holds)
            rows = None if restrict is None else mirror.rows_of(restrict)
            if rows is not None and not len(rows):
                return empty
            picked = mirror.cone(directions, cone, rows)
            return [
                self._rank(MirrorCandidates(mirror, picked[i]), query, t, top_k, max_neighbors, neighbor_penalty, allowed_set, mirror) if len(picked[i]) else []
                for i, (_, query, t) in enumerate(prepared)
            ]
        # 1. cone: one Chroma query for every query direction
        found = self._cone(directions, cone, restrict, payload=mirror is None)
        if found is None:
            return empty
        out = []
        for i, (_, query, t) in enumerate(prepared):
            cands: Candidates | MirrorCandidates
            if mirror is not None:
                cands = MirrorCandidates(mirror, mirror.rows_of(found["ids"][i]))
            else:
                cands = Candidates.from_chroma(found["ids"][i], found["embeddings"][i], found["metadatas"][i])
            out.append(self._rank(cands, query, t, top_k, max_neighbors, neighbor_penalty, allowed_set, mirror) if len(cands) else [])
        return out

    def _rank(
        self,
        cands: Candidates | MirrorCandidates,
        query: ParticleStates,
        t_now: float,
        top_k: int,
        max_neighbors: int,
        neighbor_penalty: float,
        allowed: set[str] | None,
        mirror: ParticleMirror | None,
    ) -> list[SearchResult]:
        """Steps 2-4 for one query over its cone candidates. Scores stay in arrays until the
        final ``top_k`` are known: only those become :class:`SearchResult` objects."""
        # 2. shell
        dist = self.projector.distance(query, cands.states(self.projector, t_now))
        order = np.argsort(dist, kind="stable")[:top_k]
        pools: list[Candidates | MirrorCandidates] = [cands]
        scores = dist[order]
        top = order.tolist()
        # 3. neighbourhood
        if max_neighbors > 0:
            kept = {cands.id_at(i) for i in top}
            wanted = neighbour_ids([cands.links_at(i) for i in top], max_neighbors, kept, allowed)
            if wanted:
                nb: Candidates | MirrorCandidates
                if mirror is not None:
                    nb = MirrorCandidates(mirror, mirror.rows_of(wanted))
                else:
                    got = self.collection.get(ids=wanted, include=["metadatas", "embeddings"])
                    nb = Candidates.from_chroma(got["ids"], got["embeddings"], got["metadatas"])
                if len(nb):
                    nd = self.projector.distance(query, nb.states(self.projector, t_now)) * neighbor_penalty
                    pools.append(nb)
                    scores = np.concatenate([scores, nd])
        # 4. aggregate (a stable sort: direct results, already in order, stay ahead of equal neighbours)
        best = np.argsort(scores, kind="stable")[:top_k].tolist()
        direct = len(top)
        values = scores.tolist()
        return [cands.result(top[j], values[j], "direct") if j < direct else pools[1].result(j - direct, values[j], "neighbor") for j in best]
