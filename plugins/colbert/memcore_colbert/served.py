"""The server side: named indexes under one root directory, with passage texts and metadata.

Each index is a directory ``{root}/{index_name}/`` holding the engine files of
:mod:`.storage` plus ``collection.json`` (pid -> text) and ``hirag_metadata.json`` (pid ->
the caller's metadata, the sidecar of the integration design). A change is saved into a
fresh temporary directory that then replaces the index directory (two renames; a crash in
between leaves ``.old-<name>`` which the next start puts back), so a reader never sees a
half-written index.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from memcore.plugin import ConfigError, CorruptError, Embedder, NotFoundError, ValidationError, atomic_write_json, build_embedder, get_logger

from . import storage
from .config import ColbertIndexConfig, ColbertQueryMode, resolve_params
from .encoder import TokenEncoder
from .engine import Engine
from .names import check_index_name, check_pid, check_unicode
from .policy import request_options
from .rwlock import RWLock

__all__ = ["IndexRoot", "ServedIndex", "parse_tsv", "ConflictError"]

log = get_logger("memcore.colbert")

TEXTS_FILE = "collection.json"
METADATA_SIDECAR = "hirag_metadata.json"


class ConflictError(ValidationError):
    """The index already exists (create without overwrite)."""


def parse_tsv(data: object, max_passages: int) -> list[tuple[str, str]]:
    """``pid\\ttext`` lines -> [(pid, text)]; blank lines skipped; ValidationError naming the line."""
    if not isinstance(data, str):
        raise ValidationError("collection_tsv_data must be a string of 'pid<TAB>text' lines")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    valid = _is_unicode(data)
    for number, line in enumerate(data.split("\n"), start=1):
        if not valid:
            check_unicode(line, f"collection_tsv_data line {number}")
        line = line.rstrip("\r")
        if not line.strip():
            continue
        pid, tab, text = line.partition("\t")
        if not tab:
            raise ValidationError(f"collection_tsv_data line {number}: no tab between passage id and text")
        check_pid(pid, f"collection_tsv_data line {number}")
        if pid in seen:
            raise ValidationError(f"collection_tsv_data line {number}: passage id {pid!r} appears twice")
        seen.add(pid)
        out.append((pid, text))
        if len(out) > max_passages:
            raise ValidationError(f"collection_tsv_data holds more than {max_passages} passages; send them in several add-to-index requests")
    if not out:
        raise ValidationError("collection_tsv_data holds no passages")
    return out


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def check_metadata(metadata: object, pids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per-pid metadata: a dict of JSON objects whose keys are among ``pids``."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata must be an object: passage id -> object")
    known = set(pids)
    out = {}
    for pid, value in metadata.items():
        if pid not in known:
            raise ValidationError(f"metadata for passage {pid!r}, which is not in collection_tsv_data")
        if not isinstance(value, Mapping):
            raise ValidationError(f"metadata of passage {pid!r} must be an object")
        check_unicode(json.dumps(value, ensure_ascii=False), f"metadata of passage {pid!r}")
        out[pid] = dict(value)
    return out


class ServedIndex:
    """One named index: engine + encoder + texts + metadata."""

    def __init__(self, name: str, config: ColbertIndexConfig, embedder: Embedder | None = None):
        """``embedder``: the token embedder built from ``config.embedder`` when the caller shares one."""
        self.name = name
        self.config = config
        self.encoder = TokenEncoder(config.embedder, config.doc_maxlen, config.query_maxlen, f"config.embedder of index {name!r}", embedder)
        self.engine = Engine(config, self.encoder.dim, name)
        self.texts: dict[str, str] = {}
        self.metadata: dict[str, dict[str, Any]] = {}

    def add(self, passages: Sequence[tuple[str, str]], metadata: Mapping[str, dict[str, Any]], tokens: Sequence[np.ndarray] | None = None) -> None:
        """Add (or replace) passages; ``tokens``: their token matrices when already encoded."""
        pids = [p for p, _ in passages]
        if tokens is None:
            tokens = self.encoder.documents([t for _, t in passages])
        self.engine.add(pids, tokens)
        for pid, text in passages:
            self.texts[pid] = text
            self.metadata.pop(pid, None)
        self.metadata.update(metadata)

    def delete(self, pids: Sequence[str]) -> int:
        gone = self.engine.delete(list(pids))
        for pid in pids:
            self.texts.pop(pid, None)
            self.metadata.pop(pid, None)
        return gone

    def search(self, query: str, k: int, mode: ColbertQueryMode | None = None, pids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        check_unicode(query, "query")
        if len(self.engine) == 0:
            return []
        q = self.encoder.queries([query])[0]
        mask = self.engine.allowed_mask(pids) if pids is not None else None
        slots, scores = self.engine.search(q, k, resolve_params(self.config, k, mode), mask)
        out = []
        for rank, (slot, score) in enumerate(zip(slots.tolist(), scores.tolist()), start=1):
            pid = self.engine.pids[slot]
            meta = self.metadata.get(pid, {})
            out.append(
                {
                    "pid": pid,
                    "score": float(score),
                    "score_normalized": float(score) / len(q),
                    "rank": rank,
                    "text": self.texts.get(pid, ""),
                    "metadata": meta,
                    "hirag_metadata": meta,
                }
            )
        return out

    def info(self) -> dict[str, Any]:
        e = self.engine
        return {
            "index_name": self.name,
            "passages": len(e),
            "compressed": e.compressed,
            "nbits": self.config.nbits,
            "centroids": 0 if e.centroids is None else int(len(e.centroids)),
            "embedder": self.encoder.model_id,
            "config": self.config.model_dump(mode="json"),
            **e.nbytes(),
        }

    def save(self, directory: Path) -> None:
        storage.save_engine(self.engine, directory, self.encoder.model_id)
        atomic_write_json(directory / TEXTS_FILE, self.texts)
        atomic_write_json(directory / METADATA_SIDECAR, self.metadata)

    @classmethod
    def open(cls, name: str, directory: Path, embedders: Callable[[Mapping[str, Any]], Embedder] | None = None) -> "ServedIndex":
        """The index saved in ``directory``; ``embedders``: the shared embedder of a spec."""
        where = f"colbert index {name!r} in {directory}"
        try:
            plan = json.loads((directory / storage.PLAN_FILE).read_text(encoding="utf-8"))
            # indexes of formats 1-2 predate the residual transform: they were built without one
            config = ColbertIndexConfig.model_validate({"residual_transform": "none", **plan["config"]})
            texts = json.loads((directory / TEXTS_FILE).read_text(encoding="utf-8"))
            metadata = json.loads((directory / METADATA_SIDECAR).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptError(f"{where}: {exc}") from None
        served = cls(name, config, embedders(config.embedder) if embedders is not None else None)
        storage.load_engine(served.engine, directory, served.encoder.model_id)
        if not isinstance(texts, dict) or set(texts) != set(served.engine.slot_of) or not isinstance(metadata, dict):
            raise CorruptError(f"{where}: {TEXTS_FILE} does not hold the passages of the index")
        served.texts, served.metadata = texts, metadata
        return served


class IndexRoot:
    """All indexes under ``root``.

    Locking: each index has a :class:`.rwlock.RWLock`. Searches (and info) hold it shared,
    so concurrent searches of an index run in parallel; add, delete, create-over and drop
    hold it exclusively. Passage texts are encoded before the exclusive section, so
    searches keep running while an add encodes. A short root lock guards the table of
    open indexes and their locks.
    """

    def __init__(self, root: Path, defaults: Mapping[str, Any] | None = None, max_passages: int = 100_000):
        """``defaults``: the server's own index settings (its embedder among them), which a
        request's ``config`` may override only within :mod:`.policy`; ConfigError if invalid."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.defaults = dict(defaults or {})
        self.defaults.pop("checkpoint", None)
        self.defaults.pop("kind", None)
        try:
            server_config = ColbertIndexConfig.model_validate({**self.defaults, "kind": "colbert"})
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", location="colbert serve --config") from None
        self.embedder_spec: dict[str, Any] = dict(server_config.embedder)
        self.defaults["embedder"] = self.embedder_spec
        self.max_passages = max_passages
        self._guard = threading.Lock()
        self._build = threading.Lock()
        self._locks: dict[str, RWLock] = {}
        self._open: dict[str, ServedIndex] = {}
        self._embedders: dict[str, Embedder] = {}
        # a bad --embedder (unknown, or without token vectors) fails at start, not at the first request
        TokenEncoder(self.embedder_spec, 1, 1, "the server's embedder", self.embedder_for(self.embedder_spec))
        self._recover()

    def embedder_for(self, spec: Mapping[str, Any]) -> Embedder:
        """The one token embedder of ``spec`` in this server, built on first use and shared by
        every index using it (a model is loaded once, not once per index)."""
        key = json.dumps(dict(spec), sort_keys=True, default=str)
        with self._build:
            embedder = self._embedders.get(key)
            if embedder is None:
                embedder = self._embedders[key] = build_embedder(dict(spec), location="the server's embedder")
            return embedder

    def _recover(self) -> None:
        for old in self.root.glob(".old-*"):
            name = old.name[len(".old-") :]
            target = self.root / name
            if not target.exists():
                old.rename(target)
            else:
                shutil.rmtree(old, ignore_errors=True)
        for tmp in self.root.glob(".tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)

    def _dir(self, name: str) -> Path:
        return self.root / check_index_name(name)

    def lock_of(self, name: str) -> RWLock:
        """The readers-writer lock of index ``name`` (created on first use)."""
        check_index_name(name)
        with self._guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = RWLock()
            return lock

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / storage.PLAN_FILE).is_file())

    def exists(self, name: str) -> bool:
        return (self._dir(name) / storage.PLAN_FILE).is_file()

    def _get(self, name: str) -> ServedIndex:
        """The open index (opened from disk on first use); the caller holds its lock."""
        directory = self._dir(name)
        with self._guard:
            served = self._open.get(name)
        if served is not None:
            return served
        if not (directory / storage.PLAN_FILE).is_file():
            raise NotFoundError(f"no index named {name!r}")
        opened = ServedIndex.open(name, directory, self.embedder_for)
        with self._guard:  # two readers may open it at once: the first one wins
            return self._open.setdefault(name, opened)

    def get(self, name: str) -> ServedIndex:
        """The index ``name``; NotFoundError if there is none."""
        with self.lock_of(name).read():
            return self._get(name)

    def _persist(self, served: ServedIndex) -> None:
        target = self._dir(served.name)
        tmp = self.root / f".tmp-{served.name}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            served.save(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        old = self.root / f".old-{served.name}"
        if target.exists():
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    def config_for(self, options: Mapping[str, Any] | None) -> ColbertIndexConfig:
        """The settings of a new index: the server's, with what a request may choose (:mod:`.policy`)."""
        merged = {**self.defaults, **request_options(options, self.embedder_spec)}
        try:
            return ColbertIndexConfig.model_validate({**merged, "kind": "colbert"})
        except PydanticValidationError as exc:  # the first problem, as a memcore error
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValidationError(f"config.{where}: {first['msg']}") from None

    def create(self, name: str, tsv: str, metadata: Any, options: Mapping[str, Any] | None, overwrite: bool) -> ServedIndex:
        check_index_name(name)
        passages = parse_tsv(tsv, self.max_passages)
        meta = check_metadata(metadata, [p for p, _ in passages])
        config = self.config_for(options)
        if self.exists(name) and not overwrite:  # fail before encoding; checked again below
            raise ConflictError(f"index {name!r} already exists (add-to-index adds passages; overwrite=true replaces it)")
        served = ServedIndex(name, config, self.embedder_for(config.embedder))
        tokens = served.encoder.documents([t for _, t in passages])  # outside any lock
        with self.lock_of(name).write():
            if self.exists(name) and not overwrite:
                raise ConflictError(f"index {name!r} already exists (add-to-index adds passages; overwrite=true replaces it)")
            served.add(passages, meta, tokens)
            self._persist(served)
            with self._guard:
                self._open[name] = served
            log.info("colbert.index_created", name=name, passages=len(passages))
            return served

    def add(self, name: str, tsv: str, metadata: Any) -> ServedIndex:
        passages = parse_tsv(tsv, self.max_passages)
        meta = check_metadata(metadata, [p for p, _ in passages])
        texts = [t for _, t in passages]
        encoded_by = self.get(name)
        tokens = encoded_by.encoder.documents(texts)  # searches go on meanwhile
        with self.lock_of(name).write():
            served = self._get(name)
            if served is not encoded_by:  # re-created or reopened meanwhile: its encoder may differ
                tokens = served.encoder.documents(texts)
            served.add(passages, meta, tokens)
            self._persist(served)
            return served

    def delete_passages(self, name: str, pids: Sequence[str]) -> int:
        if not isinstance(pids, list):
            raise ValidationError("pids must be a list of passage ids")
        for pid in pids:
            check_pid(pid, "pids")
        with self.lock_of(name).write():
            served = self._get(name)
            gone = served.delete(pids)
            if gone:
                self._persist(served)
            return gone

    def drop(self, name: str) -> None:
        directory = self._dir(name)
        with self.lock_of(name).write():
            if not self.exists(name):
                raise NotFoundError(f"no index named {name!r}")
            with self._guard:
                self._open.pop(name, None)
            trash = self.root / f".tmp-drop-{name}-{uuid.uuid4().hex[:8]}"
            directory.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)

    def search(self, name: str, query: str, k: int, mode: ColbertQueryMode | None = None, pids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The best ``k`` passages; runs alongside other searches of the index (shared lock)."""
        with self.lock_of(name).read():
            return self._get(name).search(query, k, mode, pids)

    def info(self, name: str) -> dict[str, Any]:
        """Size and settings of index ``name``."""
        with self.lock_of(name).read():
            return self._get(name).info()
