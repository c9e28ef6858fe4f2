"""The request and response bodies of the HTTP API (pydantic models: the OpenAPI schema).

Bodies forbid unknown fields (a typo is a 400, never silently dropped). Each verb has its
own body model, so a verb added later (``history``, ``retrieve_many``, pagination of
``get``) is one more model and one more route, without touching these.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ScopeIn",
    "LinkIn",
    "ItemIn",
    "InsertOne",
    "InsertMany",
    "UpsertBody",
    "UpdateBody",
    "GetBody",
    "DeleteBody",
    "ForgetBody",
    "CountBody",
    "SearchBody",
    "HistoryBody",
    "RetrieveManyBody",
    "LinkOut",
    "RecordOut",
    "IdOut",
    "IdsOut",
    "RecordsOut",
    "UpdatedOut",
    "DeletedOut",
    "ForgetOut",
    "CountOut",
    "ContributionOut",
    "ResultOut",
    "SearchOut",
    "VersionOut",
    "HistoryOut",
    "ResultsManyOut",
    "HealthOut",
    "InfoOut",
    "ErrorDetail",
    "ErrorOut",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeIn(_Body):
    """Who records belong to; a key bound to a scope narrows (never widens) it."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The fields that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class LinkIn(_Body):
    """A typed, weighted edge to another record."""

    target: str
    relation: str = "related"
    weight: float = 1.0


class ItemIn(_Body):
    """One memory to write: a text plus optional id, metadata, vectors, links and scope."""

    text: str
    id: str | None = None
    metadata: dict[str, Any] | None = None
    vectors: dict[str, list[float]] | None = Field(None, description="Caller-given vectors: space name -> vector.")
    links: list[str | LinkIn] | None = None
    scope: ScopeIn | None = None

    def as_item(self) -> dict[str, Any]:
        """The dict ``Memory.insert``/``upsert`` take (unset fields left out)."""
        out: dict[str, Any] = {"text": self.text}
        for name in ("id", "metadata", "vectors"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.links is not None:
            out["links"] = [link if isinstance(link, str) else link.model_dump() for link in self.links]
        if self.scope is not None and self.scope.as_dict():
            out["scope"] = self.scope.as_dict()
        return out


class InsertOne(ItemIn):
    """``Memory.insert(text, vector=, metadata=, **options)``: one item through the service."""

    vector: list[float] | None = Field(None, description="The vector of the only embedding space (or the service's space).")
    options: dict[str, Any] = Field(default_factory=dict, description="Service options (the service rejects those it does not know).")


class InsertMany(_Body):
    """``Memory.insert([...])``: many items in one write."""

    items: list[ItemIn]


class UpsertBody(_Body):
    """``Memory.upsert(items, scope=)``: insert new records, replace existing ones."""

    items: list[ItemIn]
    scope: ScopeIn | None = None


class UpdateBody(_Body):
    """``Memory.update(id, ...)``: change fields of one record."""

    id: str
    text: str | None = None
    metadata: dict[str, Any] | None = None
    merge_metadata: bool = False
    vectors: dict[str, list[float]] | None = None
    scope: ScopeIn | None = None


WHERE_DOCUMENT = 'A text filter on the record text: {"$contains": "..."}, $not_contains, $and, $or.'
MIN_SCORE = "Drop the results scoring below this (a finite number; at most k remain)."


class GetBody(_Body):
    """``Memory.get(ids, where=, scope=, limit=, offset=, where_document=)``: records by id, or a page of those matching."""

    ids: list[str] | None = None
    where: dict[str, Any] | None = None
    scope: ScopeIn | None = None
    limit: int | None = Field(None, ge=0)
    offset: int = Field(0, ge=0, description="Skip this many (insertion order; with ids, of the ids given).")
    where_document: dict[str, Any] | None = Field(None, description=WHERE_DOCUMENT)
    with_vectors: bool = Field(False, description="Return each record's stored vectors.")


class DeleteBody(_Body):
    """``Memory.delete(ids, where=, scope=, where_document=)``: at least one of the four."""

    ids: list[str] | None = None
    where: dict[str, Any] | None = None
    scope: ScopeIn | None = None
    where_document: dict[str, Any] | None = Field(None, description=WHERE_DOCUMENT)


class ForgetBody(_Body):
    """``Memory.forget(scope)``: everything of a (non-empty) scope."""

    scope: ScopeIn


class CountBody(_Body):
    """``Memory.count(where=, scope=, index=, where_document=)``."""

    where: dict[str, Any] | None = None
    scope: ScopeIn | None = None
    index: str | None = None
    where_document: dict[str, Any] | None = Field(None, description=WHERE_DOCUMENT)


class SearchBody(_Body):
    """A search: through the service (``Memory.retrieve``) or, with ``explain``, the pipeline
    (``Memory.query``: hits with their provenance and an explanation)."""

    query: str | None = None
    vector: list[float] | None = None
    k: int = Field(10, ge=1)
    where: dict[str, Any] | None = None
    scope: ScopeIn | None = None
    explain: bool = Field(False, description="Run the pipeline and return each hit's provenance and explanation (needs a query text).")
    index: str | None = Field(None, description="With explain: search this one index instead of the pipeline.")
    options: dict[str, Any] = Field(default_factory=dict, description="Service options of a retrieve.")
    where_document: dict[str, Any] | None = Field(None, description=WHERE_DOCUMENT)
    min_score: float | None = Field(None, strict=True, allow_inf_nan=False, description=MIN_SCORE)


class HistoryBody(_Body):
    """``Memory.history(id, scope=)``: every version of one record, oldest first."""

    id: str
    scope: ScopeIn | None = None


class RetrieveManyBody(_Body):
    """``Memory.retrieve_many(queries, vectors=, k=, where=, where_document=, min_score=, **options)``:
    one result list per query (query texts, vectors, or both: one vector per text), in order."""

    queries: list[str] | None = None
    vectors: list[list[float]] | None = Field(None, description="Query vectors (of the service's space), one per query.")
    k: int = Field(10, ge=1)
    where: dict[str, Any] | None = None
    where_document: dict[str, Any] | None = Field(None, description=WHERE_DOCUMENT)
    min_score: float | None = Field(None, strict=True, allow_inf_nan=False, description=MIN_SCORE)
    scope: ScopeIn | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="Service options of each retrieve.")


class LinkOut(BaseModel):
    """A stored link."""

    target: str
    relation: str
    weight: float


class RecordOut(BaseModel):
    """A stored record."""

    id: str
    text: str
    metadata: dict[str, Any]
    links: list[LinkOut]
    scope: dict[str, str]
    created_at: float
    updated_at: float
    vectors: dict[str, list[float]] | None = None


class IdOut(BaseModel):
    """The id of the record written."""

    id: str


class IdsOut(BaseModel):
    """The ids of the records written, in order."""

    ids: list[str]


class RecordsOut(BaseModel):
    """Records, in the order asked for."""

    records: list[RecordOut]


class UpdatedOut(BaseModel):
    """The record after the update."""

    record: RecordOut


class DeletedOut(BaseModel):
    """How many records went."""

    deleted: int


class ForgetOut(BaseModel):
    """What a forget removed, by kind (``records``, ``indexes``, ``state_keys``)."""

    model_config = ConfigDict(extra="allow")
    records: int


class CountOut(BaseModel):
    """A number of records."""

    count: int


class ContributionOut(BaseModel):
    """One ranked list that contributed to a hit."""

    source: str
    rank: int
    score: float


class ResultOut(BaseModel):
    """One result: ``id``, ``score``, ``text``, ``metadata`` (a service may add fields); with
    ``explain``: ``raw``, ``source``, ``provenance``, ``explanation`` and the ``record``."""

    model_config = ConfigDict(extra="allow")
    id: str
    score: float
    text: str | None = None
    metadata: dict[str, Any] | None = None
    raw: float | None = None
    source: str | None = None
    provenance: list[ContributionOut] | None = None
    explanation: str | None = None
    record: RecordOut | None = None


class SearchOut(BaseModel):
    """Results, best first."""

    results: list[ResultOut]


class ResultsManyOut(BaseModel):
    """One result list per query, in the order of the queries; each best first."""

    results: list[list[ResultOut]]


class VersionOut(BaseModel):
    """One version of a record: ``op`` is insert, update or delete (a deleted record's texts
    and metadata are erased: None), ``seq`` the store's sequence number, ``at`` seconds since the epoch."""

    id: str
    seq: int
    op: str
    text: str | None = None
    metadata: dict[str, Any] | None = None
    scope: dict[str, str] | None = None
    at: float


class HistoryOut(BaseModel):
    """The versions of one record, oldest first."""

    versions: list[VersionOut]


class HealthOut(BaseModel):
    """Liveness."""

    status: str


class InfoOut(BaseModel):
    """What the server serves: the service, the indexes, the installed plugins, the limits."""

    service: dict[str, Any]
    indexes: list[dict[str, Any]]
    plugins: list[dict[str, Any]]
    limits: dict[str, Any]
    caller: dict[str, Any]


class ErrorDetail(BaseModel):
    """What went wrong: the memcore error class (or RequestTooLarge, RequestTimeout, InternalError) and a message."""

    type: str
    message: str


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: ErrorDetail
