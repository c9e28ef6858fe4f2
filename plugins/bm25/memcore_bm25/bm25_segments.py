"""The two segments of the ``bm25`` index.

- :class:`BaseSegment`: an immutable bm25s index over the documents live at the last
  merge, with their term counts (to rebuild, and to keep statistics) and tombstones for
  documents removed since. bm25s bakes IDF and length normalisation into its score
  matrix: while the live corpus is still the one of the merge, bm25s scores the segment
  itself; once it changed, the segment is scored from the term frequencies aligned with
  bm25s's sparse columns, with the statistics of all live documents.
- :class:`FreshSegment`: the documents added since the last merge, kept as term counts
  with small posting lists, scored with the statistics of all live documents. Each
  term's scores are kept from the first search that needs them until the next write (a
  memory below the merge threshold, a few hundred items, lives in this segment only).

Either way every score is the one a fresh bm25s index over the live documents gives.

Both return candidates as ``(score, id)`` pairs; :mod:`memcore_bm25.bm25` merges them.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Collection as AbstractSet, Sequence

import numpy as np

from .bm25_build import build_retriever, doc_lengths
from .bm25_scoring import CorpusStats, Scorer
from .bm25_tokenizer import DocTerms

if TYPE_CHECKING:
    import bm25s

__all__ = ["BaseSegment", "FreshSegment", "QueryTerms", "top_pairs"]


class QueryTerms:
    """A tokenized query under the current statistics.

    ``sequence``: the query's term ids in order, repeats kept; ``counts``: distinct term ->
    multiplicity. With the statistics of all live documents, computed on first use:
    ``idf`` / ``nonocc`` per distinct term, ``nonocc_total`` (what a document lacking
    every term still scores: BM25L/BM25+, else 0) and ``avgdl`` (average length).
    """

    __slots__ = ("sequence", "counts", "_scorer", "_stats", "_idf", "_nonocc", "_nonocc_total")

    def __init__(self, sequence: Sequence[int], scorer: Scorer, stats: CorpusStats):
        self.sequence = list(sequence)
        self.counts: dict[int, int] = {}
        for t in self.sequence:
            self.counts[t] = self.counts.get(t, 0) + 1
        self._scorer = scorer
        self._stats = stats
        self._idf: dict[int, float] | None = None

    def _compute(self) -> dict[int, float]:
        stats, scorer = self._stats, self._scorer
        avgdl = stats.avgdl
        self._idf = idf = {t: scorer.idf(stats.doc_freq(t), stats.n_docs) for t in self.counts}
        self._nonocc = {t: scorer.nonoccurrence(v, avgdl) for t, v in idf.items()}
        self._nonocc_total = float(sum(m * self._nonocc[t] for t, m in self.counts.items()))
        return idf

    @property
    def idf(self) -> dict[int, float]:
        """Current IDF of each distinct term."""
        idf = self._idf
        if idf is None:
            idf = self._compute()
        return idf

    @property
    def nonocc(self) -> dict[int, float]:
        """Current non-occurrence score of each distinct term (0 unless BM25L/BM25+)."""
        if self._idf is None:
            self._compute()
        return self._nonocc

    @property
    def nonocc_total(self) -> float:
        """Score of a document containing no query term (0 unless BM25L/BM25+)."""
        if self._idf is None:
            self._compute()
        return self._nonocc_total

    @property
    def avgdl(self) -> float:
        """Average length of the live documents."""
        return self._stats.avgdl


def top_pairs(scores: np.ndarray, rows: np.ndarray, ids: Sequence[str], k: int) -> list[tuple[float, str]]:
    """The best ``k`` of ``rows`` by ``scores[row]`` as (score, id), ties broken by id."""
    if rows.size == 0:
        return []
    values = scores[rows]
    if rows.size > k:
        kth_of = values.copy()
        kth_of.partition(rows.size - k)  # the method: np.partition without its Python wrapper
        kth = kth_of[rows.size - k]
        keep = values >= kth  # every row tied with the k-th score, so the id tie-break is exact
        rows, values = rows[keep], values[keep]
    pairs = list(zip(values.tolist(), map(ids.__getitem__, rows.tolist())))  # tolist gives Python floats
    pairs.sort(key=_by_score_then_id)
    del pairs[k:]
    return pairs


def _by_score_then_id(pair: tuple[float, str]) -> tuple[float, str]:
    return -pair[0], pair[1]


class BaseSegment:
    """A bm25s index over the documents of the last merge, plus tombstones."""

    def __init__(
        self,
        retriever: bm25s.BM25,
        ids: list[str],
        terms: np.ndarray,
        tfs: np.ndarray,
        offsets: np.ndarray,
        tf_columns: np.ndarray,
        gen: str | None = None,
    ):
        self.retriever = retriever
        self.ids = ids
        self.terms = terms
        self.tfs = tfs
        self.offsets = offsets
        self.tf_columns = tf_columns  # term frequency of each entry of bm25s's CSC columns
        self.gen = gen or uuid.uuid4().hex
        self.rows = {rid: row for row, rid in enumerate(ids)}
        self.alive = np.ones(len(ids), dtype=bool)
        self.n_dead = 0
        self.vocab_size = int(retriever.scores["indptr"].shape[0]) - 1
        self.lengths = doc_lengths(tfs, offsets).astype(np.float64)
        self.n_docs = len(ids)
        self._alive_mask: np.ndarray | None = None

    @classmethod
    def build(cls, ids: list[str], terms: np.ndarray, tfs: np.ndarray, offsets: np.ndarray, vocabulary: dict[str, int], scorer: Scorer) -> "BaseSegment":
        """Index documents given as a CSR of term counts (see :func:`build_retriever`)."""
        retriever, tf_columns = build_retriever(terms, tfs, offsets, vocabulary, scorer)
        return cls(retriever, list(ids), terms, tfs, offsets, tf_columns)

    def __len__(self) -> int:
        return self.n_docs - self.n_dead

    def doc(self, row: int) -> DocTerms:
        """The term counts of ``row``."""
        s, e = int(self.offsets[row]), int(self.offsets[row + 1])
        return DocTerms(np.asarray(self.terms[s:e]), np.asarray(self.tfs[s:e]))

    def live(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every live document, in row order: ids, and terms/tfs/sizes (entries per document)."""
        sizes = np.diff(self.offsets)
        if self.n_dead == 0:
            return list(self.ids), np.asarray(self.terms), np.asarray(self.tfs), sizes
        keep = np.repeat(self.alive, sizes)
        rows = np.flatnonzero(self.alive).tolist()
        return [self.ids[r] for r in rows], np.asarray(self.terms)[keep], np.asarray(self.tfs)[keep], sizes[self.alive]

    def kill(self, rid: str) -> DocTerms | None:
        """Tombstone ``rid``; returns its term counts, or None when it is not live here."""
        row = self.rows.pop(rid, None)
        if row is None:
            return None
        self.alive[row] = False
        self.n_dead += 1
        self._alive_mask = None
        return self.doc(row)

    def weight_mask(self, allowed: AbstractSet[str] | None) -> np.ndarray | None:
        """bm25s ``weight_mask``: 1 for live (and allowed) rows, 0 elsewhere; None for all."""
        if allowed is None:
            if self.n_dead == 0:
                return None
            if self._alive_mask is None:
                self._alive_mask = self.alive.astype(np.float32)
            return self._alive_mask
        mask = np.zeros(self.n_docs, dtype=np.float32)
        rows = [self.rows[rid] for rid in allowed if rid in self.rows]
        mask[rows] = 1.0
        return mask

    def search(self, query: QueryTerms, scorer: Scorer, k: int, mask: np.ndarray | None, unchanged: bool) -> list[tuple[float, str]]:
        """The best ``k`` rows containing a query term, as (score, id).

        ``unchanged``: the live corpus is still the one this segment was built from, so
        bm25s's precomputed scores are current and bm25s scores the query itself.
        """
        scores_data = self.retriever.scores
        indptr, indices = scores_data["indptr"], scores_data["indices"]
        terms = [t for t in query.counts if t < self.vocab_size]
        if not terms:
            return []
        matched = np.zeros(self.n_docs, dtype=bool)
        bounds = indptr[terms].tolist(), indptr[[t + 1 for t in terms]].tolist()
        for s, e in zip(*bounds):
            matched[indices[s:e]] = True
        if unchanged:
            scores = self.retriever.get_scores_from_ids([t for t in query.sequence if t < self.vocab_size], weight_mask=mask)
        else:
            scores = self._live_scores(query, scorer, terms, mask)
        rows = np.flatnonzero(matched)
        if mask is not None:
            rows = rows[mask[rows] > 0]
        return top_pairs(scores, rows, self.ids, k)

    def _live_scores(self, query: QueryTerms, scorer: Scorer, terms: list[int], mask: np.ndarray | None) -> np.ndarray:
        # the same sum bm25s computes, with today's statistics instead of the merge's
        indptr, indices = self.retriever.scores["indptr"], self.retriever.scores["indices"]
        scores = np.zeros(self.n_docs, dtype=np.float64)
        for t in terms:
            s, e = indptr[t], indptr[t + 1]
            rows = indices[s:e]  # distinct within a column
            part = query.idf[t] * scorer.tfc(self.tf_columns[s:e], self.lengths[rows], query.avgdl) - query.nonocc[t]
            scores[rows] += query.counts[t] * part
        if query.nonocc_total:
            scores += query.nonocc_total
        if mask is not None:
            scores *= mask
        return scores


class FreshSegment:
    """Documents added since the last merge: term counts, posting lists built on demand."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.docs: list[DocTerms] = []
        self.slots: dict[str, int] = {}
        self._alive: list[bool] = []
        self._postings: dict[int, tuple[list[int], list[int]]] = {}
        self._indexed = 0  # slots below this are in the posting lists
        self._lengths = np.zeros(0, dtype=np.float64)
        self._alive_arr = np.zeros(0, dtype=bool)
        self._term_cache: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        self._arrays: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # term -> its posting list's slots, counts, lengths
        self._scores_key: tuple[CorpusStats, int, int, Scorer] | None = None

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def n_slots(self) -> int:
        """Documents added since the merge, removed ones included (they cost until the next merge)."""
        return len(self.ids)

    def add(self, rid: str, doc: DocTerms) -> None:
        """Append a document (the caller removed any previous version of ``rid``)."""
        self.slots[rid] = len(self.ids)
        self.ids.append(rid)
        self.docs.append(doc)
        self._alive.append(True)

    def kill(self, rid: str) -> DocTerms | None:
        """Remove ``rid``; returns its term counts, or None when it is not here."""
        slot = self.slots.pop(rid, None)
        if slot is None:
            return None
        self._alive[slot] = False
        if slot < self._indexed:
            self._alive_arr[slot] = False
        return self.docs[slot]

    def live(self) -> list[tuple[str, DocTerms]]:
        """Every live document, in insertion order."""
        return [(self.ids[s], self.docs[s]) for s in range(len(self.ids)) if self._alive[s]]

    def live_arrays(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every live document as ids and terms/tfs/sizes arrays, like :meth:`BaseSegment.live`."""
        live = self.live()
        if not live:
            empty = np.zeros(0, dtype=np.int32)
            return [], empty, empty, np.zeros(0, dtype=np.int64)
        return (
            [rid for rid, _ in live],
            np.concatenate([d.terms for _, d in live]).astype(np.int32),
            np.concatenate([d.tfs for _, d in live]).astype(np.int32),
            np.array([d.terms.size for _, d in live], dtype=np.int64),
        )

    def _sync(self) -> None:
        n = len(self.ids)
        if self._indexed == n:
            return
        lengths = np.zeros(n, dtype=np.float64)
        lengths[: self._indexed] = self._lengths[: self._indexed]
        alive = np.zeros(n, dtype=bool)
        alive[: self._indexed] = self._alive_arr[: self._indexed]
        for slot in range(self._indexed, n):
            doc = self.docs[slot]
            lengths[slot] = doc.length
            alive[slot] = self._alive[slot]
            for term, tf in zip(doc.terms.tolist(), doc.tfs.tolist()):
                self._arrays.pop(term, None)  # its posting list grows
                posting = self._postings.get(term)
                if posting is None:
                    self._postings[term] = ([slot], [tf])
                else:
                    posting[0].append(slot)
                    posting[1].append(tf)
        self._lengths, self._alive_arr, self._indexed = lengths, alive, n

    def search(self, query: QueryTerms, scorer: Scorer, k: int, allowed: AbstractSet[str] | None) -> list[tuple[float, str]]:
        """The best ``k`` live documents containing a query term, scored with global statistics."""
        if not self.slots:
            return []
        self._sync()
        scores = np.zeros(len(self.ids), dtype=np.float64)
        matched = np.zeros(len(self.ids), dtype=bool)
        for t, m in query.counts.items():
            term = self._term_scores(t, query, scorer)
            if term is None:
                continue
            slots, part = term
            scores[slots] += m * part  # distinct within a posting list
            matched[slots] = True
        rows = (matched & self._alive_arr).nonzero()[0]
        if allowed is not None:
            rows = np.array([r for r in rows.tolist() if self.ids[r] in allowed], dtype=np.int64)
        if scorer.uses_nonoccurrence:  # otherwise it is 0.0 (and needs every term's IDF)
            scores += query.nonocc_total
        return top_pairs(scores, rows, self.ids, k)

    def _term_scores(self, t: int, query: QueryTerms, scorer: Scorer) -> tuple[np.ndarray, np.ndarray] | None:
        """The slots of the documents holding term ``t`` and the score each gets from one
        occurrence of ``t`` in a query (None when no document here holds it).

        What bm25s computes once for its whole index when it is built; here each term's
        scores are computed when a query first needs them and kept until the statistics,
        the scorer or the posting lists change (a small memory is mostly searched between
        two writes with the same words again)."""
        stats = query._stats
        key = (stats, stats.version, self._indexed, scorer)
        if self._scores_key != key:
            self._term_cache = {}
            self._scores_key = key
        cache = self._term_cache
        if t in cache:
            return cache[t]
        arrays = self._arrays.get(t)
        if arrays is None:
            posting = self._postings.get(t)
            if posting is None:
                cache[t] = None
                return None
            slots = np.asarray(posting[0], dtype=np.int64)
            # kept across writes until the term's posting list grows (a slot's length never changes)
            arrays = self._arrays[t] = (slots, np.asarray(posting[1], dtype=np.float64), self._lengths[slots])
        slots, tf, lengths = arrays
        part = query.idf[t] * scorer.tfc(tf, lengths, query.avgdl) - query.nonocc[t]
        cache[t] = (slots, part)
        return slots, part
