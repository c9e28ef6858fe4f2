"""The ``lsh`` index: random-hyperplane hash tables over one embedding space.

A record is hashed into one bucket per table (:mod:`.hashing`). A query's candidates are
the records in its own buckets and, with multi-probe, in the nearby buckets, over every
table; they are scored (exact cosine with the stored vectors, or the SimHash estimate from
the full code, see :mod:`.scoring`) and the best ``k`` are returned. When the buckets hold
fewer than ``k`` candidates the search returns fewer hits, unless ``fallback_exact`` is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from memcore.plugin import Hit, IndexContext, Query, Record, ValidationError, VectorIndex

from .candidates import CandidateLists, bucket_candidates, single_list
from .config import LSHIndexConfig, LSHQueryMode, check_probe_radius
from .hashing import Hyperplanes, ProbePlan, normalize_rows
from .rows import Slots
from .scoring import CosineScorer, HammingScorer, Scorer, best_k
from .storage import Snapshot, SnapshotParams, read_snapshot, write_snapshot
from .tables import make_tables

__all__ = ["LSHIndex"]

_COMPACT_MIN_DEAD = 1024
"""Dead slots are compacted away once there are at least this many and more than live ones."""


@dataclass(frozen=True)
class _Mode:
    """The effective search settings of one query (config + its ``extras["lsh"]``)."""

    multi_probe: int
    probes: int | None
    max_candidates: int | None
    fallback_exact: bool
    exact: bool


@dataclass
class _Filter:
    """``allowed`` resolved to held slots: ascending ``slots``, a ``mask`` over all slots, ``scan``."""

    slots: np.ndarray
    mask: np.ndarray
    scan: bool


class LSHIndex(VectorIndex):
    """SimHash tables (``tables`` x ``bits`` hyperplanes) with multi-probe lookup and exact re-ranking."""

    format_version = 1
    score_range = (-1.0, 1.0)
    config: LSHIndexConfig

    def __init__(self, config: LSHIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self._planes = Hyperplanes.random(self.dim, config.tables, config.bits, config.seed)
        self._rows = Slots(self.dim, config.tables, -(-config.tables * config.bits // 64), config.store_vectors)
        self._tables = make_tables(config.tables, config.bits)
        self._scorer: Scorer = CosineScorer(self._rows) if config.rerank else HammingScorer(self._rows, config.tables * config.bits)
        self.score_name = self._scorer.name
        self._default_mode = _Mode(config.multi_probe, config.probes, config.max_candidates, config.fallback_exact, False)
        self._plans: dict[tuple[int, int | None], ProbePlan] = {}

    # -- validation ------------------------------------------------------------------------

    def validate_query(self, query: Query) -> None:
        """Check ``extras["lsh"]`` and the query vector."""
        self._mode(query)
        super().validate_query(query)

    def _mode(self, query: Query) -> _Mode:
        mode: LSHQueryMode | None = self.mode(query, LSHQueryMode)
        if mode is None:
            return self._default_mode
        base = self._default_mode
        radius = base.multi_probe if mode.multi_probe is None else mode.multi_probe
        if radius != base.multi_probe:
            try:
                check_probe_radius(self.config.bits, radius)
            except ValueError as exc:
                raise ValidationError(f"index {self.name!r}: extras['lsh'].multi_probe: {exc}") from None
        return _Mode(
            multi_probe=radius,
            probes=base.probes if mode.probes is None else mode.probes,
            max_candidates=base.max_candidates if mode.max_candidates is None else mode.max_candidates,
            fallback_exact=base.fallback_exact if mode.fallback_exact is None else mode.fallback_exact,
            exact=mode.exact,
        )

    # -- writing ---------------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        """Hash and insert records (a held id is replaced; in a batch the last copy wins)."""
        if not records:
            return
        ids, matrix = self.record_matrix(records, latest=True)  # a repeated id: the last one wins
        vectors = normalize_rows(matrix)
        self._discard(self._rows.slots_of(ids))
        codes = self._planes.hash(vectors)
        slots = self._rows.append(ids, codes, self._planes.pack(codes), vectors if self.config.store_vectors else None)
        self._tables.insert(slots, codes)

    def remove(self, ids: Sequence[str]) -> None:
        """Take ids out of every table (unknown ids are ignored)."""
        self._discard(self._rows.slots_of(ids))

    def _discard(self, slots: np.ndarray) -> None:
        if slots.size == 0:
            return
        self._tables.delete(slots, self._rows.codes[slots])
        self._rows.kill(slots)
        if self._rows.dead >= _COMPACT_MIN_DEAD and self._rows.dead > self._rows.live:
            self._tables.renumber(self._rows.compact())

    # -- reading ---------------------------------------------------------------------------

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """``_search_batch`` of one query."""
        return self._search_batch([query], vector[None, :], k, allowed)[0]

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        """Hash all queries at once, then look up, score and rank them by group of equal query mode."""
        modes = [self._mode(q) for q in queries]
        vectors = normalize_rows(np.asarray(matrix, dtype=np.float32))
        results: list[list[Hit]] = [[] for _ in queries]
        if self._rows.live == 0:
            return results
        restrict = self._filter(allowed)
        if restrict is not None and restrict.slots.size == 0:
            return results
        projections = self._planes.project(vectors)
        codes = self._planes.codes(projections)
        packed = self._planes.pack_signs(projections)
        groups: dict[_Mode, list[int]] = {}
        for i, mode in enumerate(modes):
            groups.setdefault(mode, []).append(i)
        for mode, members in groups.items():
            rows = np.array(members, dtype=np.int64)
            if mode.exact or (restrict is not None and restrict.scan):
                for i in members:
                    results[i] = self._exhaustive(restrict, vectors[i], packed[i], k)
                continue
            keys = self._plan(mode).keys(codes[rows], projections[rows])
            mask = None if restrict is None else restrict.mask
            cap = None if mode.max_candidates is None else max(mode.max_candidates, k)
            found = bucket_candidates(self._tables, keys, packed[rows], self._rows.packed, self._rows.used, mask, cap)
            for first, lists in found:
                chunk = rows[first : first + len(lists)]
                ranked = self._rank(lists, vectors[chunk], packed[chunk], k)
                short = lists.sizes() < k
                for j, i in enumerate(chunk.tolist()):
                    if mode.fallback_exact and short[j]:
                        results[i] = self._exhaustive(restrict, vectors[i], packed[i], k)
                    else:
                        results[i] = ranked[j]
        return results

    def _rank(self, lists: CandidateLists, vectors: np.ndarray, packed: np.ndarray, k: int) -> list[list[Hit]]:
        return best_k(self._scorer, lists, vectors, packed, k, self._rows.ids, self.name)

    def _exhaustive(self, restrict: _Filter | None, vector: np.ndarray, packed: np.ndarray, k: int) -> list[Hit]:
        """Score every held (allowed) slot: the exact answer the buckets approximate."""
        slots = restrict.slots if restrict is not None else self._rows.live_slots()
        return self._rank(single_list(slots), vector[None, :], packed[None, :], k)[0]

    def _filter(self, allowed: AbstractSet[str] | None) -> _Filter | None:
        if allowed is None:
            return None
        slots = self._rows.slots_of(allowed)
        mask = np.zeros(self._rows.used, dtype=bool)
        mask[slots] = True
        return _Filter(slots, mask, scan=slots.size <= self.config.exact_filter_below)

    def _plan(self, mode: _Mode) -> ProbePlan:
        key = (mode.multi_probe, mode.probes)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = ProbePlan(self.config.bits, mode.multi_probe, mode.probes)
        return plan

    def __len__(self) -> int:
        return self._rows.live

    # -- persistence -----------------------------------------------------------------------

    def _params(self) -> SnapshotParams:
        c = self.config
        return {"dim": self.dim, "tables": c.tables, "bits": c.bits, "seed": c.seed, "store_vectors": c.store_vectors}

    def save(self, directory: Path) -> None:
        """Write hyperplanes, codes, vectors and ids (live slots, in order) atomically; see :mod:`.storage`."""
        live = self._rows.live_slots()
        vectors = self._rows.vectors
        snap = Snapshot(
            format_version=self.format_version,
            dim=self.dim,
            tables=self.config.tables,
            bits=self.config.bits,
            seed=self.config.seed,
            planes=self._planes.planes,
            ids=[self._rows.ids[s] for s in live.tolist()],
            codes=self._rows.codes[live],
            vectors=None if vectors is None else vectors[live],
        )
        write_snapshot(Path(directory), snap)

    def load(self, directory: Path) -> None:
        """Read what ``save`` wrote (CorruptError when unreadable or mismatched) and rebuild the tables."""
        snap = read_snapshot(Path(directory), self._params(), self.format_version, f"lsh index {self.name!r}")
        self._planes = Hyperplanes(snap.planes, self.config.tables, self.config.bits)
        self._rows.replace_all(snap.ids, snap.codes, self._planes.pack(snap.codes), snap.vectors)
        self._tables.rebuild(np.arange(len(snap.ids), dtype=np.int64), snap.codes)

    # -- information -----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Parameters, bucket occupancy and memory, for ``memcore info``."""
        c = self.config
        sizes = self._tables.bucket_sizes()
        occupied = [s.size for s in sizes]
        largest = max((int(s.max()) for s in sizes if s.size), default=0)
        # the bucket a random held record falls into holds sum(s^2)/n records on average
        n = self._rows.live
        expected = float(np.mean([float((s.astype(np.float64) ** 2).sum()) / n for s in sizes])) if n else 0.0
        plan = self._plan(self._default_mode)
        vectors = self._rows.vectors
        return {
            "size": n,
            "dim": self.dim,
            "space": c.space,
            "tables": c.tables,
            "bits": c.bits,
            "total_bits": c.tables * c.bits,
            "multi_probe": c.multi_probe,
            "probes": c.probes,
            "buckets_probed_per_table": plan.per_table,
            "rerank": c.rerank,
            "store_vectors": c.store_vectors,
            "max_candidates": c.max_candidates,
            "fallback_exact": c.fallback_exact,
            "occupied_buckets_per_table": float(np.mean(occupied)) if occupied else 0.0,
            "largest_bucket": largest,
            "mean_bucket_size_seen_by_a_record": expected,
            "dead_slots": self._rows.dead,
            "memory_bytes": int(self._rows.codes.nbytes + self._rows.packed.nbytes + self._tables.nbytes + (vectors.nbytes if vectors is not None else 0)),
        }
