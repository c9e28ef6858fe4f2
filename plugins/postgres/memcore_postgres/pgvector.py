"""The ``pgvector`` index kind: vector search inside the postgres store's database.

The index keeps **no vectors of its own**, neither in the process nor in a table of its
own: it is a pgvector HNSW (or IVFFlat) index on the store's table of its space
(``vectors_<slot>``, an expression index on ``v::vector(dim)`` with the metric's operator
class), and the membership of its records is the store's ``records.member_of`` column,
which the collection's batches already write. So ``add`` and ``remove`` have nothing to
copy (``add`` builds the database index once, when missing); the index is current the
moment the store's batch commits, in every process.

A search is **one SQL statement** in one short transaction, sent in one round trip
(psycopg's pipeline mode): the search settings local to the transaction
(``hnsw.ef_search`` / ``ivfflat.probes`` and pgvector 0.8's iterative scan, so a
selective filter still returns ``k`` rows), then ``SELECT ... ORDER BY distance LIMIT k``
over the vectors joined to ``records`` with the membership, the query's ``where`` filter
(compiled to SQL over ``jsonb`` by the store's filter compiler) and its scope in the
``WHERE`` clause (:attr:`applies_filters`: the collection does not resolve them to ids
first). Only ids the caller passes as ``allowed`` (a text filter, a hand-made set) are sent
as a list.

With any other store the index refuses to open (:class:`ConfigError`): its point is a
stateless application server over the postgres store; with SQLite use ``exact`` / ``faiss``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np
import psycopg
from psycopg import Connection, sql

from memcore.plugin import (
    ConfigError,
    CorruptError,
    Hit,
    IndexContext,
    Query,
    Record,
    VectorIndex,
    atomic_write_json,
    read_json_object,
)

from .pgvector_config import PgvectorIndexConfig
from .schema import vector_table
from .index_store import postgres_store_of

__all__ = ["PgvectorIndex", "build_settings", "build_memory_mb"]

_OPCLASS = {"cosine": "vector_cosine_ops", "ip": "vector_ip_ops", "l2": "vector_l2_ops"}
_OPERATOR = {"cosine": "<=>", "ip": "<#>", "l2": "<->"}
_SCORE_NAME = {"cosine": "cosine similarity", "ip": "inner product", "l2": "negative squared L2 distance"}
_SCORE_RANGE: dict[str, tuple[float | None, float | None]] = {"cosine": (-1.0, 1.0), "ip": (None, None), "l2": (None, 0.0)}
MANIFEST = "pgvector.json"
AUTO_BUILD_MEMORY_MAX_MB = 4096
"""The most ``maintenance_work_mem`` a build takes on its own (``build_memory_mb = 0``): the
graph of about 1.4 M vectors of 384 dimensions at m = 16; set ``build_memory_mb`` for more."""


def build_memory_mb(config: PgvectorIndexConfig, dim: int, rows: int) -> int:
    """``maintenance_work_mem`` (MB) for building the database index over ``rows`` vectors:
    ``config.build_memory_mb`` when set, else room for pgvector to hold the whole HNSW graph
    in memory while it builds, at least 64 MB and at most :data:`AUTO_BUILD_MEMORY_MAX_MB`.
    When the graph does not fit, pgvector goes on inserting into the index on disk, many
    times slower, and says so in a NOTICE ("hnsw graph no longer fits into
    maintenance_work_mem after N tuples").

    Per vector: the vector (``4 dim + 8`` bytes), its bottom-layer neighbour list (``2 m``
    entries of 16 bytes) and 256 bytes for the element and the upper layers, plus 25%.
    Measured: at dim 384 and m 16 a serial build filled 16 MB after 7,454 vectors (2,251
    bytes each; the estimate is 2,312 before the 25%). IVFFlat keeps only its lists' centres: 64 MB."""
    if config.build_memory_mb:
        return int(config.build_memory_mb)
    if config.method != "hnsw":
        return 64
    per_vector = 4 * dim + 8 + 32 * config.m + 256
    return max(64, min(AUTO_BUILD_MEMORY_MAX_MB, math.ceil(1.25 * rows * per_vector / 2**20)))


def build_settings(config: PgvectorIndexConfig, dim: int, rows: int) -> list[tuple[str, str]]:
    """The settings (``name``, ``value``) a build of the database index over ``rows`` vectors
    runs with, local to its transaction: :func:`build_memory_mb`. The bench gives raw
    psycopg the same, so their build times compare."""
    return [("maintenance_work_mem", f"{build_memory_mb(config, dim, rows)}MB")]


class PgvectorIndex(VectorIndex):
    """A pgvector index over the postgres store's vectors of ``config.space`` (see the module docstring)."""

    applies_filters = True
    reads_store = True
    format_version = 1

    def __init__(self, config: PgvectorIndexConfig, context: IndexContext):
        super().__init__(config, context)
        store = postgres_store_of(context, "pgvector", "the vectors", "the exact or faiss index kinds")
        if config.method == "ivfflat" and config.iterative_scan == "strict_order":
            raise ConfigError("pgvector's ivfflat knows only iterative_scan = 'relaxed_order' or 'off'", location=f"indexes.{self.name}.iterative_scan")
        self.config: PgvectorIndexConfig = config
        self.store = store
        self.read_only = context.read_only or store.read_only
        self.score_name = _SCORE_NAME[config.metric]
        self.score_range = _SCORE_RANGE[config.metric]
        # pgvector's cosine distance is computed exactly on the stored vectors: the relevance
        # stage takes the hits' scores instead of reading the vectors back
        self.cosine_space = config.space if config.metric == "cosine" else None
        self._slot: int | None = None
        self._built = False
        self._settings = self._search_settings()

    # -- the database index ------------------------------------------------------------------

    @property
    def db_index_name(self) -> str:
        """The name of the pgvector index on the space's table (one per slot, method, metric and build parameters)."""
        c = self.config
        params = f"{self.dim}|{c.method}|{c.metric}|{c.m}|{c.ef_construction}|{c.lists}"
        return f"pgv_{self._slot}_{c.method}_{c.metric}_{hashlib.sha1(params.encode()).hexdigest()[:8]}"

    def _space_slot(self, conn: Connection[Any]) -> int | None:
        if self._slot is None:
            self._slot = self.store._spaces.slots(conn).get(self.config.space)
        return self._slot

    def _ensure_built(self) -> None:
        """Build the database index when the space's table exists and the index does not yet
        (once per instance; serialised between processes by an advisory lock)."""
        if self._built or self.read_only:
            return

        def build(conn: Connection[Any]) -> bool:
            slot = self._space_slot(conn)
            if slot is None:
                return False  # no vector written yet: nothing to index
            name = self.db_index_name
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memcore:{self.store.schema}:{name}",))
            if conn.execute("SELECT to_regclass(%s)", (f'"{self.store.schema}".{name}',)).fetchone() not in (None, (None,)):
                return True
            c = self.config
            options = sql.SQL("m = {}, ef_construction = {}").format(sql.Literal(c.m), sql.Literal(c.ef_construction))
            if c.method == "ivfflat":
                options = sql.SQL("lists = {}").format(sql.Literal(c.lists))
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(vector_table(slot))).fetchone()
            for setting, value in build_settings(c, self.dim, int(row[0]) if row else 0):
                conn.execute("SELECT set_config(%s, %s, true)", (setting, value))  # SET LOCAL: this build only
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING {} ((v::vector({})) {}) WITH ({})").format(
                    sql.Identifier(name), vector_table(slot), sql.SQL(c.method), sql.Literal(self.dim), sql.SQL(_OPCLASS[c.metric]), options
                )
            )
            # fresh statistics, so the planner sees how many records are members (a bulk load
            # leaves none until autovacuum runs)
            conn.execute("ANALYZE records")
            conn.execute(sql.SQL("ANALYZE {}").format(vector_table(slot)))
            return True

        self._built = bool(self.store.pool.write(f"building the pgvector index of {self.name!r}", build))

    def _search_settings(self) -> list[tuple[str, str]]:
        """The search settings of every search, ``(name, value)`` (numbers and names from the checked config only)."""
        c = self.config
        if c.method == "hnsw":
            return [("hnsw.ef_search", str(int(c.ef_search))), ("hnsw.iterative_scan", c.iterative_scan), ("hnsw.max_scan_tuples", str(int(c.max_scan_tuples)))]
        return [("ivfflat.probes", str(int(c.probes))), ("ivfflat.iterative_scan", c.iterative_scan)]

    def _settings_list(self, allowed: AbstractSet[str] | None) -> list[tuple[str, str]]:
        """The search settings, with the planner kept on the vector index unless an id list
        (whose size the planner sees) restricts the search."""
        if self.config.force_index and allowed is None:
            return [*self._settings, ("enable_sort", "off")]
        return self._settings

    def _settings_statement(self, allowed: AbstractSet[str] | None) -> str:
        """One ``SELECT set_config(name, value, true), ...`` of the search settings (local to
        the search's transaction, like ``SET LOCAL``; fixed names, values from the checked config)."""
        return "SELECT " + ", ".join(f"set_config('{name}', '{value}', true)" for name, value in self._settings_list(allowed))

    def _settings_for(self, allowed: AbstractSet[str] | None) -> str:
        """The transaction start and search settings as one multi-statement text (``EXPLAIN``-ing a search by hand)."""
        return "BEGIN READ ONLY; " + self._settings_statement(allowed)

    # -- Index -------------------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        """Nothing to copy: the collection's batch wrote the vectors and the membership to the
        store. Builds the database index the first time there are vectors to index."""
        if records:
            self._ensure_built()

    def remove(self, ids: Sequence[str]) -> None:
        """Nothing to do: the store's batch took the ids out of ``member_of`` (or deleted them)."""

    def __len__(self) -> int:
        return self.store.count(index=self.name)

    def statement(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None, slot: int) -> tuple[sql.Composed, list[Any]]:
        """The one SQL statement of a search and its parameters (``EXPLAIN`` it to see the plan)."""
        scope = query.scope if query.scope is not None and not query.scope.is_empty() else None
        condition, where_params = self.store.where_sql(query.parsed_where(), scope, self.name, alias="r")
        params: list[Any] = [vector]
        params.extend(where_params)
        if allowed is not None:
            condition += " AND r.id = ANY(%s)"
            params.append(list(allowed))
        distance = f"(v.v::vector({self.dim})) {_OPERATOR[self.config.metric]} %s::vector"
        # composed, not formatted: the compiled filter holds braces (``#>> '{}'``)
        statement = sql.Composed(
            [
                sql.SQL(f"SELECT r.id, {distance} FROM "),
                vector_table(slot),
                sql.SQL(f" v JOIN records r ON r.n = v.n WHERE {condition} ORDER BY 2 LIMIT {int(k)}"),
            ]
        )
        return statement, params

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        if allowed is not None and not allowed:
            return []

        def run(conn: Connection[Any]) -> list[tuple[str, float]]:
            slot = self._space_slot(conn)
            if slot is None:
                return []
            statement, params = self.statement(query, vector, k, allowed, slot)
            # one round trip: the transaction, its settings, the search and the commit are
            # sent together (pipeline mode) and read back at once
            try:
                with conn.pipeline():
                    conn.execute("BEGIN READ ONLY")
                    conn.execute(self._settings_statement(allowed))
                    cursor = conn.execute(statement, params)
                    conn.execute("COMMIT")
                rows: list[tuple[str, float]] = cursor.fetchall()
            except BaseException:
                if not conn.broken and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
                raise
            return rows

        rows = self.store.pool.read(f"searching the pgvector index {self.name!r}", run)
        hits = [Hit(rid, self._score(d), raw=float(d) if d is not None and math.isfinite(d) else 0.0, source=self.name) for rid, d in rows]
        hits.sort(key=lambda h: (-h.score, h.id))  # relaxed_order may return rows slightly out of order
        return hits

    def _score(self, distance: float | None) -> float:
        metric = self.config.metric
        if distance is None or not math.isfinite(distance):  # a zero vector (cosine): as the exact index, similarity 0
            return 0.0
        if metric == "cosine":
            return min(1.0, max(-1.0, 1.0 - distance))
        if metric == "ip":
            return -distance
        return -(distance * distance)

    def save(self, directory: Path) -> None:
        """Write only what identifies the index (its vectors and membership live in the store)."""
        c = self.config
        atomic_write_json(Path(directory) / MANIFEST, {"space": c.space, "dim": self.dim, "metric": c.metric, "method": c.method, "schema": self.store.schema})

    def load(self, directory: Path) -> None:
        """Check the saved identity against the settings (CorruptError: the collection rebuilds)."""
        where = f"pgvector index {self.name!r} in {directory}"
        saved = read_json_object(Path(directory) / MANIFEST, where)
        c = self.config
        if (saved.get("space"), saved.get("dim"), saved.get("metric")) != (c.space, self.dim, c.metric):
            raise CorruptError(
                f"{where}: saved for space {saved.get('space')!r} ({saved.get('dim')}-d, {saved.get('metric')}), not {c.space!r} ({self.dim}-d, {c.metric})"
            )
        try:
            self._ensure_built()
        except psycopg.Error as exc:  # pragma: no cover - the pool translates these
            raise CorruptError(f"{where}: {exc}") from None

    def stats(self) -> dict[str, Any]:
        c = self.config
        return {"size": len(self), "dim": self.dim, "metric": c.metric, "method": c.method, "space": c.space, "db_index": self.db_index_name}
