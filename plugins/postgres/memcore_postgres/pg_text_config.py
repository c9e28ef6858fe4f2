"""Settings of the ``pg_text`` index kind (no psycopg import: read at every memcore start)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from memcore.plugin import ComponentConfig

__all__ = ["PgTextIndexConfig"]


class PgTextIndexConfig(ComponentConfig):
    """Settings of the ``pg_text`` index: full-text search in PostgreSQL over the postgres
    store's records (a generated ``tsvector`` column of ``records`` per ``language`` and its
    GIN index), scored in the same SQL statement as the query's filters and scope.

    The defaults (BM25 scoring, any-term matching) were chosen by measurement against the
    ``bm25`` index kind on BEIR SciFact (``docs/plugins/postgres.md``).
    """

    search_time: ClassVar[frozenset[str]] = frozenset({"scoring", "match", "k1", "b", "normalization"})
    store_kinds: ClassVar[frozenset[str]] = frozenset({"postgres"})

    kind: str = "pg_text"
    language: str = Field(
        "english",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="PostgreSQL text search configuration (regconfig) of to_tsvector: english, simple, german, french... "
        "Its stemmer and stopwords apply to records and queries alike.",
    )
    scoring: Literal["bm25", "ts_rank_cd"] = Field(
        "bm25",
        description="bm25: Okapi BM25 (Lucene's idf) computed in SQL from the index's document frequencies; "
        "ts_rank_cd: PostgreSQL's cover density ranking (cheaper: no corpus statistics, lower quality on SciFact).",
    )
    match: Literal["any", "all"] = Field(
        "any",
        description="Which records are candidates: any = those holding at least one query term (OR, as BM25 ranks), "
        "all = those holding every query term (plainto_tsquery's AND).",
    )
    k1: float = Field(1.2, gt=0, le=100, description="BM25 term-frequency saturation (scoring = bm25).")
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation, 0 = none, 1 = full (scoring = bm25).")
    normalization: int = Field(
        0, ge=0, le=63, description="ts_rank_cd's normalization bit mask (1: divide by 1 + log(length), 2: by length, ...; scoring = ts_rank_cd)."
    )
