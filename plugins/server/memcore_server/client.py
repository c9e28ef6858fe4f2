"""The Python client of ``memcore serve``: :class:`RemoteMemory` and :class:`AsyncRemoteMemory`.

Both have the methods, arguments, return types and errors of :class:`memcore.Memory`
(``insert``, ``get``, ``update``, ``upsert``, ``delete``, ``forget``, ``count``,
``history``, ``retrieve``, ``retrieve_many``, ``query``, ``close``, ``len()``, the ``with`` block), so code written against a
local memory runs against a server by changing how it is opened. The server's error body
names the memcore exception, which the client raises again (a record of another tenant is a
:class:`memcore.NotFoundError`, as it is in process).

Transport (this module imports neither FastAPI nor uvicorn): :class:`RemoteMemory` on
keep-alive HTTP/1.1 connections of its own (:mod:`.http11`: plain sockets and a strict
reply parser, about 0.6x the CPU per request of ``http.client``, which took a third of
httpx's), :class:`AsyncRemoteMemory` on httpx:

- a refused connection is retried for every call (nothing reached the server); timeouts,
  dropped connections and HTTP 502/503/504 are retried only for idempotent calls (``get``,
  ``count``, ``history``, ``retrieve``, ``retrieve_many``, ``query``, ``upsert``, ``update``,
  ``info``, ``health``), with
  exponential backoff; ``insert``, ``delete`` and ``forget`` are sent once;
- when the retries are used up, a connection failure is a
  :class:`memcore.StoreUnavailableError` (the memory cannot be reached) and an HTTP failure
  without a memcore error in its body a :class:`memcore.EndpointError` carrying the status.

Each verb is built once (:class:`_Call`: method, path, body, whether it is idempotent, how
to read the reply) and sent by the sync or the async transport.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pydantic_core import to_json

from memcore import Contribution, Hit, Link, Record, Scope, StoreUnavailableError, ValidationError

from .http11 import ConnectError, ConnectionPool, Reply, TransportError
from .wire import error_from_body

if TYPE_CHECKING:
    import httpx

__all__ = ["RemoteMemory", "AsyncRemoteMemory", "record_from_dict"]

ScopeLike = Scope | Mapping[str, Any] | None
RETRY_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses an idempotent call is retried on."""

_JSON_LEAVES = (str, int, float, type(None))
"""The values JSON has besides objects and arrays (``bool`` is an ``int``)."""
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
"""The exact types of :data:`_JSON_LEAVES` (checked by ``type``: a set look-up, not an ``isinstance`` call)."""


def _plain(value: Any) -> Any:
    """``value`` made JSON-ready (numpy arrays and numbers to lists and floats)."""
    kind = type(value)
    if kind in _LEAF_TYPES:  # the common cases first, by exact type (cheap)
        return value
    if kind is dict:
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_NUMERIC_KINDS = frozenset("biuf")
"""numpy dtype kinds whose ``tolist()`` holds only JSON numbers and booleans."""


def _ready(value: Any) -> Any:
    """``value`` as :func:`_plain` makes it, checked in the same pass: ``TypeError`` as
    ``json.dumps`` would raise for what JSON cannot hold (``pydantic_core`` would write some
    of it, e.g. a datetime, as a string: the client sends what ``json`` sends). A numeric
    numpy array's ``tolist()`` and a list of leaves are taken without a Python loop."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    if kind is dict:
        return {str(k): _ready(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        if _LEAF_TYPES.issuperset(map(type, value)):  # a vector: every item a leaf, checked in C
            return list(value)
        return [_ready(v) for v in value]
    if hasattr(value, "tolist"):
        items = value.tolist()
        dtype = getattr(value, "dtype", None)
        return items if getattr(dtype, "kind", None) in _NUMERIC_KINDS else _ready(items)
    if isinstance(value, Mapping):
        return {str(k): _ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_ready(v) for v in value]
    if isinstance(value, _JSON_LEAVES):  # a subclass of str, int or float
        return value
    raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")


def _json(body: Any) -> bytes:
    """A request body as compact JSON bytes: what ``json.dumps`` accepts, as it reads it
    (non-ASCII as UTF-8, NaN and infinities as its constants), written by ``pydantic_core``
    (a tenth of ``json``'s CPU for a vector of floats: on one machine the client's CPU is
    taken from the server's)."""
    try:
        return to_json(_ready(body), inf_nan_mode="constants")
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"cannot send this value to the server as JSON: {exc}") from None


def _scope(scope: ScopeLike) -> dict[str, str] | None:
    coerced = Scope.coerce(scope)
    return coerced.as_dict() or None if coerced is not None else None


def _item(item: Any) -> dict[str, Any]:
    """One item of a batch as the server takes it (a text, a dict or a :class:`Record`)."""
    if isinstance(item, str):
        return {"text": item}
    if isinstance(item, Record):
        out: dict[str, Any] = {"text": item.text, "id": item.id, "metadata": item.metadata}
        if item.vectors:
            out["vectors"] = {k: _plain(v) for k, v in item.vectors.items()}
        if item.links:
            out["links"] = [link.as_dict() for link in item.links]
        if item.scope is not None and not item.scope.is_empty():
            out["scope"] = item.scope.as_dict()
        return out
    if isinstance(item, Mapping):
        out = dict(item)
        if isinstance(out.get("scope"), Scope):
            out["scope"] = out["scope"].as_dict()
        if out.get("links") is not None:
            out["links"] = [link.as_dict() if isinstance(link, Link) else link for link in out["links"]]
        return out
    raise ValidationError(f"cannot insert a {type(item).__name__}; give texts, dicts or Records")


def _items(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, (str, Mapping, Record)):
        return [_item(items)]
    if not isinstance(items, (list, tuple)):
        raise ValidationError(f"give a text, a dict, a Record or a list of them, not a {type(items).__name__}")
    return [_item(i) for i in items]


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """A :class:`memcore.Record` from the server's JSON (vectors as float32 arrays when sent)."""
    import numpy as np

    scope = data.get("scope") or None
    return Record(
        id=data["id"],
        text=data["text"],
        metadata=dict(data.get("metadata") or {}),
        vectors={k: np.asarray(v, dtype=np.float32) for k, v in (data.get("vectors") or {}).items()},
        links=tuple(Link(l["target"], l["relation"], float(l["weight"])) for l in data.get("links") or ()),
        scope=Scope(**scope) if scope else None,
        created_at=float(data.get("created_at", 0.0)),
        updated_at=float(data.get("updated_at", 0.0)),
    )


def _hit_from_dict(data: Mapping[str, Any]) -> Hit:
    record = data.get("record")
    return Hit(
        id=data["id"],
        score=float(data["score"]),
        raw=data.get("raw"),
        source=data.get("source") or "",
        provenance=tuple(Contribution(c["source"], int(c["rank"]), float(c["score"])) for c in data.get("provenance") or ()),
        record=record_from_dict(record) if record else None,
    )


@dataclass(frozen=True)
class _Call:
    """One request: its route, its JSON body, whether retrying it is safe, and how to read the reply."""

    method: str
    path: str
    body: Any
    idempotent: bool
    decode: Callable[[Any], Any]


class _Verbs:
    """The verbs of :class:`memcore.Memory`, each as the :class:`_Call` that performs it."""

    def _insert(self, items: Any, vector: Any, metadata: Mapping[str, Any] | None, options: dict[str, Any]) -> _Call:
        single = lambda reply: reply["id"]  # noqa: E731
        if isinstance(items, str):
            return _Call("POST", "/v1/insert", self._one(items, vector, metadata, options), False, single)
        if isinstance(items, Record):
            if vector is not None or metadata is not None or options:
                raise ValidationError("a Record carries its own id, vectors and metadata; do not pass them beside it")
            return _Call("POST", "/v1/insert_many", {"items": [_item(items)]}, False, lambda reply: reply["ids"][0])
        if isinstance(items, Mapping):
            fields = _item(items)
            if "text" not in fields:
                raise ValidationError("a record needs a 'text'")
            text = fields.pop("text")
            for key, value in (("metadata", metadata), *options.items()):
                if value is not None and key in fields:
                    raise ValidationError(f"{key!r} is given twice: inside the item and as an argument")
            item_metadata = fields.pop("metadata", None) if metadata is None else metadata
            return _Call("POST", "/v1/insert", self._one(text, vector, item_metadata, {**fields, **options}), False, single)
        if not isinstance(items, (list, tuple)):
            raise ValidationError(f"insert takes a text, a dict, a Record or a list of them, not a {type(items).__name__}")
        if vector is not None or metadata is not None or options:
            raise ValidationError("with many items, give each its own vectors/metadata/id inside its dict: insert([{'text': ..., 'metadata': ...}, ...])")
        return _Call("POST", "/v1/insert_many", {"items": [_item(i) for i in items]}, False, lambda reply: reply["ids"])

    @staticmethod
    def _one(text: Any, vector: Any, metadata: Any, options: dict[str, Any]) -> dict[str, Any]:
        """The body of ``POST /v1/insert``: the item's own fields, the service's options apart."""
        body: dict[str, Any] = {"text": text}
        if vector is not None:
            body["vector"] = vector
        if metadata is not None:
            body["metadata"] = metadata
        rest = {}
        for key, value in options.items():
            if key in ("id", "vectors", "links", "scope") and value is not None:
                body[key] = _item({"text": "", key: value})[key]
            elif key not in ("id", "vectors", "links", "scope"):
                rest[key] = value
        if rest:
            body["options"] = rest
        return body

    def _upsert(self, items: Any, scope: ScopeLike) -> _Call:
        single = isinstance(items, (str, Mapping, Record))
        body = {"items": _items(items), "scope": _scope(scope)}
        return _Call("POST", "/v1/upsert", body, True, (lambda reply: reply["ids"][0]) if single else (lambda reply: reply["ids"]))

    def _update(self, id: str, text: Any, metadata: Any, merge_metadata: bool, vectors: Any, scope: ScopeLike) -> _Call:
        body = {"id": id, "text": text, "metadata": metadata, "merge_metadata": merge_metadata, "vectors": vectors, "scope": _scope(scope)}
        return _Call("POST", "/v1/update", body, True, lambda reply: record_from_dict(reply["record"]))

    def _delete(self, ids: Any, where: Any, scope: ScopeLike, where_document: Any) -> _Call:
        if ids is None and where is None and where_document is None and scope is None:
            raise ValidationError("delete needs ids, a where filter or a scope, or a where_document filter (to empty the memory: delete(where={}))")
        wanted = [ids] if isinstance(ids, str) else (list(ids) if ids is not None else None)
        body = {"ids": wanted, "where": where, "scope": _scope(scope), "where_document": where_document}
        return _Call("POST", "/v1/delete", body, False, lambda reply: int(reply["deleted"]))

    def _forget(self, scope: ScopeLike) -> _Call:
        wanted = _scope(scope)
        if wanted is None:
            raise ValidationError("forget needs a non-empty scope, e.g. {'user_id': 'bob'}")
        return _Call("POST", "/v1/forget", {"scope": wanted}, False, dict)

    def _get(self, ids: Any, where: Any, scope: ScopeLike, limit: int | None, offset: int, where_document: Any) -> _Call:
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValidationError(f"limit must be a non-negative int, not {limit!r}")
        if type(offset) is not int or offset < 0:
            raise ValidationError(f"offset must be a non-negative int, not {offset!r}")
        one = isinstance(ids, str)
        wanted = [ids] if one else (list(ids) if ids is not None else None)
        body = {"ids": wanted, "where": where, "scope": _scope(scope), "limit": limit, "with_vectors": True, "where_document": where_document}
        if offset:
            body["offset"] = offset

        def decode(reply: Any) -> Any:
            records = [record_from_dict(r) for r in reply["records"]]
            return records[0] if one else records

        return _Call("POST", "/v1/get", body, True, decode)

    def _count(self, where: Any, scope: ScopeLike, index: str | None, where_document: Any) -> _Call:
        body = {"where": where, "scope": _scope(scope), "index": index, "where_document": where_document}
        return _Call("POST", "/v1/count", body, True, lambda reply: int(reply["count"]))

    def _history(self, id: str, scope: ScopeLike) -> _Call:
        return _Call("POST", "/v1/history", {"id": id, "scope": _scope(scope)}, True, lambda reply: list(reply["versions"]))

    def _retrieve(self, query: Any, vector: Any, where: Any, k: int, where_document: Any, min_score: Any, options: dict[str, Any]) -> _Call:
        options = dict(options)
        scope = _scope(options.pop("scope", None))
        body = {
            "query": query,
            "vector": vector,
            "where": where,
            "k": k,
            "scope": scope,
            "options": options,
            "where_document": where_document,
            "min_score": _plain(min_score),
        }
        return _Call("POST", "/v1/search", body, True, lambda reply: list(reply["results"]))

    def _retrieve_many(self, queries: Any, vectors: Any, k: int, where: Any, where_document: Any, min_score: Any, options: dict[str, Any]) -> _Call:
        if queries is not None and (isinstance(queries, str) or not isinstance(queries, (list, tuple))):
            raise ValidationError(f"queries must be a list of query texts, not {type(queries).__name__}")
        options = dict(options)
        scope = _scope(options.pop("scope", None))
        body = {
            "queries": None if queries is None else list(queries),
            "vectors": _plain(vectors),
            "k": k,
            "where": where,
            "where_document": where_document,
            "min_score": _plain(min_score),
            "scope": scope,
            "options": options,
        }
        return _Call("POST", "/v1/retrieve_many", body, True, lambda reply: [list(found) for found in reply["results"]])

    def _query(self, text: str, k: int, where: Any, index: str | None, scope: ScopeLike, where_document: Any, min_score: Any) -> _Call:
        body = {
            "query": text,
            "k": k,
            "where": where,
            "index": index,
            "scope": _scope(scope),
            "explain": True,
            "where_document": where_document,
            "min_score": _plain(min_score),
        }
        return _Call("POST", "/v1/search", body, True, lambda reply: [_hit_from_dict(h) for h in reply["results"]])


def _drop_none(body: Any) -> Any:
    return {k: v for k, v in body.items() if v is not None} if isinstance(body, dict) else body


class _Transport:
    """What both clients share: the URL, the key header, the retry policy, reading replies."""

    def __init__(self, url: str, api_key: str | None, timeout: float, retries: int, backoff_s: float):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationError(f"url must be an http(s) URL, not {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}({self.url!r})"

    def _attempts(self, call: _Call) -> int:
        return 1 + (self.retries if call.idempotent else 0)

    def _delay(self, attempt: int) -> float:
        return float(min(2.0, self.backoff_s * math.pow(2, attempt)))

    def _retryable(self, exc: Exception, call: _Call) -> bool:
        if isinstance(exc, (ConnectError, TransportError)):  # the sync client's (.http11)
            return isinstance(exc, ConnectError) or call.idempotent
        import httpx

        return isinstance(exc, httpx.ConnectError) or (call.idempotent and isinstance(exc, httpx.TransportError))

    def _unreachable(self, exc: Exception, attempts: int) -> StoreUnavailableError:
        return StoreUnavailableError(f"cannot reach the memcore server at {self.url} after {attempts} attempt(s): {type(exc).__name__}: {exc}")

    def _read(self, response: "httpx.Response | Reply", call: _Call, attempts: int) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success:
            if body is None:
                raise ValidationError(f"the server at {self.url} answered {call.path} with a body that is not JSON")
            return call.decode(body)
        raise error_from_body(response.status_code, body, f"{self.url}{call.path}", attempts)


class RemoteMemory(_Verbs, _Transport):
    """A memory served by ``memcore serve``, with :class:`memcore.Memory`'s methods.

    ``api_key`` is sent as ``Authorization: Bearer <key>`` (a key bound to a scope sees and
    writes only that scope); ``timeout`` is per request in seconds; ``retries`` how many
    times a retryable failure is retried (see the module docstring).
    """

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0, retries: int = 3, backoff_s: float = 0.1):
        super().__init__(url, api_key, timeout, retries, backoff_s)
        self._http = ConnectionPool(self.url, timeout, self._headers)

    def _send(self, call: _Call) -> Any:
        content = _json(_drop_none(call.body)) if call.body is not None else None
        attempts = self._attempts(call)
        connect_attempts = 1 + self.retries  # a refused connection reached nothing: always safe to retry
        for attempt in range(max(attempts, connect_attempts)):
            try:
                response = self._http.request(call.method, call.path, content)
            except TransportError as exc:
                if not self._retryable(exc, call) or attempt + 1 >= connect_attempts:
                    raise self._unreachable(exc, attempt + 1) from None
                time.sleep(self._delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and call.idempotent and attempt + 1 < attempts:
                time.sleep(self._delay(attempt))
                continue
            return self._read(response, call, attempt + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the verbs of memcore.Memory -------------------------------------------------------

    def insert(self, items: Any, vector: Any = None, metadata: Mapping[str, Any] | None = None, **options: Any) -> str | list[str]:
        """Remember one item (returns its id) or many (a list or tuple: their ids); see :meth:`memcore.Memory.insert`."""
        return self._send(self._insert(items, vector, metadata, options))  # type: ignore[no-any-return]

    def upsert(self, items: Any, *, scope: ScopeLike = None) -> str | list[str]:
        """Insert new records and replace existing ones; see :meth:`memcore.Memory.upsert`."""
        return self._send(self._upsert(items, scope))  # type: ignore[no-any-return]

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge_metadata: bool = False,
        vectors: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
    ) -> Record:
        """Change fields of one record; see :meth:`memcore.Memory.update`."""
        return self._send(self._update(id, text, metadata, merge_metadata, vectors, scope))  # type: ignore[no-any-return]

    def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete by ids, a where filter and/or a scope; see :meth:`memcore.Memory.delete`."""
        return self._send(self._delete(ids, where, scope, where_document))  # type: ignore[no-any-return]

    def forget(self, scope: ScopeLike) -> dict[str, Any]:
        """Forget everything of ``scope``; see :meth:`memcore.Memory.forget`."""
        return self._send(self._forget(scope))  # type: ignore[no-any-return]

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        limit: int | None = None,
        offset: int = 0,
        where_document: Mapping[str, Any] | None = None,
    ) -> Record | list[Record]:
        """One record by id, records by ids, or those matching where / scope; see :meth:`memcore.Memory.get`."""
        return self._send(self._get(ids, where, scope, limit, offset, where_document))  # type: ignore[no-any-return]

    def count(
        self, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None, index: str | None = None, where_document: Mapping[str, Any] | None = None
    ) -> int:
        """Number of records; see :meth:`memcore.Memory.count`."""
        return self._send(self._count(where, scope, index, where_document))  # type: ignore[no-any-return]

    def retrieve(
        self,
        query: str | None = None,
        vector: Any = None,
        where: Mapping[str, Any] | None = None,
        k: int = 10,
        *,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Recall through the service: ``[{"id", "text", "score", "metadata"}]``; see :meth:`memcore.Memory.retrieve`."""
        return self._send(self._retrieve(query, vector, where, k, where_document, min_score, options))  # type: ignore[no-any-return]

    def query(
        self,
        text: str,
        *,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        index: str | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """Run the pipeline (or one index): hits with provenance; see :meth:`memcore.Memory.query`."""
        return self._send(self._query(text, k, where, index, scope, where_document, min_score))  # type: ignore[no-any-return]

    def history(self, id: str, *, scope: ScopeLike = None) -> list[dict[str, Any]]:
        """Every version of one record, oldest first; see :meth:`memcore.Memory.history`."""
        return self._send(self._history(id, scope))  # type: ignore[no-any-return]

    def retrieve_many(
        self,
        queries: Sequence[str] | None = None,
        *,
        vectors: Any = None,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[list[dict[str, Any]]]:
        """One result list per query (texts, vectors or both), in order; see :meth:`memcore.Memory.retrieve_many`."""
        return self._send(self._retrieve_many(queries, vectors, k, where, where_document, min_score, options))  # type: ignore[no-any-return]

    def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` when the server is up."""
        return self._send(_Call("GET", "/v1/health", None, True, dict))  # type: ignore[no-any-return]

    def info(self) -> dict[str, Any]:
        """The served service, indexes, plugins, limits and who the key is."""
        return self._send(_Call("GET", "/v1/info", None, True, dict))  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the HTTP connections (the served memory stays open)."""
        self._http.close()

    def __enter__(self) -> "RemoteMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.count()


class AsyncRemoteMemory(_Verbs, _Transport):
    """:class:`RemoteMemory` for asyncio: the same verbs, each a coroutine (``await memory.get(id)``)."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0, retries: int = 3, backoff_s: float = 0.1):
        import httpx

        super().__init__(url, api_key, timeout, retries, backoff_s)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=self._headers)

    async def _send(self, call: _Call) -> Any:
        import httpx

        content = _json(_drop_none(call.body)) if call.body is not None else None
        attempts = self._attempts(call)
        connect_attempts = 1 + self.retries
        for attempt in range(max(attempts, connect_attempts)):
            try:
                response = await self._http.request(call.method, call.path, content=content)
            except httpx.HTTPError as exc:
                if not self._retryable(exc, call) or attempt + 1 >= connect_attempts:
                    raise self._unreachable(exc, attempt + 1) from None
                await asyncio.sleep(self._delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and call.idempotent and attempt + 1 < attempts:
                await asyncio.sleep(self._delay(attempt))
                continue
            return self._read(response, call, attempt + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    async def insert(self, items: Any, vector: Any = None, metadata: Mapping[str, Any] | None = None, **options: Any) -> str | list[str]:
        """See :meth:`RemoteMemory.insert`."""
        return await self._send(self._insert(items, vector, metadata, options))  # type: ignore[no-any-return]

    async def upsert(self, items: Any, *, scope: ScopeLike = None) -> str | list[str]:
        """See :meth:`RemoteMemory.upsert`."""
        return await self._send(self._upsert(items, scope))  # type: ignore[no-any-return]

    async def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge_metadata: bool = False,
        vectors: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
    ) -> Record:
        """See :meth:`RemoteMemory.update`."""
        return await self._send(self._update(id, text, metadata, merge_metadata, vectors, scope))  # type: ignore[no-any-return]

    async def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """See :meth:`RemoteMemory.delete`."""
        return await self._send(self._delete(ids, where, scope, where_document))  # type: ignore[no-any-return]

    async def forget(self, scope: ScopeLike) -> dict[str, Any]:
        """See :meth:`RemoteMemory.forget`."""
        return await self._send(self._forget(scope))  # type: ignore[no-any-return]

    async def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        limit: int | None = None,
        offset: int = 0,
        where_document: Mapping[str, Any] | None = None,
    ) -> Record | list[Record]:
        """See :meth:`RemoteMemory.get`."""
        return await self._send(self._get(ids, where, scope, limit, offset, where_document))  # type: ignore[no-any-return]

    async def count(
        self, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None, index: str | None = None, where_document: Mapping[str, Any] | None = None
    ) -> int:
        """See :meth:`RemoteMemory.count`."""
        return await self._send(self._count(where, scope, index, where_document))  # type: ignore[no-any-return]

    async def retrieve(
        self,
        query: str | None = None,
        vector: Any = None,
        where: Mapping[str, Any] | None = None,
        k: int = 10,
        *,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """See :meth:`RemoteMemory.retrieve`."""
        return await self._send(self._retrieve(query, vector, where, k, where_document, min_score, options))  # type: ignore[no-any-return]

    async def query(
        self,
        text: str,
        *,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        index: str | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """See :meth:`RemoteMemory.query`."""
        return await self._send(self._query(text, k, where, index, scope, where_document, min_score))  # type: ignore[no-any-return]

    async def history(self, id: str, *, scope: ScopeLike = None) -> list[dict[str, Any]]:
        """See :meth:`RemoteMemory.history`."""
        return await self._send(self._history(id, scope))  # type: ignore[no-any-return]

    async def retrieve_many(
        self,
        queries: Sequence[str] | None = None,
        *,
        vectors: Any = None,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[list[dict[str, Any]]]:
        """See :meth:`RemoteMemory.retrieve_many`."""
        return await self._send(self._retrieve_many(queries, vectors, k, where, where_document, min_score, options))  # type: ignore[no-any-return]

    async def health(self) -> dict[str, Any]:
        """See :meth:`RemoteMemory.health`."""
        return await self._send(_Call("GET", "/v1/health", None, True, dict))  # type: ignore[no-any-return]

    async def info(self) -> dict[str, Any]:
        """See :meth:`RemoteMemory.info`."""
        return await self._send(_Call("GET", "/v1/info", None, True, dict))  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncRemoteMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
