"""The ``keyword`` index: which records share words with the query?

Texts are split into lowercase ``\\w+`` tokens; each record is kept as its set of distinct
tokens plus an inverted index (token -> ids). A record matches a query when it contains at
least ``min_overlap`` distinct query tokens. Its score is the sum, over the distinct query
tokens it contains, of ``idf(t) = log(1 + N / df(t))`` (N records held, df(t) of them
contain t): more shared words score higher, and rare words count more than common ones.
``Hit.raw`` is the plain overlap count.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

from pydantic import Field

from memcore.plugin import atomic_write_json, ComponentConfig, CorruptError, Hit, Index, IndexContext, Query, Record, Requirements, ValidationError, validate_k

__all__ = ["KeywordIndex", "KeywordIndexConfig", "tokenize"]

_TOKEN = re.compile(r"\w+")
_FILE = "keyword.json"


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens of ``text`` (unicode ``\\w+`` runs)."""
    return _TOKEN.findall(text.lower())


class KeywordIndexConfig(ComponentConfig):
    """Settings of the ``keyword`` index (``[indexes.<name>] kind = "keyword"``)."""

    kind: str = "keyword"
    min_overlap: int = Field(1, ge=1, description="Distinct query tokens a record must contain to match.")


class KeywordIndex(Index):
    """Token-overlap search over record texts, scored by summed IDF of the shared tokens."""

    score_name = "idf-weighted token overlap"
    score_range = (0.0, None)
    format_version = 1
    requires = Requirements(text=True)

    def __init__(self, config: KeywordIndexConfig, context: IndexContext):
        self.config = config
        self.name = context.name
        self._docs: dict[str, frozenset[str]] = {}
        self._postings: dict[str, set[str]] = {}

    # -- validation -------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        for record in records:
            if not isinstance(record.text, str):
                raise ValidationError(f"index {self.name!r}: record {record.id!r} has no text")

    def validate_query(self, query: Query) -> None:
        if query.text is None:
            raise ValidationError(f"index {self.name!r} (keyword) searches text: the query has no text")

    # -- writing ----------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        self.validate(records)
        for record in records:  # a repeated id: the last one wins
            self._discard(record.id)
            tokens = frozenset(tokenize(record.text))
            self._docs[record.id] = tokens
            for token in tokens:
                self._postings.setdefault(token, set()).add(record.id)

    def remove(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self._discard(rid)

    def _discard(self, rid: str) -> None:
        tokens = self._docs.pop(rid, None)
        if tokens is None:
            return
        for token in tokens:
            ids = self._postings[token]
            ids.discard(rid)
            if not ids:
                del self._postings[token]

    # -- reading ----------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        k = validate_k(k)  # a k that is not a positive int is memcore's ValidationError
        self.validate_query(query)
        terms = [t for t in set(tokenize(query.text or "")) if t in self._postings]
        if not terms or (allowed is not None and not allowed):
            return []
        n = len(self._docs)
        idf = {t: math.log1p(n / len(self._postings[t])) for t in terms}
        overlap: dict[str, int] = {}
        score: dict[str, float] = {}
        postings_size = sum(len(self._postings[t]) for t in terms)
        if allowed is not None and len(allowed) < postings_size:
            # few allowed ids: check each of them instead of walking the posting lists
            for rid in allowed:
                tokens = self._docs.get(rid)
                if tokens is None:
                    continue
                shared = [t for t in terms if t in tokens]
                if shared:
                    overlap[rid] = len(shared)
                    score[rid] = sum(idf[t] for t in shared)
        else:
            for t in terms:
                for rid in self._postings[t]:
                    if allowed is not None and rid not in allowed:
                        continue
                    overlap[rid] = overlap.get(rid, 0) + 1
                    score[rid] = score.get(rid, 0.0) + idf[t]
        matches = [rid for rid, c in overlap.items() if c >= self.config.min_overlap]
        matches.sort(key=lambda rid: (-score[rid], rid))  # ties broken by id: deterministic
        return [Hit(rid, score[rid], raw=float(overlap[rid]), source=self.name) for rid in matches[:k]]

    def __len__(self) -> int:
        return len(self._docs)

    def stats(self) -> dict[str, Any]:
        return {"size": len(self._docs), "vocabulary": len(self._postings), "min_overlap": self.config.min_overlap}

    # -- persistence --------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        docs = {rid: sorted(tokens) for rid, tokens in self._docs.items()}
        atomic_write_json(Path(directory) / _FILE, {"format_version": self.format_version, "docs": docs})

    def load(self, directory: Path) -> None:
        path = Path(directory) / _FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version = data["format_version"]
            docs = data["docs"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptError(f"keyword index {self.name!r}: cannot read {path}: {exc}") from None
        if version != self.format_version:
            raise CorruptError(f"keyword index {self.name!r}: {path} has format version {version}, expected {self.format_version}; rebuild the index")
        if not isinstance(docs, dict) or not all(isinstance(tokens, list) and all(isinstance(t, str) for t in tokens) for tokens in docs.values()):
            raise CorruptError(f"keyword index {self.name!r}: {path} is malformed")
        self._docs = {}
        self._postings = {}
        for rid, tokens in docs.items():
            self._docs[rid] = frozenset(tokens)
            for token in tokens:
                self._postings.setdefault(token, set()).add(rid)
