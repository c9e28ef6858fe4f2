"""The late-interaction engine: passages (string pids) -> token vectors, compressed, searched.

Used by the in-process ``colbert`` index (pids are record ids) and by the HTTP server
(pids are the caller's passage ids). It holds no texts and no metadata (see
:mod:`.collection`).

Layout: passages are *slots* in insertion order; slot ``s`` owns ``doclens[s]`` token
rows starting at ``offsets[s]``. Until ``train_min_tokens`` token vectors have arrived
the rows are kept as float32 and searched exhaustively; past the threshold, the first
search or save (``defer_training``; or the add that crosses ``max_raw_tokens``, or the add
that crosses the threshold when not deferring) trains centroids + buckets and compresses every row (``codes``: centroid id,
``residuals``: ``dim * nbits / 8`` bytes). Later adds are encoded against the existing
centroids; past ``retrain_growth`` times the trained size everything is re-trained from
the decompressed vectors (and the new passages' original ones). Deleting tombstones a
slot; compaction drops dead slots once they hold ``compact_fraction`` of the tokens. The inverted file (centroid -> slots) is
derived from ``codes`` and rebuilt lazily after a change.
"""

from __future__ import annotations

import threading
import time
from typing import Iterable, Sequence

import numpy as np

from memcore.plugin import ValidationError, get_logger

from . import plaid
from .codec import ResidualCodec
from .transform import TransformCodec
from .config import ColbertIndexConfig, SearchParams
from .train import train

__all__ = ["Engine"]

log = get_logger("memcore.colbert")


class Engine:
    """Token vectors of passages, compressed ColBERTv2-style, searched with PLAID."""

    def __init__(self, config: ColbertIndexConfig, dim: int, name: str):
        if (dim * config.nbits) % 8:
            raise ValidationError(f"colbert index {name!r}: token dimension {dim} times nbits {config.nbits} must be a multiple of 8")
        self.config = config
        self.dim = dim
        self.name = name
        self._train_lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Empty the engine (untrained, no passages)."""
        self.pids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.alive = np.zeros(0, dtype=bool)
        self.doclens = np.zeros(0, dtype=np.int32)
        self.raw: np.ndarray | None = np.zeros((0, self.dim), dtype=np.float32)
        self.centroids: np.ndarray | None = None
        self.codec: ResidualCodec | TransformCodec | None = None
        self.codes = np.zeros(0, dtype=np.int32)
        self.residuals = np.zeros((0, 0), dtype=np.uint8)
        self.trained_tokens = 0
        self.train_pending = False
        self._derived()

    def _derived(self) -> None:
        self.version = getattr(self, "version", 0) + 1  # any change of slots or rows
        self.offsets = np.concatenate(([0], np.cumsum(self.doclens, dtype=np.int64)))
        self._ivf: tuple[np.ndarray, np.ndarray] | None = None

    # -- sizes ------------------------------------------------------------------------------

    @property
    def compressed(self) -> bool:
        """True once centroids and buckets are trained (rows stored as codes + residuals)."""
        return self.centroids is not None

    def __len__(self) -> int:
        return len(self.slot_of)

    def trained(self) -> tuple[np.ndarray, ResidualCodec | TransformCodec]:
        """``(centroids, codec)`` of a compressed engine (RuntimeError when not :attr:`compressed`)."""
        if self.centroids is None or self.codec is None:
            raise RuntimeError(f"colbert index {self.name!r}: the engine is not compressed")
        return self.centroids, self.codec

    def raw_tokens(self) -> np.ndarray:
        """The float32 token rows of an uncompressed engine (RuntimeError when :attr:`compressed`)."""
        if self.raw is None:
            raise RuntimeError(f"colbert index {self.name!r}: the engine holds no raw token rows")
        return self.raw

    @property
    def total_tokens(self) -> int:
        """Token rows held, tombstoned passages included."""
        return int(self.offsets[-1])

    @property
    def live_tokens(self) -> int:
        """Token rows of live passages."""
        return int(self.doclens[self.alive].sum())

    # -- writing ----------------------------------------------------------------------------

    def add(self, pids: Sequence[str], tokens: Sequence[np.ndarray]) -> None:
        """Add passages (a present pid is replaced); ``tokens[i]``: ``(n_i, dim)`` unit rows, n_i >= 1."""
        if not pids:
            return
        latest: dict[str, np.ndarray] = {}
        for pid, matrix in zip(pids, tokens):
            m = np.asarray(matrix, dtype=np.float32)
            if m.ndim != 2 or m.shape[1] != self.dim or m.shape[0] == 0:
                raise ValidationError(f"colbert index {self.name!r}: passage {pid!r} has token matrix shape {m.shape}, expected (n >= 1, {self.dim})")
            if not np.isfinite(m).all():
                raise ValidationError(f"colbert index {self.name!r}: token vectors of passage {pid!r} contain NaN or infinite values")
            latest.pop(pid, None)
            latest[pid] = m
        self.delete([p for p in latest if p in self.slot_of], compact=False)
        flat = np.concatenate(list(latest.values()))
        retrain = self.compressed and self.live_tokens + len(flat) > self.config.retrain_growth * self.trained_tokens
        if retrain:  # train on the new vectors as they are, not on a compressed copy of them
            self.compact()
            self.raw = self.token_vectors(np.arange(self.total_tokens))
            self.centroids, self.codec = None, None
            self.codes, self.residuals = np.zeros(0, dtype=np.int32), np.zeros((0, 0), dtype=np.uint8)
        base = len(self.pids)
        for i, pid in enumerate(latest):
            self.pids.append(pid)
            self.slot_of[pid] = base + i
        self.alive = np.concatenate((self.alive, np.ones(len(latest), dtype=bool)))
        self.doclens = np.concatenate((self.doclens, np.array([len(m) for m in latest.values()], dtype=np.int32)))
        if self.compressed:
            centroids, codec = self.trained()
            codes, residuals = codec.compress(flat, centroids)
            self.codes = np.concatenate((self.codes, codes))
            self.residuals = np.concatenate((self.residuals, residuals))
        else:
            self.raw = np.concatenate((self.raw_tokens(), flat))
        self._derived()
        if not retrain and not self.compressed and self.live_tokens >= self.config.train_min_tokens:
            deferred = self.config.defer_training and self.total_tokens < self.config.max_raw_tokens
            self.train_pending = deferred
            retrain = not deferred
        if retrain:
            self.retrain()
        else:
            self._maybe_compact()

    def ensure_trained(self) -> None:
        """Train now if a training was deferred (``defer_training``): before a search or a save."""
        if self.train_pending:
            with self._train_lock:
                if self.train_pending:
                    self.retrain()

    def delete(self, pids: Sequence[str], *, compact: bool = True) -> int:
        """Tombstone passages; unknown pids are ignored. Returns how many were deleted."""
        slots = [self.slot_of.pop(p) for p in dict.fromkeys(pids) if p in self.slot_of]
        if slots:
            self.alive[slots] = False
            self.version += 1
            if compact:
                self._maybe_compact()
        return len(slots)

    def _maybe_compact(self) -> None:
        dead = self.total_tokens - self.live_tokens
        if dead and dead > self.config.compact_fraction * self.total_tokens:
            self.compact()

    def compact(self) -> None:
        """Drop tombstoned passages and their token rows (centroids and buckets unchanged)."""
        if self.alive.all():
            return
        token_alive = np.repeat(self.alive, self.doclens)
        if self.compressed:
            self.codes = self.codes[token_alive]
            self.residuals = self.residuals[token_alive]
        else:
            self.raw = self.raw_tokens()[token_alive]
        self.pids = [p for p, a in zip(self.pids, self.alive.tolist()) if a]
        self.slot_of = {p: i for i, p in enumerate(self.pids)}
        self.doclens = self.doclens[self.alive]
        self.alive = np.ones(len(self.pids), dtype=bool)
        self._derived()

    def retrain(self) -> None:
        """Train centroids and buckets on the live token vectors and (re)compress them.

        Rows already compressed are decompressed first: the original vectors are not kept,
        so they are quantised twice (docs/plugins/colbert.md, "Re-training"). The passages
        of the add that triggers a re-training enter it uncompressed.
        """
        self.compact()
        self.train_pending = False
        if self.total_tokens < 16:
            return
        started = time.perf_counter()
        vectors = self.token_vectors(np.arange(self.total_tokens))
        self.centroids, self.codec = train(vectors, self.config, self.name)
        self.codes, self.residuals = self.codec.compress(vectors, self.centroids)
        self.raw = None
        self.trained_tokens = len(vectors)
        self._derived()
        log.info("colbert.compressed", name=self.name, passages=len(self), tokens=len(vectors), seconds=round(time.perf_counter() - started, 3))

    # -- reading ----------------------------------------------------------------------------

    def token_vectors(self, rows: np.ndarray) -> np.ndarray:
        """Token vectors of ``rows`` (decompressed when the engine is compressed)."""
        if self.compressed:
            centroids, codec = self.trained()
            return codec.decompress(np.take(self.codes, rows), np.take(self.residuals, rows, axis=0), centroids)
        return np.take(self.raw_tokens(), rows, axis=0)

    def ivf(self) -> tuple[np.ndarray, np.ndarray]:
        """The inverted file: ``(offsets (C+1,), slots)``, slots of centroid c at ``offsets[c]:offsets[c+1]``."""
        if self._ivf is None:
            nslots = max(len(self.pids), 1)
            owner = np.repeat(np.arange(len(self.pids), dtype=np.int64), self.doclens)
            keys = np.unique(self.codes.astype(np.int64) * nslots + owner)
            cells = keys // nslots
            counts = np.bincount(cells, minlength=len(self.trained()[0]))
            self._ivf = (np.concatenate(([0], np.cumsum(counts))), keys % nslots)
        return self._ivf

    def live_slots(self, allowed: np.ndarray | None) -> np.ndarray:
        """Live slots, within ``allowed`` (a slot mask) when given."""
        mask = self.alive if allowed is None else self.alive & allowed
        return np.flatnonzero(mask)

    def allowed_mask(self, pids: Iterable[str]) -> np.ndarray:
        """A slot mask of the live passages among ``pids``."""
        mask = np.zeros(len(self.pids), dtype=bool)
        slots = [s for s in map(self.slot_of.get, pids) if s is not None]
        mask[slots] = True
        return mask

    def search(self, q: np.ndarray, k: int, params: SearchParams, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(slots, MaxSim scores)`` of the best ``k`` live passages for query tokens ``q``."""
        self.ensure_trained()
        live = self.live_slots(allowed)
        if len(live) == 0 or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if not self.compressed or params.exhaustive or len(live) <= max(self.config.exhaustive_below, k):
            return self._exact(q, live, k)
        s = q @ self.trained()[0].T  # (nq, C)
        ivf_offsets, ivf_slots = self.ivf()
        cand = plaid.candidates(s, params.ncells, ivf_offsets, ivf_slots)
        mask = self.alive if allowed is None else self.alive & allowed
        cand = cand[mask[cand]]
        if len(cand) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        s_t = np.ascontiguousarray(s.T)
        keep = s.max(axis=0) >= params.centroid_score_threshold
        if len(cand) > params.ndocs:
            approx = plaid.centroid_scores(s_t, cand, self.offsets, self.doclens, self.codes, keep)
            cand = cand[plaid.top(approx, params.ndocs)]
        final = max(params.ndocs // 4, k)
        if len(cand) > final:
            approx = plaid.centroid_scores(s_t, cand, self.offsets, self.doclens, self.codes, None)
            cand = cand[plaid.top(approx, final)]
        return self._exact(q, np.sort(cand), k)

    def _scoring_vectors(self, rows: np.ndarray) -> np.ndarray:
        """Token vectors of ``rows`` in the codec's scoring space (rotated by a transform codec)."""
        if self.compressed:
            centroids, codec = self.trained()
            return codec.decompress_scoring(np.take(self.codes, rows), np.take(self.residuals, rows, axis=0), centroids)
        return np.take(self.raw_tokens(), rows, axis=0)

    def _exact(self, q: np.ndarray, slots: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = self.trained()[1].rotate_query(q) if self.compressed else q
        scores = plaid.maxsim(q, slots, self.offsets, self.doclens, self._scoring_vectors)
        best = plaid.top(scores, k)
        return slots[best], scores[best]

    def nbytes(self) -> dict[str, int]:
        """Bytes of the token storage (what an fp32 store of the same tokens would take, too)."""
        if self.compressed:
            centroids, codec = self.trained()
            stored = self.codes.nbytes + self.residuals.nbytes + centroids.nbytes + codec.tables_nbytes()
        else:
            stored = self.raw_tokens().nbytes
        return {"tokens": self.total_tokens, "stored_bytes": int(stored), "fp32_bytes": int(self.total_tokens * self.dim * 4)}
