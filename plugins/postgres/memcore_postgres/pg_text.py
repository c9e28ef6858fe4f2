"""The ``pg_text`` index kind: full-text search inside the postgres store's database.

The index keeps **no text of its own**: the store's ``records`` table gets, once per text
search configuration (``language``), a stored generated column ``tsv_<language>`` =
``to_tsvector('<language>', left(text, MAX_CHARS))`` and a GIN index on it. PostgreSQL
computes the column in the transaction of every batch that writes a record, so the index is
current the moment the batch commits, in every process; a deleted record (a forgotten
scope) takes its ``tsvector`` with it. The membership of the index is the store's
``records.member_of`` column, as for ``pgvector``: ``add`` and ``remove`` copy nothing
(``add`` creates the column and its GIN index once, when missing).

A search is **one SQL statement**: the query text goes through ``to_tsvector`` with the
same configuration (stemming, stopwords; any user text is valid, nothing is parsed as
syntax), the candidate records are those whose ``tsvector`` matches any (``match = "any"``,
an OR of the query's lexemes) or all (``"all"``, ``plainto_tsquery``) of them, restricted in
the same ``WHERE`` clause by the index's membership, the query's ``where`` filter and its
scope (:attr:`applies_filters`), and ranked by BM25 computed in SQL (``scoring = "bm25"``:
document frequencies of the query's lexemes and the average document length over the
index's members, Lucene's idf, ``tf / (tf + k1 (1 - b + b dl / avgdl))`` with ``dl`` the
record's number of distinct lexemes) or by ``ts_rank_cd``.

With any other store the index refuses to open (:class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

from psycopg import Connection, sql

from memcore.plugin import (
    ConfigError,
    CorruptError,
    Hit,
    Index,
    IndexContext,
    Query,
    Record,
    Requirements,
    ValidationError,
    atomic_write_json,
    read_json_object,
    validate_k,
)

from .pg_text_config import PgTextIndexConfig
from .index_store import postgres_store_of

__all__ = ["PgTextIndex", "MAX_CHARS", "text_column"]

MANIFEST = "pg_text.json"
MAX_CHARS = 250_000
"""Characters of a record's text that are indexed: PostgreSQL's ``tsvector`` holds at most
1 MB, and a longer one would make the batch writing the record fail (the worst text measured,
distinct short words, gives about 2.7 bytes of ``tsvector`` per character)."""

# a lexeme as a quoted tsquery operand: backslashes and quotes escaped (lexemes are data)
_QUOTED = r"('''' || replace(replace({x}, E'\\', E'\\\\'), '''', '''''') || '''')"


def text_column(language: str) -> str:
    """The name of the generated ``tsvector`` column of ``records`` for a text search configuration."""
    return f"tsv_{language}"


class PgTextIndex(Index):
    """Full-text search over the postgres store's records (see the module docstring)."""

    applies_filters = True
    format_version = 1
    requires = Requirements(text=True)
    score_range = (0.0, None)

    def __init__(self, config: PgTextIndexConfig, context: IndexContext):
        super().__init__(config, context)
        store = postgres_store_of(context, "pg_text", "the records", "the bm25 index kind")
        self.config: PgTextIndexConfig = config
        self.store = store
        self.read_only = context.read_only or store.read_only
        self.score_name = "BM25 (PostgreSQL)" if config.scoring == "bm25" else "ts_rank_cd"
        self.column = text_column(config.language)
        self._built = False
        self._corpus_cache: tuple[int | None, tuple[float, float]] | None = None
        self._check_language()

    def _check_language(self) -> None:
        found = self.store.pool.read(
            "reading text search configurations",
            lambda conn: conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (self.config.language,)).fetchone(),
        )
        if found is None:
            raise ConfigError(
                f"index {self.name!r}: PostgreSQL has no text search configuration {self.config.language!r} (see \\dF in psql: english, simple, german...)",
                location=f"indexes.{self.name}.language",
            )

    # -- the column and its GIN index ------------------------------------------------------

    def _column_present(self, conn: Connection[Any]) -> bool:
        if not self._built:
            row = conn.execute(
                "SELECT 1 FROM pg_attribute WHERE attrelid = 'records'::regclass AND attname = %s AND NOT attisdropped", (self.column,)
            ).fetchone()
            self._built = row is not None
        return self._built

    def _ensure_built(self) -> None:
        """Add the generated column and its GIN index when missing (once; between builders
        serialised by an advisory lock). ``records`` is locked first (``ACCESS EXCLUSIVE``,
        what ``ALTER TABLE`` takes anyway): the build waits for the writers at work, which
        hold ``records`` and take the sequence row only as their last step, and never holds
        that row itself, so no writer waits for it while it waits for the writer. Adding
        the column rewrites ``records`` once, blocking its readers and writers while it runs."""
        if self._built or self.read_only:
            return

        def build(conn: Connection[Any]) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memcore:{self.store.schema}:{self.column}",))
            if self._column_present(conn):
                return True
            conn.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
            conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            language = sql.Literal(self.config.language)
            conn.execute(
                sql.SQL(
                    "ALTER TABLE records ADD COLUMN IF NOT EXISTS {} tsvector GENERATED ALWAYS AS (to_tsvector({}::regconfig, left(text, {}))) STORED"
                ).format(sql.Identifier(self.column), language, sql.Literal(MAX_CHARS))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON records USING gin ({})").format(sql.Identifier(f"records_{self.column}"), sql.Identifier(self.column))
            )
            conn.execute("ANALYZE records")
            return True

        self._built = bool(self.store.pool.write(f"building the pg_text index of {self.name!r}", build))

    # -- Index -------------------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        """Every record needs a text (the store refuses NUL characters itself)."""
        for record in records:
            if not isinstance(record.text, str):
                raise ValidationError(f"index {self.name!r} (pg_text) needs text; record {record.id!r} has none")

    def validate_query(self, query: Query) -> None:
        """The query needs a non-empty text."""
        self._query_text(query)

    def _query_text(self, query: Query) -> str:
        if not isinstance(query.text, str) or not query.text.strip():
            raise ValidationError(f"index {self.name!r} (pg_text) searches text: the query text is empty")
        if "\x00" in query.text:
            raise ValidationError(f"index {self.name!r} (pg_text): PostgreSQL text cannot hold NUL characters")
        return query.text

    def add(self, records: Sequence[Record]) -> None:
        """Nothing to copy: the collection's batch wrote the records and their membership to
        the store, and PostgreSQL computed their ``tsvector``. Creates the column the first
        time there are records."""
        if records:
            self.validate(records)
            self._ensure_built()

    def remove(self, ids: Sequence[str]) -> None:
        """Nothing to do: the store's batch took the ids out of ``member_of`` (or deleted them)."""

    def __len__(self) -> int:
        """The number of the store's records that are members of this index."""
        return self.store.count(index=self.name)

    def statement(
        self, query: Query, k: int, allowed: AbstractSet[str] | None, column_present: bool = True, corpus: tuple[float, float] | None = None
    ) -> tuple[sql.Composed, list[Any]]:
        """The one SQL statement of a search and its parameters (``EXPLAIN`` it to see the plan).

        Without the generated column (no writer has added to the index yet) the ``tsvector``
        is computed from the text in the statement. ``corpus``: the members' count and
        average length for BM25 when known (:meth:`search` keeps them per store sequence
        number), else the statement computes them (a scan of the members)."""
        c = self.config
        text = self._query_text(query)
        language = sql.Literal(c.language).as_string(None)
        tsv = f"r.{sql.Identifier(self.column).as_string(None)}" if column_present else f"to_tsvector({language}::regconfig, left(r.text, {MAX_CHARS}))"
        scope = query.scope if query.scope is not None and not query.scope.is_empty() else None
        condition, where_params = self.store.where_sql(query.parsed_where(), scope, self.name, alias="r")
        if allowed is not None:
            condition += " AND r.id = ANY(%s)"
            where_params.append(list(allowed))
        params: list[Any] = [text]
        parts = [f"WITH terms AS MATERIALIZED (SELECT t.lexeme FROM unnest(to_tsvector({language}::regconfig, %s)) AS t)"]
        if c.match == "any":
            tsq = f"(SELECT string_agg({_QUOTED.format(x='lexeme')}, ' | ') FROM terms)::tsquery"
        else:
            tsq = f"plainto_tsquery({language}::regconfig, %s)"
            params.append(text)
        parts.append(f", q AS MATERIALIZED (SELECT {tsq} AS tsq, (SELECT array_agg(lexeme) FROM terms) AS lexemes)")
        order = f' ORDER BY score DESC, r.id COLLATE "C" LIMIT {int(k)}'
        if c.scoring == "ts_rank_cd":
            parts.append(
                f" SELECT r.id, ts_rank_cd({tsv}, q.tsq, {int(c.normalization)})::float8 AS score FROM records r, q WHERE {tsv} @@ q.tsq AND {condition}"
            )
            params.extend(where_params)
            return sql.Composed([sql.SQL(" ".join(parts) + order)]), params
        member = "r.member_of @> ARRAY[%s::text]"
        if corpus is None:
            parts.append(
                f", corpus AS MATERIALIZED (SELECT count(*)::float8 AS n, coalesce(avg(length({tsv})), 0)::float8 AS avgdl FROM records r WHERE {member})"
            )
            params.append(self.name)
        else:
            parts.append(", corpus AS MATERIALIZED (SELECT %s::float8 AS n, %s::float8 AS avgdl)")
            params.extend(corpus)
        k1, b = float(c.k1), float(c.b)
        parts.append(
            ", df AS MATERIALIZED (SELECT t.lexeme, ln(1 + (c.n - d.df + 0.5) / (d.df + 0.5)) AS idf FROM terms t CROSS JOIN corpus c CROSS JOIN LATERAL "
            f"(SELECT count(*)::float8 AS df FROM records r WHERE {member} AND {tsv} @@ {_QUOTED.format(x='t.lexeme')}::tsquery) d)"
            # every candidate's query terms in one set (setweight marks them, ts_filter keeps them:
            # C, no unnest of the whole tsvector), joined once to their idf and summed per record
            f" SELECT r.id, sum(df.idf * u.tf / (u.tf + {k1} * (1 - {b} + {b} * length({tsv}) / greatest(c.avgdl, 1e-9))))::float8 AS score"
            " FROM records r CROSS JOIN q CROSS JOIN corpus c CROSS JOIN LATERAL (SELECT x.lexeme, coalesce(array_length(x.positions, 1), 1)::float8 AS tf"
            f" FROM unnest(ts_filter(setweight({tsv}, 'A', q.lexemes), '{{a}}')) AS x) u JOIN df ON df.lexeme = u.lexeme"
            f" WHERE {tsv} @@ q.tsq AND {condition} GROUP BY r.id"
        )
        params.append(self.name)
        params.extend(where_params)
        return sql.Composed([sql.SQL(" ".join(parts) + order)]), params

    def _corpus(self, conn: Connection[Any], column_present: bool) -> tuple[float, float] | None:
        """The members' count and average length (distinct lexemes) for BM25, computed once
        per store sequence number (a scan of the members); None without the column."""
        if self.config.scoring != "bm25" or not column_present:
            return None
        # the sequence number and the statistics in one statement: one snapshot, so the cache
        # key is the state the statistics were computed at (two statements could straddle a commit)
        query = sql.SQL(
            "SELECT (SELECT value FROM meta WHERE key = 'seq'), count(*)::float8, coalesce(avg(length({})), 0)::float8 "
            "FROM records WHERE member_of @> ARRAY[%s::text]"
        ).format(sql.Identifier(self.column))
        cached = self._corpus_cache
        if cached is not None:
            row = conn.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()
            if cached[0] == (None if row is None else int(row[0])):
                return cached[1]
        got = conn.execute(query, (self.name,)).fetchone()
        seq = None if got is None or got[0] is None else int(got[0])
        corpus = (float(got[1]), float(got[2])) if got is not None else (0.0, 0.0)
        self._corpus_cache = (seq, corpus)
        return corpus

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        """The best ``k`` records for the query's text among the index's members that pass
        its ``where`` filter, its scope and ``allowed`` (one statement)."""
        k = validate_k(k)
        self._query_text(query)
        if allowed is not None and not allowed:
            return []

        def run(conn: Connection[Any]) -> list[tuple[str, float]]:
            present = self._column_present(conn)
            statement, params = self.statement(query, k, allowed, present, self._corpus(conn, present))
            return conn.execute(statement, params).fetchall()

        rows = self.store.pool.read(f"searching the pg_text index {self.name!r}", run)
        hits = [Hit(rid, float(score), raw=float(score), source=self.name) for rid, score in rows]
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def save(self, directory: Path) -> None:
        """Write only what identifies the index (its text and membership live in the store)."""
        atomic_write_json(Path(directory) / MANIFEST, {"language": self.config.language, "column": self.column, "schema": self.store.schema})

    def load(self, directory: Path) -> None:
        """Check the saved identity against the settings (CorruptError: the collection rebuilds)."""
        where = f"pg_text index {self.name!r} in {directory}"
        saved = read_json_object(Path(directory) / MANIFEST, where)
        if saved.get("language") != self.config.language:
            raise CorruptError(f"{where}: saved for language {saved.get('language')!r}, not {self.config.language!r}")
        if self.store.count(index=self.name):
            self._ensure_built()

    def stats(self) -> dict[str, Any]:
        """Size, language, scoring, matching and the generated column's name."""
        c = self.config
        return {"size": len(self), "language": c.language, "scoring": c.scoring, "match": c.match, "column": self.column}
