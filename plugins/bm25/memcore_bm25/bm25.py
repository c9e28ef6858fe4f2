"""The ``bm25`` index: BM25 text search on bm25s, with incremental segments and merges.

bm25s builds an immutable index (it bakes IDF and length normalisation into a sparse
score matrix) and has no add or delete. This index keeps two segments:

- the **base**: a bm25s index over the documents live at the last merge; removed
  documents are tombstones, pushed down as bm25s's ``weight_mask``;
- the **fresh** segment: documents added since, as term counts with posting lists.

Scores always use the statistics of *all* live documents (document frequencies, count,
average length): while nothing changed since the last merge bm25s scores the base itself;
afterwards the base is scored from the term frequencies aligned with bm25s's sparse
columns and the fresh documents from their posting lists. A result therefore equals the
one of a fresh bm25s index over the live documents at every moment (to float32 rounding).
Merges exist for speed and memory: when fresh documents plus tombstones exceed
``merge_threshold``, the next search (or save) rebuilds the base with bm25s over every
live document (:meth:`BM25Index.merge`). A merge also drops the terms no live document
uses; a save after a removal always merges first, so the saved files keep nothing of a
removed document (no tombstone, id or term: forgetting is complete on disk).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Collection as AbstractSet, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memcore.plugin import (
    atomic_write_json,
    ComponentConfig,
    CorruptError,
    Hit,
    Index,
    IndexContext,
    Query,
    Record,
    Requirements,
    validate_k,
    ValidationError,
)

from .bm25_tokenizer import STOPWORD_LISTS, DocTerms

if TYPE_CHECKING:
    from .bm25_segments import BaseSegment, QueryTerms

__all__ = ["BM25Config", "BM25Index", "BM25QueryModes", "auto_merge_threshold"]


def auto_merge_threshold(base_size: int) -> int:
    """The default merge threshold: max(1000, 1% of the base segment's live documents)."""
    return max(1000, base_size // 100)


FORMAT = "memcore-bm25"


class BM25Config(ComponentConfig):
    """Settings of the ``bm25`` index (``[indexes.<name>] kind = "bm25"``)."""

    search_time: ClassVar[frozenset[str]] = frozenset({"merge_threshold"})

    kind: str = "bm25"
    k1: float = Field(1.2, gt=0, le=100, description="Term-frequency saturation.")
    b: float = Field(0.75, ge=0, le=1, description="Length normalisation (0 = none, 1 = full).")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field("lucene", description="bm25s scoring variant.")
    delta: float = Field(0.5, ge=0, le=100, description="The delta of BM25L / BM25+ (ignored by the other methods).")
    stopwords: str | tuple[str, ...] | None = Field("en", description='A bm25s stopword list ("en", "de", "fr"...), a list of words, or "none".')
    stemmer: str | None = Field("english", description='A PyStemmer algorithm ("english", "porter", "german"...) or "none".')
    fields: tuple[str, ...] = Field(("text",), description='What is indexed: "text" and/or "metadata.<key>", joined.')
    merge_threshold: int | None = Field(
        None, ge=1, le=1_000_000_000, description="Fresh documents + tombstones that trigger a merge; default max(1000, 1% of the base)."
    )

    @field_validator("stopwords", mode="before")
    @classmethod
    def _stopwords(cls, value: Any) -> Any:
        if value is None or value is False or (isinstance(value, str) and value.lower() in ("", "none")):
            return None
        if value is True:
            return "en"
        if isinstance(value, str) and value not in STOPWORD_LISTS:
            raise ValueError(f"unknown stopword list {value!r}; use one of {sorted(STOPWORD_LISTS)}, a list of words, or 'none'")
        return value

    @field_validator("stemmer", mode="before")
    @classmethod
    def _stemmer(cls, value: Any) -> Any:
        if value is None or value is False or (isinstance(value, str) and value.lower() in ("", "none")):
            return None
        return value

    @field_validator("fields")
    @classmethod
    def _fields(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError('fields must name at least one of "text" or "metadata.<key>"')
        for name in value:
            if name != "text" and not (name.startswith("metadata.") and len(name) > len("metadata.")):
                raise ValueError(f'unknown field {name!r}: use "text" or "metadata.<key>"')
        if len(set(value)) != len(value):
            raise ValueError("fields repeats a name")
        return value


class BM25QueryModes(BaseModel):
    """Query modes of the ``bm25`` index, given as ``Query.extras["bm25"]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_score: float | None = Field(None, ge=0, allow_inf_nan=False, description="Drop hits scoring below this BM25 score.")


class BM25Index(Index):
    """BM25 over record texts: a bm25s base segment, a fresh segment, merges (see the module doc)."""

    score_range = (0.0, None)
    format_version = 1
    requires = Requirements(text=True)

    def __init__(self, config: BM25Config, context: IndexContext):
        from .bm25_scoring import Scorer

        super().__init__(config, context)
        self.config = config
        self.score_name = f"BM25 ({config.method})"
        self._scorer = Scorer(config.method, config.k1, config.b, config.delta)
        self._reset()

    def _reset(self) -> None:
        from .bm25_scoring import CorpusStats
        from .bm25_segments import FreshSegment
        from .bm25_tokenizer import BM25Tokenizer

        self._tokenizer = BM25Tokenizer(self.config.stopwords, self.config.stemmer)
        self._stats = CorpusStats()
        self._base: BaseSegment | None = None
        self._fresh = FreshSegment()
        self.merges = 0

    # -- validation ---------------------------------------------------------------------

    def _field_text(self, record: Record, name: str) -> str | None:
        if name == "text":
            return record.text
        value = record.metadata.get(name[len("metadata.") :])
        if value is None:
            return None
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
        raise ValidationError(
            f"index {self.name!r} indexes {name!r}, but record {record.id!r} has a {type(value).__name__} there; use text, a number or a list of texts"
        )

    def _document_text(self, record: Record) -> str:
        return " ".join(t for t in (self._field_text(record, f) for f in self.config.fields) if t)

    def validate(self, records: Sequence[Record]) -> None:
        for record in records:
            if not isinstance(record.text, str):
                raise ValidationError(f"index {self.name!r} (bm25) needs text; record {record.id!r} has none")
            self._document_text(record)

    def validate_query(self, query: Query) -> None:
        self._checked_modes(query)

    def _query_text(self, query: Query) -> str:
        """The query's text (ValidationError when it has none)."""
        if not isinstance(query.text, str) or not query.text.strip():
            raise ValidationError(f"index {self.name!r} (bm25) searches text: the query text is empty")
        return query.text

    def _checked_modes(self, query: Query) -> BM25QueryModes:
        """The query's modes, after checking it has text (ValidationError otherwise)."""
        self._query_text(query)
        modes: BM25QueryModes = self.mode(query, BM25QueryModes, defaults={})
        return modes

    # -- writing ------------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self.validate(records)
        latest = {r.id: r for r in records}  # a repeated id: the last one wins
        docs = self._tokenizer.documents([self._document_text(r) for r in latest.values()])
        self._stats.grow(self._tokenizer.vocab_size)
        for rid, doc in zip(latest, docs):
            self._discard(rid)
            self._fresh.add(rid, doc)
            self._stats.add(doc.terms, doc.length)

    def remove(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self._discard(rid)

    def _discard(self, rid: str) -> None:
        doc: DocTerms | None = self._base.kill(rid) if self._base is not None else None
        if doc is None:
            doc = self._fresh.kill(rid)
        if doc is not None:
            self._stats.remove(doc.terms, doc.length)

    # -- merging ------------------------------------------------------------------------

    @property
    def merge_threshold(self) -> int:
        """Fresh documents + tombstones beyond which the next search or save merges."""
        if self.config.merge_threshold is not None:
            return self.config.merge_threshold
        return auto_merge_threshold(len(self._base) if self._base is not None else 0)

    @property
    def pending(self) -> int:
        """Changes since the last merge: fresh documents (removed ones too) + base tombstones."""
        return self._fresh.n_slots + (self._base.n_dead if self._base is not None else 0)

    def merge(self) -> None:
        """Rebuild the base segment over every live document; the fresh segment empties and
        the vocabulary keeps only the terms of live documents (renumbered in their order).

        Afterwards scores equal those of a fresh bm25s index over the live documents, and
        nothing of a removed document is left: no tombstone, no term only it used.
        """
        import numpy as np

        from .bm25_scoring import CorpusStats
        from .bm25_segments import BaseSegment, FreshSegment

        parts = ([self._base.live()] if self._base is not None else []) + [self._fresh.live_arrays()]
        ids = [rid for part in parts for rid in part[0]]
        terms = np.concatenate([part[1] for part in parts]).astype(np.int32)
        vocabulary = self._tokenizer.terms()
        used = np.unique(terms)  # ascending: renumbering keeps each document's terms sorted
        if used.size < len(vocabulary):  # terms only removed documents used: forget them
            renumber = np.zeros(len(vocabulary), dtype=np.int32)
            renumber[used] = np.arange(used.size, dtype=np.int32)
            terms = renumber[terms]
            self._tokenizer.set_terms([vocabulary[t] for t in used.tolist()])
            stats = CorpusStats()
            stats.grow(int(used.size))
            stats.add_many(terms, self._stats.n_docs, self._stats.total_length)
            self._stats = stats
        if ids:
            tfs = np.concatenate([part[2] for part in parts]).astype(np.int32)
            offsets = np.concatenate([[0], np.cumsum(np.concatenate([part[3] for part in parts]))]).astype(np.int64)
            self._base = BaseSegment.build(ids, terms, tfs, offsets, self._tokenizer.vocabulary(), self._scorer)
        else:
            self._base = None
        self._fresh = FreshSegment()
        self.merges += 1

    @property
    def holds_removed(self) -> bool:
        """Something of a removed document is still kept: a tombstoned base row, or a term
        no live document uses (what :meth:`save` merges away before writing)."""
        if self._base is not None and self._base.n_dead:
            return True
        vocab_size = self._tokenizer.vocab_size
        df = self._stats.df[:vocab_size]
        return bool(df.shape[0] < vocab_size or (df == 0).any())

    def _merge_if_due(self) -> None:
        if self.pending > self.merge_threshold:
            self.merge()

    # -- reading ------------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        return self.search_batch([query], k, allowed)[0]

    def search_batch(self, queries: Sequence[Query], k: int, allowed: AbstractSet[str] | None = None) -> list[list[Hit]]:
        k = validate_k(k)
        modes = [self._checked_modes(query) for query in queries]
        if not queries:
            return []
        self._merge_if_due()
        if allowed is not None and not allowed:
            return [[] for _ in queries]
        base = self._base
        mask = base.weight_mask(allowed) if base is not None else None
        unchanged = self._fresh.n_slots == 0 and (base is None or base.n_dead == 0)
        out: list[list[Hit]] = []
        for _query, mode, sequence in zip(queries, modes, self._tokenizer.queries([self._query_text(q) for q in queries])):
            terms = self._query_terms(sequence)
            if terms is None:
                out.append([])
                continue
            if base is None:  # a small memory: the fresh segment alone, its pairs already ranked
                pairs = self._fresh.search(terms, self._scorer, k, allowed)
            else:
                pairs = base.search(terms, self._scorer, k, mask, unchanged) + self._fresh.search(terms, self._scorer, k, allowed)
                pairs.sort(key=lambda p: (-p[0], p[1]))
            if mode.min_score is not None:
                pairs = [p for p in pairs if p[0] >= mode.min_score]
            out.append([Hit(rid, score, raw=score, source=self.name) for score, rid in pairs[:k]])
        return out

    def _query_terms(self, sequence: list[int]) -> QueryTerms | None:
        from .bm25_segments import QueryTerms

        df = self._stats.df
        known = [t for t in sequence if t < df.shape[0]]
        if known:
            live = df[known] > 0
            known = [t for t, keep in zip(known, live.tolist()) if keep]
        if not known:
            return None  # only unknown words (or stopwords, or words of removed documents)
        return QueryTerms(known, self._scorer, self._stats)

    def __len__(self) -> int:
        return self._stats.n_docs

    def stats(self) -> dict[str, Any]:
        return {
            "size": len(self),
            "base": len(self._base) if self._base is not None else 0,
            "fresh": len(self._fresh),
            "pending": self.pending,
            "merge_threshold": self.merge_threshold,
            "merges": self.merges,
            "vocabulary": self._tokenizer.vocab_size,
            "avgdl": round(self._stats.avgdl, 3),
            "method": self.config.method,
            "k1": self.config.k1,
            "b": self.config.b,
        }

    # -- persistence --------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        return self.config.model_dump(mode="json", exclude={"kind", "merge_threshold"})

    def save(self, directory: Path) -> None:
        from .bm25_files import STATE_FILE, remove_stale, save_base

        directory = Path(directory)
        if self.holds_removed:  # a removed document's terms and id must not reach the files
            self.merge()
        else:
            self._merge_if_due()
        base = self._base
        if base is not None:
            save_base(directory, base, self.config.method)
        base_vocab = base.vocab_size if base is not None else 0
        state = {
            "format": FORMAT,
            "format_version": self.format_version,
            "settings": self._settings(),
            "base": base.gen if base is not None else None,
            "base_dead": ([] if base is None else [int(r) for r in (~base.alive).nonzero()[0]]),
            "extra_terms": self._tokenizer.terms()[base_vocab:],
            "fresh": [[rid, doc.terms.tolist(), doc.tfs.tolist()] for rid, doc in self._fresh.live()],
            "merges": self.merges,
        }
        atomic_write_json(directory / STATE_FILE, state)
        remove_stale(directory, base.gen if base is not None else None)

    def load(self, directory: Path) -> None:
        from .bm25_files import STATE_FILE, load_base, read_state

        directory = Path(directory)
        where = f"bm25 index {self.name!r} in {directory}"
        state = read_state(directory, where)  # format, version and settings: checked by the core (index.json)
        try:
            base = load_base(directory, state["base"], self._scorer, where) if state["base"] is not None else None
            self._restore(state, base)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            self._reset()
            raise CorruptError(f"{where}: malformed {STATE_FILE}: {exc}") from None

    def _restore(self, state: dict[str, Any], base: BaseSegment | None) -> None:
        import numpy as np

        from .bm25_segments import FreshSegment
        from .bm25_tokenizer import doc_terms

        self._reset()
        terms = [""] * (base.vocab_size if base is not None else 0)
        if base is not None:
            for term, tid in base.retriever.vocab_dict.items():
                terms[tid] = term
        extra = state["extra_terms"]
        if not isinstance(extra, list) or not all(isinstance(t, str) for t in extra):
            raise ValueError("extra_terms is not a list of terms")
        self._tokenizer.set_terms(terms + extra)
        vocab_size = self._tokenizer.vocab_size
        self._stats.grow(vocab_size)
        if base is not None:
            for row in state["base_dead"]:
                base.kill(base.ids[int(row)])
            per_term = np.repeat(base.alive, np.diff(base.offsets))
            self._stats.add_many(np.asarray(base.terms)[per_term], len(base), int(base.lengths[base.alive].sum()))
        self._base = base
        fresh = FreshSegment()
        for rid, doc_ids, tfs in state["fresh"]:
            doc = doc_terms(np.repeat(np.asarray(doc_ids, dtype=np.int32), np.asarray(tfs, dtype=np.int32)))
            if not isinstance(rid, str) or rid in fresh.slots or (base is not None and rid in base.rows):
                raise ValueError(f"fresh document {rid!r} is repeated")
            if doc.terms.size and int(doc.terms.max()) >= vocab_size:
                raise ValueError(f"fresh document {rid!r} uses an unknown term")
            fresh.add(rid, doc)
            self._stats.add(doc.terms, doc.length)
        self._fresh = fresh
        self.merges = int(state.get("merges", 0))
