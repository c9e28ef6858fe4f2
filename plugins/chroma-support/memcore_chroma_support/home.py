"""Where an index's Chroma collection lives, across saves, loads and rebuilds.

Shared by memcore-chroma and memcore-poincare (plugins never import each other: it lives in
this library distribution both depend on).

A Chroma-backed index writes every change to Chroma at once; ``save``/``load`` only have
to say *which* collection holds the index. Each index instance works on its own
*generation*: a collection named ``<prefix>-<12 hex>``.

- Embedded mode: with an index folder (``IndexContext.directory``) the generation lives
  in a ``PersistentClient`` at ``<folder>/chroma`` from the first write, so a save only
  writes the sidecar. Without one (an in-memory collection, an index built by hand) it
  works in an in-memory ``EphemeralClient`` until its first ``save(directory)``, which
  copies the rows (batched) into ``<directory>/chroma``. Changes made after a save are
  already on disk: on reopen the collection is caught up from the store's log, and
  replaying an add or remove is idempotent. A save deletes the other generations of the
  folder (left by a crash before a first save, or a rebuild).
- Http mode: the generation is a collection on the Chroma server from the start; every
  process that loads the same saved index uses the same server collection. A new
  generation is written to ``<folder>/chroma/pending.json`` when it is created, so one left
  by a crash before its first save is deleted by the next save or close.

Embedded folders are checked before Chroma's native code reads them
(:mod:`.manifest`): a folder Chroma last closed cleanly must match the sizes and checksums
recorded then, a folder left open by a crash is probed (its HNSW files checked in Python,
then opened in a child process); a damaged folder is a CorruptError at ``load`` (the
index is rebuilt from the store), and a new generation never opens a damaged folder: one
that neither verifies nor is open in this process is deleted first (it holds derived data
only). A read-only instance (``read_only``: a reader process) writes nothing in the folder.

``state.json`` (written atomically, last) names the generation; a save that replaces a
generation deletes the one the previous ``state.json`` named, and ``load`` drops the
instance's own unsaved generation. :meth:`CollectionHome.close` (``Index.close``: the
collection closes, drops or replaces the index) deletes the current generation unless a
``state.json`` in the folder names it: an unsaved or dropped index leaves nothing on a
server. Nothing is pickled.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence, TypeVar, overload

from memcore.plugin import CorruptError, atomic_write_json, get_logger

from .connection import ChromaConnection, close_client, open_client
from .manifest import mark_open, probe_folder, read_manifest, seal, verify_sealed

__all__ = ["CollectionHome", "STATE_FILE", "CHROMA_DIR", "chunks"]

STATE_FILE = "state.json"
CHROMA_DIR = "chroma"
PENDING_FILE = "pending.json"
COPY_BATCH = 2048
log = get_logger("memcore.chroma")
_LIVE: dict[Path, int] = {}
"""Embedded folders this process has clients open on (instances per folder)."""

T = TypeVar("T")


@overload
def chunks(items: range, size: int) -> Iterable[range]: ...


@overload
def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]: ...


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CollectionHome:
    """The current Chroma collection of one index, and how it is saved and loaded.

    ``configuration``: the Chroma collection configuration (``{"hnsw": {...}}``);
    ``state``: extra fields written to (and checked in) ``state.json``; ``folder``: the
    index's own folder (``IndexContext.directory``), None when it has none.
    """

    def __init__(
        self,
        connection: ChromaConnection,
        prefix: str,
        configuration: Mapping[str, Any],
        state: Mapping[str, Any],
        where: str,
        folder: Path | None = None,
        read_only: bool = False,
    ):
        self.connection = connection
        self.folder = Path(folder) if folder is not None else None
        self.prefix = prefix
        self.configuration = dict(configuration)
        self.state = dict(state)
        self.where = where
        self.read_only = read_only
        self._client: Any = None
        self._token: str | None = None  # the manifest token this instance may seal (see .manifest)
        self._collection: Any = None
        self.bound: Path | None = None  # the embedded folder of the current collection
        self.saved = False  # the current generation is named by a state.json somewhere
        self._batch: int | None = None

    # -- the current collection ------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.connection.mode == "embedded" and self.folder is not None and not self.read_only:
                target = self.folder / CHROMA_DIR
                self._clear_damaged(target)
                self._bind(open_client(self.connection, target), target, writing=True)
            else:  # a server, an index without a folder, or a reader's rebuild (in memory: it writes nothing)
                self._client = open_client(self.connection, None)
        return self._client

    def _clear_damaged(self, target: Path) -> None:
        """Delete an embedded folder a new generation is about to open when it may be
        damaged: not open in this process, and not as Chroma last closed it."""
        if not target.is_dir() or _LIVE.get(target.resolve()):
            return
        manifest = read_manifest(target)
        if manifest is not None and manifest["state"] == "closed":
            try:
                verify_sealed(target, manifest, self.where)
                return
            except CorruptError:
                pass
        shutil.rmtree(target, ignore_errors=True)
        log.warning("chroma.folder_cleared", where=self.where, path=str(target), reason="not as Chroma last closed it; rebuilt from the store")

    def _bind(self, client: Any, target: Path, writing: bool) -> None:
        """Make ``client`` (embedded, on ``target``) the current one; a writer marks the folder open."""
        self._client, self.bound = client, target.resolve()
        _LIVE[self.bound] = _LIVE.get(self.bound, 0) + 1
        if writing and not self.read_only:
            self._token = mark_open(target)

    def _unbind(self) -> None:
        """Count this instance out of its folder; the last one out seals it (:func:`.manifest.seal`)."""
        bound, self.bound = self.bound, None
        if bound is None:
            return
        left = _LIVE.get(bound, 1) - 1
        if left > 0:
            _LIVE[bound] = left
            return
        _LIVE.pop(bound, None)
        if self._token is not None and bound.is_dir():
            try:
                seal(bound, self._token)
            except OSError as exc:  # a full disk: the next open probes the folder instead
                log.warning("chroma.seal_failed", where=self.where, error=str(exc))
        self._token = None

    @property
    def collection(self) -> Any:
        """The current collection (created on first use)."""
        if self._collection is None:
            self._collection = self._create(self.client)
        return self._collection

    @property
    def opened(self) -> bool:
        """True once a collection exists (an empty index need not create one to search)."""
        return self._collection is not None

    @property
    def batch_size(self) -> int:
        """Chroma's maximum batch size (asked once)."""
        if self._batch is None:
            self._batch = max(1, int(self.client.get_max_batch_size()))
        return self._batch

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Delete ``ids`` (duplicates once) from the collection in batches of :attr:`batch_size`;
        returns the distinct ids (nothing is deleted when no collection was created yet)."""
        distinct = list(dict.fromkeys(ids))
        if distinct and self.opened:
            for part in chunks(distinct, self.batch_size):
                self.collection.delete(ids=list(part))
        return distinct

    def _create(self, client: Any) -> Any:
        name = f"{self.prefix}-{uuid.uuid4().hex[:12]}"
        if self.connection.mode == "http" and self.folder is not None:
            self._write_pending([*self._read_pending(), name])  # before it exists: a crash leaves it listed
        return client.create_collection(name=name, configuration=self.configuration, embedding_function=None)

    # -- generations nobody names ----------------------------------------------------------

    def _pending_path(self) -> Path | None:
        return self.folder / CHROMA_DIR / PENDING_FILE if self.folder is not None and self.connection.mode == "http" else None

    def _read_pending(self) -> list[str]:
        path = self._pending_path()
        if path is None or not path.is_file():
            return []
        try:
            names = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    def _write_pending(self, names: list[str]) -> None:
        path = self._pending_path()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, list(dict.fromkeys(names)))

    def _delete(self, client: Any, name: str) -> None:
        try:
            client.delete_collection(name)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _named_by_folder(self) -> str | None:
        """The generation the folder's ``state.json`` names (None: no folder, no save)."""
        if self.folder is None:
            return None
        state = self._read(self.folder, missing_ok=True)
        name = state.get("collection") if state else None
        return name if isinstance(name, str) else None

    def _sweep(self, keep: str) -> None:
        """Delete this index's other generations: every other collection of its embedded
        folder with its prefix, or the pending server generations other than ``keep``."""
        if self.connection.mode == "embedded":
            if self.folder is None or self.bound != (self.folder / CHROMA_DIR).resolve():
                return
            for collection in self.client.list_collections():
                name = getattr(collection, "name", collection)
                if name != keep and name.startswith(self.prefix + "-"):
                    self._delete(self.client, name)
            return
        pending = self._read_pending()
        current = self._collection.name if self._collection is not None else None
        for name in pending:
            if name not in (keep, current):
                self._delete(self.client, name)
        self._write_pending([n for n in pending if n == current and n != keep])

    def close(self) -> None:
        """Let go of the collection: the current generation is deleted unless the folder's
        ``state.json`` names it (an unsaved or dropped index leaves nothing behind); the
        client is released."""
        if self._client is None:
            return
        named = self._named_by_folder()
        mine = self._collection.name if self._collection is not None else None
        if mine is not None and mine != named:
            if not (self.connection.mode == "embedded" and self.folder is not None and not self.folder.exists()):
                self._delete(self.client, mine)  # (a dropped embedded folder went with its files)
        if mine is not None and self.connection.mode == "http" and self.folder is not None and self.folder.exists():
            self._write_pending([n for n in self._read_pending() if n != mine])  # deleted or saved: settled
        client = self._client
        self._client, self._collection, self.saved = None, None, False
        close_client(client)
        self._unbind()

    def _drop_unsaved(self) -> None:
        if self._collection is not None and not self.saved:
            try:
                self.client.delete_collection(self._collection.name)
            except Exception:  # noqa: BLE001 - already gone: nothing to drop
                pass
        self._collection = None

    # -- persistence -----------------------------------------------------------------------

    def save(self, directory: Path, extra: Mapping[str, Any]) -> None:
        """Make ``directory`` name the current collection (copying it there in embedded mode)."""
        directory = Path(directory)
        previous = self._read(directory, missing_ok=True)
        if self.connection.mode == "embedded":
            target = directory / CHROMA_DIR
            if self.bound != target.resolve():
                self._move_to(target)
        else:
            _ = self.collection
        atomic_write_json(directory / STATE_FILE, {**self.state, **extra, "mode": self.connection.mode, "collection": self.collection.name})
        self.saved = True
        old = previous.get("collection") if previous else None
        if old and old != self.collection.name:
            self._delete(self.client, old)
        if self.folder is not None and directory.resolve() == self.folder.resolve():
            self._sweep(keep=self.collection.name)

    def _move_to(self, target: Path) -> None:
        """Copy the current collection into a new generation of the embedded folder ``target``."""
        self._clear_damaged(target)
        client = open_client(self.connection, target)
        fresh = self._create(client)
        if self._collection is not None:
            batch = min(COPY_BATCH, self.batch_size)
            offset = 0
            while True:
                rows = self._collection.get(limit=batch, offset=offset, include=["embeddings", "metadatas"])
                if not rows["ids"]:
                    break
                metas = rows["metadatas"] if any(m for m in rows["metadatas"] or []) else None
                fresh.add(ids=rows["ids"], embeddings=rows["embeddings"], metadatas=metas)
                offset += len(rows["ids"])
            self._drop_unsaved()
        self._release_only()
        self._bind(client, target, writing=True)
        self._collection = fresh
        self.saved = False

    def _release_only(self) -> None:
        """Let go of the current client (its collections stay) before switching to another."""
        if self._client is None:
            return
        client = self._client
        self._client, self._collection = None, None
        close_client(client)
        self._unbind()

    def load(self, directory: Path) -> dict[str, Any]:
        """Switch to the collection ``directory`` names; returns the saved state."""
        directory = Path(directory)
        state = self._read(directory, missing_ok=False)
        for key, value in self.state.items():
            if state.get(key) != value:
                raise CorruptError(f"{self.where}: saved {key} {state.get(key)!r} does not match {value!r}")
        if state.get("mode") != self.connection.mode:
            raise CorruptError(f"{self.where}: saved in {state.get('mode')!r} mode, configured {self.connection.mode!r}")
        name = state.get("collection")
        if not isinstance(name, str) or not name:
            raise CorruptError(f"{self.where}: {STATE_FILE} names no collection")
        if self.connection.mode == "embedded":
            target = (directory / CHROMA_DIR).resolve()
            if not target.is_dir():
                raise CorruptError(f"{self.where}: the Chroma folder {CHROMA_DIR}/ is missing")
            self._check_folder(target, name)
            client = open_client(self.connection, target)
        else:
            client, target = self.client, None
        try:
            collection = client.get_collection(name=name, embedding_function=None)
        except Exception as exc:  # noqa: BLE001 - chromadb's NotFoundError and friends
            if target is not None:
                close_client(client)
            raise CorruptError(f"{self.where}: Chroma collection {name!r} cannot be opened: {exc}") from None
        if self._collection is None or self._collection.name != name:
            self._drop_unsaved()
        if target is not None:
            verified = self._verified_token
            self._release_only()
            owner = self.folder is not None and self.folder.resolve() == directory.resolve()
            self._bind(client, target, writing=owner)
            if self._token is None:
                self._token = verified  # a reader or a dry load that found the folder closed seals it back (if nobody opened it since)
        self._client, self._collection, self.saved = client, collection, True
        return state

    _verified_token: str | None = None

    def _check_folder(self, target: Path, collection: str) -> None:
        """Before Chroma reads ``target``: verify it against its closed manifest, or probe it
        (see :mod:`.manifest`); CorruptError when it is damaged. A folder already open in this
        process is as this process left it."""
        self._verified_token = None
        if _LIVE.get(target):
            return
        manifest = read_manifest(target)
        if manifest is not None and manifest["state"] == "closed":
            verify_sealed(target, manifest, self.where)
            self._verified_token = manifest["token"]
            return
        report = probe_folder(target, collection, self.where)
        log.info("chroma.folder_probed", where=self.where, path=str(target), manifest=None if manifest is None else manifest["state"], **report)

    @overload
    def _read(self, directory: Path, missing_ok: Literal[False]) -> dict[str, Any]: ...

    @overload
    def _read(self, directory: Path, missing_ok: bool) -> dict[str, Any] | None: ...

    def _read(self, directory: Path, missing_ok: bool) -> dict[str, Any] | None:
        """The saved state of ``directory`` (None when it has none and ``missing_ok``; else CorruptError)."""
        path = directory / STATE_FILE
        if missing_ok and not path.exists():
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if missing_ok:
                return None
            raise CorruptError(f"{self.where}: cannot read {STATE_FILE}: {exc}") from None
        if not isinstance(state, dict):
            if missing_ok:
                return None
            raise CorruptError(f"{self.where}: {STATE_FILE} is not a JSON object")
        return state
