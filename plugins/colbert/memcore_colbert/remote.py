"""``colbert_remote``: a memcore index whose passages live on a ``memcore colbert serve`` server.

Records go to the server as ``pid\\ttext`` lines (pid = record id) with their metadata;
the first add creates the index with ``config``. ``allowed`` id sets are sent with the
query (``POST /api/search`` with ``pids``). ``save`` writes a small JSON reference
(server URL, index name, passage count); ``load`` checks the server still holds that index
with that many passages, else raises CorruptError so memcore rebuilds it from the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

from memcore.plugin import (
    CorruptError,
    Hit,
    IndexContext,
    NotFoundError,
    Query,
    Record,
    Requirements,
    ValidationError,
    atomic_write_json,
    read_json_object,
    validate_k,
)

from .client import ColbertClient
from .text_index import ColbertTextIndex
from .config import ColbertRemoteConfig
from .names import check_index_name

__all__ = ["ColbertRemoteIndex"]

STATE_FILE = "remote.json"


class ColbertRemoteIndex(ColbertTextIndex):
    """The ``colbert`` index behind the HTTP API (scores: MaxSim / query tokens, as in process)."""

    label = "colbert_remote"
    score_name = "MaxSim / query tokens"
    score_range = (-1.0, 1.0)
    requires = Requirements(text=True)

    def __init__(self, config: ColbertRemoteConfig, context: IndexContext):
        super().__init__(config, context)
        self.config = config
        self.index_name = check_index_name(config.index_name)
        key = config.api_key.get_secret_value() if config.api_key is not None else None
        self.client = ColbertClient(config.url, config.timeout, api_key=key, api_key_env=config.api_key_env)

    def _exists(self) -> bool:
        try:
            self.client.info(self.index_name)
            return True
        except NotFoundError:
            return False

    def __len__(self) -> int:
        try:
            return int(self.client.info(self.index_name)["passages"])
        except NotFoundError:
            return 0

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self.validate(records)
        latest = {r.id: r for r in records}
        items = list(latest.values())
        exists = self._exists()
        for start in range(0, len(items), self.config.batch_size):
            batch = items[start : start + self.config.batch_size]
            passages = [(r.id, r.text) for r in batch]
            metadata = {r.id: dict(r.metadata or {}) for r in batch}
            if exists:
                self.client.add_to_index(self.index_name, passages, metadata)
            else:
                self.client.create_index(self.index_name, passages, metadata, self.config.config)
                exists = True

    def remove(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        try:
            self.client.delete_passages(self.index_name, ids)
        except NotFoundError:
            pass

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        k = validate_k(k)
        self.validate_query(query)
        if allowed is not None and not allowed:
            return []
        mode = self._mode(query)
        try:
            topk = self.client.search(
                self.index_name, self._text(query), k, sorted(allowed) if allowed is not None else None, exhaustive=bool(mode and mode.exhaustive)
            )
        except NotFoundError:
            return []
        return [Hit(str(t["pid"]), float(t["score_normalized"]), float(t["score"]), self.name) for t in topk]

    def save(self, directory: Path) -> None:
        atomic_write_json(Path(directory) / STATE_FILE, {"url": self.config.url, "index_name": self.index_name, "passages": len(self)})

    def load(self, directory: Path) -> None:
        where = f"colbert_remote index {self.name!r} in {directory}"
        state = read_json_object(Path(directory) / STATE_FILE, where)
        try:
            name, count = check_index_name(state["index_name"]), int(state["passages"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise CorruptError(f"{where}: malformed {STATE_FILE}: {exc}") from None
        self.index_name = name
        held = len(self)
        if held != count:
            raise CorruptError(f"{where}: the server holds {held} passages of {name!r}, {count} were saved")

    def stats(self) -> dict[str, Any]:
        try:
            info = self.client.info(self.index_name)
        except NotFoundError:
            info = {"passages": 0}
        return {
            "size": info.get("passages", 0),
            "url": self.config.url,
            "index_name": self.index_name,
            **{k: info[k] for k in ("compressed", "nbits", "centroids", "stored_bytes", "fp32_bytes") if k in info},
        }
