"""The ``faiss`` index: a memcore :class:`~memcore.plugin.Index` over a faiss-cpu index.

- record ids map to int64 labels from a monotonic counter (:mod:`.labels`), held by faiss
  natively (IVF), as positions (HNSW) or through ``IndexIDMap2`` (:mod:`.container`);
- removal uses ``remove_ids`` where faiss has it; HNSW keeps tombstones (filtered at
  search by over-fetch or an ``IDSelectorNot``) and is rebuilt from its live vectors
  (reconstructed from faiss' own storage) when they pass ``compact_fraction``;
- trainable indexes (IVF, PQ, SQ...) collect vectors in an exact Flat buffer, searched
  exactly, until ``min_train`` vectors have arrived; the add that crosses it trains;
- ``allowed`` is pushed down as an IDSelector; small allowed sets are scored exactly; a set
  the store resolves as rows of its vector file arrives as rows and becomes labels through
  the row of each label (:mod:`.rows`);
- storage that approximates the vectors (PQ, SQ...) re-scores ``k * refine_k_factor``
  candidates exactly, read from the store's file at the same rows (:mod:`.refine`);
- files: :mod:`.storage` (native faiss files + JSON sidecar, atomic), read back
  memory-mapped until the first write (:mod:`.mapped`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from memcore.plugin import (
    AllowedIds,
    AllowedRows,
    GatheredRows,
    merge_sorted,
    CorruptError,
    get_logger,
    Hit,
    IndexContext,
    Query,
    Record,
    ValidationError,
    VectorIndex,
)

from . import refill, storage
from .build import Layout, make_layout
from .container import Container
from .grammar import parse_factory
from .config import FaissIndexConfig, FaissQueryMode
from .defaults import auto_ef_search
from .gather import BLOCK, GatherBudget, blocked_scores
from .labels import LabelMap
from .mapped import MappedFile, mapped_spans, populate
from .postfilter import CANDIDATES_PER_HIT, allowed_candidates
from .refine import ExactVectors, refine
from .rows import UNKNOWN, StoreRows
from .runtime import blas_counts_elements, faiss_settings
from .scores import Scoring
from .selectors import Pushdown, exclude, include, search_params
from .training import training_sample

__all__ = ["FaissIndex"]

GATHER_MAX = 8192
"""Allowed sets up to this many live ids are scored from a copy of their rows (see
``FaissIndex._exact_rows``); larger cached ones too while their copies fit in
``gather_budget_mb`` (:class:`.gather.GatherBudget`), others by a selector scan of the flat storage in place."""

log = get_logger("memcore.faiss")

_EMPTY: frozenset[int] = frozenset()
_MEMOIZED = (AllowedIds, AllowedRows)
"""The allowed sets that carry memos (a collection's cached sets)."""


class FaissIndex(VectorIndex):
    """Vector search on faiss (Flat, HNSW, IVF, PQ... any ``index_factory`` string)."""

    format_version = 2
    readable_versions = (1,)  # saves without their vectors (an HNSW graph, a Flat index), refilled from the store
    takes_store_rows = True  # through the row of each label (see .rows)
    config: FaissIndexConfig

    def __init__(self, config: FaissIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self._reader = context.vectors  # the store's vectors: what a format-1 save without its own copy reads back
        self._layout: Layout = make_layout(config, self.dim, self.name)
        self._faiss = self._layout.faiss
        self._scoring = Scoring(config.metric, self.dim)
        self.score_name = self._scoring.name
        self.score_range = self._scoring.range
        exact_vectors = parse_factory(config.factory).exact_vectors
        #: the store's exact vectors, for the refine step of lossy storage (see .refine; their rows: ``self._rows``)
        self._exact_store = ExactVectors(context.vectors, config.space, self.dim) if context.vectors is not None and not exact_vectors else None
        refined = self._exact_store is not None and config.refine_k_factor > 0  # every hit then carries its exact score
        self.cosine_space = config.space if config.metric == "cosine" and (exact_vectors or refined) else None
        self._blas: int | None = None
        if config.blas_min_queries is not None:
            per = self.dim if blas_counts_elements(self._faiss) else 1
            self._blas = config.blas_min_queries * per
        self._gather_budget = GatherBudget(int(config.gather_budget_mb * 1024 * 1024))
        self._trained_on: int | None = None  # vectors the training saw (None: untrained, or not recorded by the save)
        self._file: MappedFile | None = None  # the file the main index is mapped from, until its first write (see .mapped)
        self._space: Any = None  # the store's mapped space (rows of records), once found
        self._rows = StoreRows()
        pending = Container(self._faiss, self._layout.new_flat()) if self._layout.needs_training else None
        self._install(LabelMap(), Container(self._faiss, self._layout.new_index()), pending)

    # -- state -------------------------------------------------------------------------

    def _install(self, labels: LabelMap, main: Container, pending: Container | None) -> None:
        self._labels = labels
        self._main = main
        self._pending = pending
        self._generation = getattr(self, "_generation", 0) + 1  # memos of allowed sets compare it
        self._exclude: tuple[int, Pushdown] | None = None
        self._flat_cache: tuple[Container, Container] | None = None  # (main, its flat storage) for the exact paths
        self._params_ok = True  # False once faiss refused SearchParameters (IndexPQ...)
        core = self._layout.inner(main.index)
        self._ef_default = self._ef_of(core)
        #: ef_search follows k and the size unless the config fixes it (see .defaults)
        self._ef_auto = self._layout.family == "hnsw" and self.config.ef_search is None and "efSearch" not in self.config.params
        self._nprobe_default = int(self._faiss.extract_index_ivf(core).nprobe) if self._layout.family == "ivf" else None

    def _ef_construction(self) -> int | None:
        if self._layout.family != "hnsw":
            return None
        node = self._faiss.downcast_index(self._layout.inner(self._main.index))
        while isinstance(node, self._faiss.IndexPreTransform):
            node = self._faiss.downcast_index(node.index)
        return int(node.hnsw.efConstruction)

    def _ef_of(self, core: Any) -> int | None:
        if self._layout.family != "hnsw":
            return None
        node = self._faiss.downcast_index(core)
        while isinstance(node, self._faiss.IndexPreTransform):
            node = self._faiss.downcast_index(node.index)
        return int(node.hnsw.efSearch)

    @property
    def trained(self) -> bool:
        """False while a trainable index still collects its first ``min_train`` vectors."""
        return self._pending is None

    def __len__(self) -> int:
        return len(self._labels)

    # -- validation --------------------------------------------------------------------

    def validate_query(self, query: Query) -> None:
        self._mode(query)
        self._prepare_query(self.query_vector(query))

    def _mode(self, query: Query) -> FaissQueryMode | None:
        mode: FaissQueryMode | None = self.mode(query, FaissQueryMode)
        if mode is not None:
            family = self._layout.family
            if mode.ef_search is not None and family != "hnsw":
                raise ValidationError(f"index {self.name!r} ({self.config.factory}): ef_search applies to HNSW indexes only")
            if mode.nprobe is not None and family != "ivf":
                raise ValidationError(f"index {self.name!r} ({self.config.factory}): nprobe applies to IVF indexes only")
        return mode

    def _prepare_query(self, vector: np.ndarray) -> np.ndarray:
        """A checked query vector as faiss takes it: a (1, dim) float32 matrix, unit for cosine."""
        return self._scoring.prepare_one(vector, f"index {self.name!r}: query vector")

    # -- writing -----------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        ids, matrix = self.record_matrix(records, latest=True)  # a repeated id: the last one wins
        vectors = self._scoring.prepare(matrix, f"index {self.name!r}: records")
        self._writable()
        self.remove([i for i in ids if i in self._labels.label_of])
        labels = self._labels.assign(ids)
        self._rows.assign(labels, self._store_rows(ids, matrix))
        with faiss_settings(self._faiss, threads=self.config.omp_threads, blas_threshold=None):
            if self._pending is not None:
                self._pending.add(vectors, labels)
                if self._pending.ntotal >= self._layout.min_train:
                    self._train(self._pending)
            else:
                self._main.add(vectors, labels, self._layout.positional)

    def _train(self, pending: Container) -> None:
        """Train the main index on (a sample of, see :mod:`.training`) the buffered vectors
        (``pending``), move them all in, drop the buffer."""
        started = time.perf_counter()
        flat = pending.index
        labels = self._faiss.vector_to_array(flat.id_map).astype(np.int64)
        vectors = self._faiss.downcast_index(flat.index).reconstruct_n(0, flat.ntotal)
        main = Container(self._faiss, self._layout.new_index())
        sample = training_sample(vectors, self._layout.train_sample)
        main.index.train(sample)
        self._trained_on = len(sample)
        if self._layout.positional:  # labels become positions in the trained index
            self._labels.relabel(labels)
            self._rows.relabel(labels)
            labels = np.arange(len(labels), dtype=np.int64)
        main.add(vectors, labels, self._layout.positional)
        self._main = main
        self._pending = None
        log.info(
            "faiss.trained",
            name=self.name,
            factory=self.config.factory,
            vectors=len(labels),
            trained_on=self._trained_on,
            seconds=round(time.perf_counter() - started, 3),
        )

    def remove(self, ids: Sequence[str]) -> None:
        labels = self._labels.drop(ids)
        if not len(labels):
            return
        self._rows.drop(labels)
        if self._pending is not None or self._layout.removable:
            self._writable()
            if self._pending is not None:
                self._pending.remove(include(self._faiss, labels, self._labels.next_label).selector)
            elif self._layout.native_ids:  # IVF with a hashtable direct map takes only an IDSelectorArray
                self._main.remove(self._faiss.IDSelectorArray(len(labels), self._faiss.swig_ptr(labels)))
            else:
                self._main.remove(include(self._faiss, labels, self._labels.next_label).selector)
            return
        self._labels.bury(labels)
        if len(self._labels.dead) > self.config.compact_fraction * self._main.ntotal:
            self.compact()

    def compact(self) -> None:
        """Rebuild the faiss index from its live vectors, dropping every tombstone."""
        if not self._labels.dead:
            return
        self._writable()
        started = time.perf_counter()
        dead = len(self._labels.dead)
        live = self._labels.live_labels()
        vectors = self._main.reconstruct(live, self.dim)
        if self._layout.needs_training:  # keep the trained quantizers: clone, then empty
            index = self._faiss.clone_index(self._main.index)
            index.reset()
        else:
            index = self._layout.new_index()
        fresh = Container(self._faiss, index)
        if self._layout.positional:  # positions restart at 0 in the rebuilt index
            self._labels.relabel(live)
            self._rows.relabel(live)
            live = np.arange(len(live), dtype=np.int64)
        with faiss_settings(self._faiss, threads=self.config.omp_threads, blas_threshold=None):
            if len(live):
                fresh.add(vectors, live, self._layout.positional)
        self._main = fresh
        self._labels.clear_dead()
        self._exclude = None
        log.info("faiss.compacted", name=self.name, live=len(live), tombstones=dead, seconds=round(time.perf_counter() - started, 3))

    # -- reading -----------------------------------------------------------------------

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        mode = self._mode(query) if query.extras else None
        return self._search_prepared(self._prepare_query(vector), k, allowed, mode)[0]

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        modes = [self._mode(q) if q.extras else None for q in queries]
        if any(m != modes[0] for m in modes):  # different per-query settings: one call each
            return [self._search_prepared(self._prepare_query(v), k, allowed, m)[0] for v, m in zip(matrix, modes)]
        return self._search_prepared(self._scoring.prepare(matrix, f"index {self.name!r}: query vectors"), k, allowed, modes[0])

    def _search_prepared(self, x: np.ndarray, k: int, allowed: AbstractSet[str] | None, mode: FaissQueryMode | None) -> list[list[Hit]]:
        nq = x.shape[0]
        if not len(self._labels):
            return [[] for _ in range(nq)]
        threshold = self.config.score_threshold
        if mode is not None and mode.score_threshold is not None:
            threshold = mode.score_threshold
        exact = mode is not None and mode.exact
        factor = self._refine_factor(mode)
        if allowed is not None:
            if nq == 1 and not exact and self._first_of_set(allowed):  # broad filters: unfiltered, the allowed candidates kept
                assert isinstance(allowed, AllowedRows)
                kept = allowed_candidates(self._approximate(x, k * CANDIDATES_PER_HIT, threshold, mode, None, None, factor)[0], allowed, k)
                if kept is not None:
                    return [kept]
            labels = self._allowed_labels(allowed)
            if not len(labels):
                return [[] for _ in range(nq)]
            small = len(labels) <= max(self.config.exact_filter_below, self.config.exact_filter_fraction * len(self._labels))
            if exact or small:
                flat = self._flat_storage()
                if flat is not None and not flat.wrapped and (len(labels) <= GATHER_MAX or self._may_gather(labels, allowed)):
                    first = isinstance(allowed, _MEMOIZED) and not self._gather_budget.second_use(allowed, self)
                    return self._exact_rows(flat, x, k, labels, threshold, None if first else allowed)  # a first use: no copy kept
                if flat is not None:
                    return self._exact_flat(flat, x, k, labels, allowed, threshold)
                return self._exact(x, k, labels, threshold)
            return self._approximate(x, k, threshold, mode, labels, allowed, factor)
        if exact:
            return self._exact(x, k, self._labels.live_labels(), threshold)
        return self._approximate(x, k, threshold, mode, None, None, factor)

    def _first_of_set(self, allowed: AbstractSet[str]) -> bool:
        """Whether ``allowed`` is a set the store has not resolved yet for this index's
        space, searched by a graph (see :mod:`.postfilter`), and not a selective one whose
        rows the store kept at hand (saved at this state): those are searched as resolved
        at once, where the attempt would most likely fail (fewer than one allowed record in
        :data:`.postfilter.CANDIDATES_PER_HIT` candidates)."""
        space = self.config.space
        if not (
            isinstance(allowed, AllowedRows)
            and not allowed.resolved
            and not allowed.rows_known(space)
            and self._pending is None
            and self._layout.family == "hnsw"
        ):
            return False
        rows = allowed.rows_at_hand(space)
        return rows is None or CANDIDATES_PER_HIT * len(rows) >= len(self._labels)

    def _refine_factor(self, mode: FaissQueryMode | None) -> int:
        """Candidates per hit to re-score exactly (0: faiss' own scores): the query's
        ``refine_k_factor``, else the config's, for a trained index over approximate storage
        with a store to read the exact vectors from (see :mod:`.refine`)."""
        if self._exact_store is None or self._pending is not None:
            return 0
        if mode is not None and mode.refine_k_factor is not None:
            return mode.refine_k_factor
        return self.config.refine_k_factor

    def _refined(self, x: np.ndarray, labels: np.ndarray, k: int, threshold: float | None) -> list[list[Hit]]:
        """The best ``k`` of each row's candidate ``labels`` by their exact scores, read at
        the labels' rows of the store's file (``self._rows``; those of a save that did not
        keep them looked up first, once)."""
        assert self._exact_store is not None
        if self._rows.from_save:
            self._backfill_rows()
        rows, space = self._rows.row_of, self._store_space()
        raw, picked = refine(self._scoring, self._exact_store, x, labels, k, rows, space, self._labels.id_or_none, self._labels.dead)
        return self._hits(raw, picked, k, threshold)

    def effective_ef(self, k: int) -> int | None:
        """The ef_search of an unfiltered top-``k`` query without its own ef_search (None: not HNSW)."""
        if self._ef_auto:
            live = len(self._labels)
            return auto_ef_search(max(1, min(k, live)), live)
        return self._ef_default

    def _version(self) -> tuple[int, int]:
        """Changes whenever labels, the faiss index or its storage change."""
        return (self._generation, self._labels.version)

    def _allowed_labels(self, allowed: AbstractSet[str]) -> np.ndarray:
        """Sorted live labels of ``allowed``: computed once per cached allowed set and index version."""
        if isinstance(allowed, _MEMOIZED):  # translated once per set, then kept up to date across writes
            return allowed.memo(
                self,
                "labels",
                (self._generation, self._labels.marker()),
                lambda: self._translate(allowed),
                lambda old, version, changed: self._update_labels(allowed, old, version, changed),
            )
        return self._labels.labels_for(allowed)

    def _translate(self, allowed: AllowedIds | AllowedRows) -> np.ndarray:
        """Sorted live labels of ``allowed``: through the row of each label when the store
        resolves the set as rows of its file and every live label's row is known
        (:mod:`.rows`), else from its ids."""
        if isinstance(allowed, AllowedRows) and (self._rows.usable or self._backfill_rows()):
            file_rows = allowed.file_rows(self.config.space)
            if file_rows is not None:
                return self._rows.labels_of(file_rows, len(self._labels))
        return self._labels.labels_for(allowed)

    def _store_space(self) -> Any:
        """The store's vectors of this index's space as a mapped file with the row of each
        record (:meth:`memcore.plugin.VectorReader.mapped`), or None."""
        if self._space is None and self._reader is not None:
            self._space = self._reader.mapped(self.config.space, self.dim)
        return self._space

    def _store_rows(self, ids: Sequence[str], matrix: np.ndarray) -> np.ndarray | None:
        """The store's file rows of the records ``ids`` when each holds the vector the index
        was given (``matrix``, as given), else None (their rows stay unknown)."""
        space = self._store_space()
        if space is None:
            return None
        rows: np.ndarray | None = space.rows_holding(ids, matrix)
        return rows

    def _backfill_rows(self) -> bool:
        """Look up the rows a save made before they were kept did not hold (once); whether
        every live label's row is known now."""
        rows = self._rows
        if not rows.from_save:
            return False
        space = self._store_space()
        labels = (rows.row_of == UNKNOWN).nonzero()[0]
        if space is None:
            rows.from_save = False
            return False
        started = time.perf_counter()
        done = rows.backfill(labels, self._labels.ids_for(labels), space)
        log.info("faiss.rows_looked_up", name=self.name, labels=len(labels), usable=done, seconds=round(time.perf_counter() - started, 3))
        return done

    def _update_labels(self, allowed: AbstractSet[str], old: np.ndarray, version: tuple[int, Any], changed: AbstractSet[str]) -> np.ndarray | None:
        """The sorted live labels of ``allowed`` from ``old``, those of a set differing from it
        at most in ``changed`` at ``version``: the labels assigned and dropped since, and those
        of ``changed``, are checked, nothing else (None after a rebuild or relabel)."""
        generation, marker = version
        labels = self._labels
        since = labels.changes_since(marker) if generation == self._generation else None
        if since is None:
            return None
        assigned, dropped = since
        if len(assigned) + len(dropped) + len(changed) > max(64, len(old) // 4):
            return None
        id_of, first_new = labels.id_or_none, marker[1]
        add = [label for label in assigned if id_of(label) in allowed]
        remove = list(dropped)
        for rid in changed:
            label = labels.label_of.get(rid)
            if label is None or label >= first_new:  # not live, or assigned since (checked above)
                continue
            (add if rid in allowed else remove).append(label)
        return merge_sorted(old, remove, add)

    def _include(self, labels: np.ndarray, allowed: AbstractSet[str] | None, target: Container, tag: str) -> Pushdown:
        """The selector accepting ``labels`` on ``target`` (memoized on a cached allowed set)."""

        def make() -> Pushdown:
            return target.translate(include(self._faiss, labels, self._labels.next_label))

        if isinstance(allowed, _MEMOIZED):
            return allowed.memo(self, tag, self._version(), make)
        return make()

    def _flat_storage(self) -> Any:
        """The exhaustive storage searched by position = label, or None (then exact paths reconstruct).

        HNSW over flat vectors keeps them in an ``IndexFlat`` (its ``storage``) at the
        positions that are this index's labels; a ``Flat`` index is itself exhaustive.
        """
        if self._pending is not None:
            return None
        if self._main.exhaustive:
            return self._main
        if self._layout.family == "hnsw" and self._layout.positional:
            cached = self._flat_cache
            if cached is not None and cached[0] is self._main:  # the same graph: its storage object stays
                flat_container: Container = cached[1]
                if flat_container.ntotal != self._main.ntotal:
                    flat_container.refresh()
                return flat_container if flat_container.ntotal == self._main.ntotal else None
            storage = getattr(self._faiss.downcast_index(self._main.index), "storage", None)
            if storage is not None:
                flat = self._faiss.downcast_index(storage)
                if isinstance(flat, self._faiss.IndexFlat) and flat.ntotal == self._main.ntotal:
                    self._flat_cache = (self._main, Container(self._faiss, flat))
                    return self._flat_cache[1]
        return None

    def _exact_flat(self, flat: Container, x: np.ndarray, k: int, labels: np.ndarray, allowed: AbstractSet[str], threshold: float | None) -> list[list[Hit]]:
        """Exact scores of the allowed vectors, in place: faiss' flat scan with a selector
        computes only the selected rows (no gather copy, unlike a numpy mask)."""
        pushdown = self._include(labels, allowed, flat, "flat")
        params = self._faiss.SearchParameters(sel=pushdown.selector)
        distances, found = self._run(flat, x, min(k, len(labels)), params)
        return self._hits(distances, found, k, threshold)

    def _may_gather(self, labels: np.ndarray, allowed: AbstractSet[str]) -> bool:
        """Whether a cached set above ``GATHER_MAX`` rows may keep (or already keeps) a
        gathered copy: its bytes fit in what ``gather_budget_mb`` leaves (see :class:`.gather.GatherBudget`)."""
        if not isinstance(allowed, _MEMOIZED):
            return False
        return self._gather_budget.fits(allowed, len(labels) * self.dim * 4)

    def _exact_rows(
        self, flat: Container, x: np.ndarray, k: int, labels: np.ndarray, threshold: float | None, allowed: AbstractSet[str] | None = None
    ) -> list[list[Hit]]:
        """Exact scores of a few allowed vectors, read from the flat storage (position =
        label): one gather and one product, where a selector scan of the storage tests every
        stored row (measured 1% of 100k: 3.8x the numpy equivalent). A cached allowed set
        keeps its gathered rows (:class:`memcore.plugin.GatheredRows`), extended in place as records join it."""

        def stored() -> np.ndarray:
            # the rows as bytes: a mapped file's vectors may start at any byte (faiss' header), and
            # numpy gathers unaligned float32 rows ~100x slower than bytes (copied aligned, viewed as float32)
            rows: np.ndarray = self._faiss.rev_swig_ptr(flat.searcher.codes.data(), flat.ntotal * self.dim * 4).reshape(flat.ntotal, self.dim * 4)
            return rows

        if isinstance(allowed, _MEMOIZED):
            gathered = allowed.memo(
                self,
                "gathered",
                (self._generation, self._labels.marker()),
                lambda: GatheredRows.of(labels, stored()),
                # a label's vector never changes while neither the generation nor the label epoch does
                lambda old, version, _changed: (
                    old.extended(labels, stored()) if version[0] == self._generation and version[1][0] == self._labels.epoch else None
                ),
            )
            matrix = gathered.matrix().view(np.float32)
            if len(labels) > GATHER_MAX:
                self._gather_budget.track(allowed, matrix)
        elif len(labels) > BLOCK:  # scored block by block: no set-sized copy
            raw, cols = self._scoring.top(blocked_scores(stored(), labels, x, self._scoring.exact), k)
            return self._hits(raw, labels[cols], k, threshold)
        else:
            matrix = stored()[labels].view(np.float32)
        raw, cols = self._scoring.top(self._scoring.exact(x, matrix), k)
        return self._hits(raw, labels[cols], k, threshold)

    def _approximate(
        self,
        x: np.ndarray,
        k: int,
        threshold: float | None,
        mode: FaissQueryMode | None,
        allowed: np.ndarray | None,
        allowed_ids: AbstractSet[str] | None = None,
        factor: int = 0,
    ) -> list[list[Hit]]:
        """One faiss search call for every query, filters pushed down where faiss can.

        Under a filter HNSW widens its search (``ef_search / selectivity``, at most
        ``filter_ef_max``) unless the query sets ``ef_search`` itself: the filtered-out
        neighbours it walks through no longer crowd out the allowed ones. With a refine
        ``factor``, faiss returns ``k * factor`` candidates, re-scored exactly (:meth:`_refined`)."""
        wanted, k = k, k * factor if factor else k
        pending = self._pending is not None
        target = self._pending if self._pending is not None else self._main
        family = "other" if pending else self._layout.family
        dead = _EMPTY if pending else self._labels.dead
        live = len(self._labels)
        pushdown = None
        if allowed is not None:
            fetch = min(k, len(allowed))
            pushdown = self._include(allowed, allowed_ids, target, "main" if not pending else "pending")
        elif dead and len(dead) > k:
            fetch = min(k, live)
            pushdown = self._tombstone_pushdown()
        else:
            fetch = min(k, live) + len(dead)  # at most len(dead) results can be tombstones
        ef = nprobe = None
        if mode is not None:
            ef, nprobe = mode.ef_search, mode.nprobe
        if ef is None and family == "hnsw" and self._ef_default is not None:
            ef = self.effective_ef(k)  # not None: the index is HNSW
            if allowed is not None and ef is not None:
                widened = math.ceil(ef * live / max(len(allowed), 1))
                ef = min(max(ef, widened), max(ef, self.config.filter_ef_max))
        params = None
        if pushdown is not None or ef is not None or nprobe is not None:
            if pushdown is not None and not self._params_ok:
                return self._overfetch(x, wanted, threshold, mode, allowed, factor)
            params = search_params(
                self._faiss, family, pushdown, ef if ef is not None else self._ef_default, nprobe if nprobe is not None else self._nprobe_default
            )
        try:
            distances, labels = self._run(target, x, fetch, params)
        except RuntimeError:
            if pushdown is None:
                raise
            self._params_ok = False  # this index type takes no SearchParameters: filter after the search
            log.info("faiss.no_selector", name=self.name, factory=self.config.factory)
            return self._overfetch(x, wanted, threshold, mode, allowed, factor)
        if factor:
            return self._refined(x, labels, wanted, threshold)
        return self._hits(distances, labels, k, threshold)

    def _tombstone_pushdown(self) -> Pushdown:
        version = self._labels.dead_version
        if self._exclude is None or self._exclude[0] != version:
            dead = np.fromiter(self._labels.dead, dtype=np.int64, count=len(self._labels.dead))
            dead.sort()
            self._exclude = (version, self._main.translate(exclude(self._faiss, dead)))
        return self._exclude[1]

    def _overfetch(
        self, x: np.ndarray, k: int, threshold: float | None, mode: FaissQueryMode | None, allowed: np.ndarray | None, factor: int = 0
    ) -> list[list[Hit]]:
        """For index types without selector support: search deeper until every row has k
        (``k * factor`` allowed candidates, re-scored exactly, with a refine ``factor``)."""
        target = self._main if self._pending is None else self._pending
        total = target.ntotal
        keep = set(allowed.tolist()) if allowed is not None else None
        depth = k * factor if factor else k
        want = min(depth, len(keep) if keep is not None else len(self._labels))
        share = (len(keep) if keep is not None else len(self._labels)) / max(total, 1)
        fetch = min(total, max(2 * depth, int(depth / max(share, 1e-9)) + len(self._labels.dead)))
        while True:
            distances, labels = self._run(target, x, fetch, None)
            if factor:
                if allowed is not None:
                    labels = np.where(np.isin(labels, allowed), labels, -1)
                if fetch >= total or bool(((labels >= 0).sum(axis=1) >= want).all()):
                    return self._refined(x, labels, k, threshold)
                fetch = min(total, fetch * 4)
                continue
            hits = self._hits(distances, labels, k, threshold, keep)
            if fetch >= total or all(len(h) >= want for h in hits):
                return hits
            fetch = min(total, fetch * 4)

    def _run(self, target: Container, x: np.ndarray, fetch: int, params: Any) -> tuple[np.ndarray, np.ndarray]:
        """One faiss search call with this index's thread and BLAS settings.

        A batch of at least ``blas_min_queries`` queries over brute-force storage (Flat,
        the untrained buffer) runs as one BLAS product in a single thread unless
        ``omp_threads`` says otherwise: measured on 2 cores, single-threaded BLAS beats
        faiss' default sequential path 1.4x (idle) to 3x (busy machine), while 2-thread
        BLAS on a busy machine was 2.5x slower than the sequential path.
        """
        fetch = max(1, min(fetch, target.ntotal))
        threads = self.config.omp_threads
        blas = None
        if self._blas is not None and target.exhaustive and x.shape[0] >= self.config.blas_min_queries:
            blas = self._blas
            threads = 1 if threads is None else threads
        if threads is None and blas is None:
            return target.search(x, fetch, params)
        with faiss_settings(self._faiss, threads=threads, blas_threshold=blas):
            return target.search(x, fetch, params)

    def _hits(self, distances: np.ndarray, labels: np.ndarray, k: int, threshold: float | None, keep: set[int] | None = None) -> list[list[Hit]]:
        """faiss rows -> Hit lists: labels to ids (dropping -1 and tombstones), scores converted.

        This is the per-query Python cost of the index, so the common case (no ``keep``
        filter, no clipping needed) is one list comprehension per row.
        """
        get = self._labels.id_or_none
        sign, clip = self._scoring.sign, self._scoring.clip
        source = self.name
        out: list[list[Hit]] = []
        for raw_row, label_row in zip(distances.tolist(), labels.tolist()):
            if not raw_row:
                out.append([])
                continue
            if clip and (raw_row[0] > 1.0 or raw_row[-1] < -1.0):  # compressed codes, or -inf padding
                scores = [1.0 if r > 1.0 else (-1.0 if r < -1.0 else r) for r in raw_row]
            elif sign < 0:
                scores = [-r for r in raw_row]
            else:
                scores = raw_row
            if keep is None:
                hits = [Hit(rid, s, r, source) for rid, s, r in zip(map(get, label_row), scores, raw_row) if rid is not None]
            else:
                hits = [Hit(rid, s, r, source) for lb, s, r in zip(label_row, scores, raw_row) if lb in keep and (rid := get(lb)) is not None]
            if threshold is not None:
                cut = next((i for i, h in enumerate(hits) if h.score < threshold), None)
                if cut is not None:
                    del hits[cut:]
            del hits[k:]
            out.append(hits)
        return out

    def _exact(self, x: np.ndarray, k: int, labels: np.ndarray, threshold: float | None) -> list[list[Hit]]:
        """Score ``labels`` exactly with numpy over their vectors (the store's, for approximate
        storage with a store: :mod:`.refine`; else as stored by faiss)."""
        if self._exact_store is not None and self._pending is None:
            return self._refined(x, np.broadcast_to(labels, (x.shape[0], len(labels))), k, threshold)
        target = self._pending if self._pending is not None else self._main
        raw, cols = self._scoring.top(self._scoring.exact(x, target.reconstruct(labels, self.dim)), k)
        return self._hits(raw, labels[cols], k, threshold)

    # -- persistence -------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        # format 2: every layout saves its own vectors, read back with the graph in one
        # ``faiss.read_index`` (format 1 saved an HNSW graph or a Flat index without them and
        # refilled them from the store row by row: 10x slower to open, see docs/performance.md)
        files = {storage.MAIN_FILE}
        storage.write_faiss(self._faiss, self._main.index, directory / storage.MAIN_FILE)
        if self._pending is not None:
            storage.write_faiss(self._faiss, self._pending.index, directory / storage.PENDING_FILE)
            files.add(storage.PENDING_FILE)
        state = {
            "format_version": self.format_version,
            "kind": "faiss",
            "dim": self.dim,
            "metric": self.config.metric,
            "factory": self.config.factory,
            "trained": self._pending is None,
            "vectors": "own",
            "store_layout": None,
            "space": self.config.space,
            "main_ntotal": int(self._main.ntotal),
            "pending_ntotal": int(self._pending.ntotal) if self._pending is not None else None,
            "id_map": storage.IDMAP_FILE,
            "size": len(self._labels),
            "tombstone_count": len(self._labels.dead),
            "next_label": self._labels.next_label,
            "trained_on": self._trained_on,
        }
        arrays = self._labels.to_arrays()
        rows = self._rows.saved(arrays["labels"])
        if rows is not None:  # the store's row of each label (see .rows), while every one is known
            arrays[storage.ROWS_ARRAY] = rows
        storage.write_idmap(directory, arrays)
        files.add(storage.IDMAP_FILE)
        storage.write_state(directory, state)
        storage.remove_stale(directory, files)

    def load(self, directory: Path) -> None:
        directory = Path(directory)
        where = f"faiss index {self.name!r} in {directory}"
        state = storage.read_state(directory, where)
        if state.get("dim") != self.dim:  # the space's (kind, config, format version: checked by the core's index.json)
            raise CorruptError(f"{where}: saved dim {state.get('dim')!r} does not match {self.dim!r}")
        labels = self._read_labels(directory, state, where)
        if state.get("vectors", "own") == "store":
            self._load_from_store(directory, state, labels, where)
        else:
            self._load_own(directory, state, labels, where)
        self._rows = self._read_rows(directory, state, where)
        if self._exact_store is not None:
            self._exact_store.reset()

    def _load_own(self, directory: Path, state: dict[str, Any], labels: LabelMap, where: str) -> None:
        """Load a save with its vectors (format 2): the main index memory-mapped (see :mod:`.mapped`)."""
        trained = state.get("trained")
        if not isinstance(trained, bool) or (not trained and not self._layout.needs_training):
            raise CorruptError(f"{where}: bad 'trained' flag {trained!r}")
        main, mapped = storage.read_faiss_mapped(self._faiss, directory / storage.MAIN_FILE, where)
        try:
            self._check_loaded(main, directory, state, labels, trained, where)
        except BaseException:
            if mapped is not None:
                mapped.close()
            raise
        if self._file is not None:
            self._file.close()
        self._file = mapped
        if mapped is not None:
            for span in mapped_spans(self._faiss, main):  # the vectors, the graph, the lists: no page fault per row later
                populate(span)

    def _check_loaded(self, main: Any, directory: Path, state: dict[str, Any], labels: LabelMap, trained: bool, where: str) -> None:
        """Check the loaded ``main`` (and read the pending buffer) against the sidecar and the id map, then install them."""
        self._check_file(main, where, storage.MAIN_FILE, state.get("main_ntotal"))
        pending = None
        if trained:
            if main.ntotal != len(labels) + len(labels.dead) or not main.is_trained:
                raise CorruptError(f"{where}: {storage.MAIN_FILE} holds {main.ntotal} vectors, the id map {len(labels)} + {len(labels.dead)} tombstones")
        else:
            pending = storage.read_faiss(self._faiss, directory / storage.PENDING_FILE, where)
            self._check_file(pending, where, storage.PENDING_FILE, state.get("pending_ntotal"))
            if pending.ntotal != len(labels) or labels.dead or main.ntotal:
                raise CorruptError(f"{where}: {storage.PENDING_FILE} holds {pending.ntotal} vectors, the id map {len(labels)}")
        wrapped = not (self._layout.native_ids or self._layout.positional)
        if isinstance(main, self._faiss.IndexIDMap2) != wrapped:
            raise CorruptError(f"{where}: {storage.MAIN_FILE} is a {type(main).__name__}, not what {self.config.factory!r} builds")
        if trained and self._layout.positional and labels.next_label != main.ntotal:
            raise CorruptError(f"{where}: label counter {labels.next_label} does not match the {main.ntotal} positions of {storage.MAIN_FILE}")
        self._layout.reapply(main)
        trained_on = state.get("trained_on")
        self._trained_on = trained_on if isinstance(trained_on, int) and not isinstance(trained_on, bool) else None
        self._install(labels, Container(self._faiss, main), Container(self._faiss, pending) if pending is not None else None)

    def _read_rows(self, directory: Path, state: dict[str, Any], where: str) -> StoreRows:
        """The store's row of each live label as saved in ``idmap.npz`` (see :mod:`.rows`);
        saves without them: every row unknown, looked up in the store when first needed."""
        saved = storage.read_store_rows(directory, where) if "id_map" in state else None
        if saved is None or len(saved[0]) != len(self._labels):  # not kept, or labels dropped at load (format 1)
            return StoreRows.loaded(self._labels.live_labels(), None, self._labels.next_label, where)
        return StoreRows.loaded(saved[0], saved[1], self._labels.next_label, where)

    def _writable(self) -> None:
        """Before the first change of an index mapped from its file (see :mod:`.mapped`):
        read the same file into memory and swap it in."""
        mapped = self._file
        if mapped is None:
            return
        started = time.perf_counter()
        self._file = None
        try:
            main = mapped.owned(self._faiss)
        except RuntimeError as exc:
            raise CorruptError(f"faiss index {self.name!r}: cannot read {mapped.path.name} again: {exc}") from None
        finally:
            mapped.close()
        self._layout.reapply(main)
        self._install(self._labels, Container(self._faiss, main), self._pending)
        log.info("faiss.read_into_memory", name=self.name, vectors=int(main.ntotal), seconds=round(time.perf_counter() - started, 3))

    @staticmethod
    def _read_labels(directory: Path, state: dict[str, Any], where: str) -> LabelMap:
        """The saved id map: ``idmap.npz`` (named by the sidecar), or the JSON lists of older saves."""
        if "id_map" not in state:
            return LabelMap.from_json(state, where)
        if state["id_map"] != storage.IDMAP_FILE:
            raise CorruptError(f"{where}: unknown id map file {state['id_map']!r}")
        arrays = storage.read_idmap(directory, where)
        labels = LabelMap.from_arrays(arrays, state.get("next_label"), where)
        if state.get("size") != len(labels) or state.get("tombstone_count") != len(labels.dead):
            raise CorruptError(
                f"{where}: {storage.IDMAP_FILE} holds {len(labels)} ids + {len(labels.dead)} tombstones, the sidecar counts {state.get('size')!r} + {state.get('tombstone_count')!r}"
            )
        return labels

    def _load_from_store(self, directory: Path, state: dict[str, Any], labels: LabelMap, where: str) -> None:
        """Load a save without vectors: the graph (or nothing, for Flat) + the store's vectors."""
        if self._reader is None:
            raise CorruptError(f"{where}: saved without its vectors (the store keeps them), and no store is given to read them from")
        layout = state.get("store_layout")
        if state.get("trained") is not True or state.get("space") != self.config.space or layout not in ("hnsw", "flat"):
            raise CorruptError(f"{where}: bad store-backed state (trained {state.get('trained')!r}, space {state.get('space')!r}, layout {layout!r})")
        if state.get("main_ntotal") != len(labels) + len(labels.dead):
            raise CorruptError(f"{where}: the sidecar counts {state.get('main_ntotal')} vectors, the id map {len(labels)} + {len(labels.dead)} tombstones")
        if layout == "hnsw":
            if not self._layout.positional:
                raise CorruptError(f"{where}: an HNSW graph, not what {self.config.factory!r} builds")
            main = refill.load_hnsw(self._faiss, directory / storage.MAIN_FILE, labels, self._reader, self.config.space, self._scoring, where)
        else:
            empty = self._layout.new_index()
            if refill.store_layout(self._faiss, Container(self._faiss, empty), None) != "flat":
                raise CorruptError(f"{where}: a Flat index, not what {self.config.factory!r} builds")
            main = refill.load_flat(self._faiss, empty, labels, self._reader, self.config.space, self._scoring, where)
        self._layout.reapply(main)
        self._install(labels, Container(self._faiss, main), None)

    def _check_file(self, index: Any, where: str, name: str, ntotal: Any) -> None:
        if index.d != self.dim or index.metric_type != self._layout.metric_type or index.ntotal != ntotal:
            raise CorruptError(f"{where}: {name} (d={index.d}, metric={index.metric_type}, ntotal={index.ntotal}) does not match the sidecar")

    # -- introspection -----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "size": len(self._labels),
            "dim": self.dim,
            "space": self.config.space,
            "metric": self.config.metric,
            "factory": self.config.factory,
            "family": self._layout.family,
            "trained": self.trained,
            "pending": int(self._pending.ntotal) if self._pending is not None else 0,
            "min_train": self._layout.min_train,
            "train_sample": self._layout.train_sample,
            "trained_on": self._trained_on,
            "removal": "remove_ids" if self._layout.removable else "tombstones",
            "tombstones": len(self._labels.dead),
            "faiss_ntotal": int(self._main.ntotal),
            "ef_search": "auto" if self._ef_auto else self._ef_default,
            "ef_search_at_k10": self.effective_ef(10),
            "ef_construction": self._ef_construction(),
            "nprobe": self._nprobe_default,
            # candidates per hit re-scored with the store's vectors; None: exact storage, or no store to read them from
            "refine_k_factor": self.config.refine_k_factor if self._exact_store is not None else None,
        }
