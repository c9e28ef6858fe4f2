"""One live index of a collection: its definition, persistence, catch-up and rebuild.

On disk an index owns ``<collection>/indexes/<name>/``: the files its ``save`` writes
plus ``index.json`` (kind, config, generation, format version, the store sequence number
it was saved at, a SHA-256 per file), written last. On open, an index whose ``index.json``
is missing, unreadable, mismatched (another kind, build-time option or generation: an
index of that name dropped and created again) or behind the pruned log is rebuilt from
the store; otherwise it is loaded and caught up from the store's operation log.
"""

from __future__ import annotations

import hashlib
import secrets
import zlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import CorruptError
from .._util.atomic import atomic_write_json, storage_full_errors
from .._util.dirlock import directory_lock
from ._broken import describe_failure
from ._index import Index
from ._options import build_time_part, with_defaults
from .._util.log import get_logger
from ..model._record import Record
from ..model._record_rows import RecordRows
from .._plugins._registry import ComponentConfig
from ..stores._store import LogRead, Op, Store

__all__ = ["IndexHandle", "fold_ops", "new_generation", "generation_of"]

log = get_logger("memcore.index")
MANIFEST = "index.json"
PREVIOUS = ".previous"
"""Hard links of the last complete save, kept while a new save is written and deleted once
it is complete (an old copy would keep what was deleted since: forgetting, issue 20)."""


_kind = attrgetter("op")
_record_id = attrgetter("record_id")
_index = attrgetter("index")
_ADD_ONLY = {"add"}


def fold_ops(ops: Iterable[Op], durable: bool = False) -> tuple[list[str], list[str]]:
    """Reduce a run of one index's ops to ``(ids to remove, ids to (re)add)``.

    An id whose first op is not ``add`` was in the index before the run, so it is removed;
    an id whose last op is not ``remove`` is a member after the run, so it is (re)added.
    Ids to add come in the order of their last op, as a live index received them
    (order-sensitive indexes such as a FIFO queue rely on it).

    ``durable``: the run is replayed into an index whose writes persist on their own
    (:attr:`Index.durable_writes`): it may hold ids the run added after its last save, so
    an id whose last op is ``remove`` is removed even when the run added it first.
    """
    ops = ops if isinstance(ops, list) else list(ops)
    if {*map(_kind, ops)} == _ADD_ONLY:  # the common run, new records added: unless an id repeats, all of them in order
        ids = list(map(_record_id, ops))
        if len(set(ids)) == len(ids):
            return [], ids
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for op in ops:
        first.setdefault(op.record_id, op.op)
        last.pop(op.record_id, None)  # keep ``last`` in order of each id's latest op
        last[op.record_id] = op.op
    removes = [rid for rid, o in first.items() if o != "add" or (durable and last[rid] == "remove")]
    adds = [rid for rid, o in last.items() if o != "remove"]
    return removes, adds


def new_generation() -> str:
    """A fresh :attr:`IndexHandle.generation`: what an index gets when it is created or
    redefined (never the same twice)."""
    return secrets.token_hex(8)


def generation_of(definition: Any) -> str | None:
    """The generation a stored index definition names (None: none, or not a definition)."""
    generation = definition.get("generation") if isinstance(definition, Mapping) else None
    return generation if isinstance(generation, str) else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


BLOCK = 1 << 20
"""Payload files are checksummed per block of this many bytes (CRC-32 each, in ``index.json``)."""
FULL_CHECK_UP_TO = 256 << 20
"""Files up to this size are checked whole at open, every block's CRC-32 (~2 GB/s: 25 MiB,
the ``exact`` payload of a million records, in ~12 ms; SHA-256 ran at 0.2 GB/s here).
Larger files (a faiss payload with its vectors) are checked by their size and
:data:`_SAMPLES` blocks spread evenly, first and last included: what a truncated, emptied,
replaced or overwritten file changes; a flipped bit elsewhere is found by
``memcore info --check``, which checks every block."""
_SAMPLES = 64


def _crc_blocks(path: Path) -> dict[str, Any]:
    """The size of ``path`` and the CRC-32 of each :data:`BLOCK` of it."""
    crcs = []
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            crcs.append(zlib.crc32(block))
    return {"size": path.stat().st_size, "block": BLOCK, "crc32": crcs}


def _check_blocks(path: Path, expected: Any, full: bool) -> bool:
    """Whether ``path`` has the recorded size and block CRCs: every block (``full``, or a
    file up to :data:`FULL_CHECK_UP_TO`), else :data:`_SAMPLES` blocks spread evenly."""
    if not isinstance(expected, dict) or not isinstance(expected.get("crc32"), list) or expected.get("block") != BLOCK:
        raise CorruptError("index.json: malformed block checksums")
    size = path.stat().st_size
    crcs = expected["crc32"]
    if size != expected.get("size") or len(crcs) != -(-size // BLOCK):
        return False
    count = len(crcs)
    picks = (
        range(count)
        if full or size <= FULL_CHECK_UP_TO or count <= _SAMPLES
        else sorted({0, count - 1, *(i * (count - 1) // _SAMPLES for i in range(_SAMPLES))})
    )
    with open(path, "rb") as fh:
        for i in picks:
            fh.seek(i * BLOCK)
            if zlib.crc32(fh.read(BLOCK)) != crcs[i]:
                return False
    return True


def _check_files(directory: Path, meta: dict[str, Any], full: bool = False) -> None:
    """CorruptError unless every file listed in ``meta`` matches its recorded checksums:
    the block CRC-32s (``blocks``: saves since format 3 of the manifest) or the whole file's
    SHA-256 (older saves; ``sampled`` entries of session-13 saves are ignored: the SHA-256 is
    checked)."""
    blocks = meta.get("blocks") or {}
    if not isinstance(blocks, dict):
        raise CorruptError("index.json: 'blocks' is not an object")
    for fname, digest in meta.get("files", {}).items():
        path = directory / fname
        if fname in blocks:
            if not _check_blocks(path, blocks[fname], full):
                raise CorruptError(f"checksum mismatch in {fname}")
        elif _sha256(path) != digest:
            raise CorruptError(f"checksum mismatch in {fname}")


@dataclass
class IndexHandle:
    """A named index with its kind, validated config and sync state against the store."""

    name: str
    kind: str
    config: ComponentConfig
    index: Index
    make: Callable[[], Index]
    applied_seq: int = 0
    dirty: bool = True
    stale: bool = False
    directory: Path | None = None
    loaded_from_disk: bool = field(default=False)
    pristine: bool = True
    """``index`` is as its factory built it (nothing added or loaded): a rebuild fills it
    instead of building another one."""
    error: str | None = None
    """Why the index is broken (it could not be built, loaded or rebuilt); None when usable."""
    load_error: str | None = None
    """Why the saved files could not be loaded (they are rebuilt from the store); None otherwise."""
    full_check: bool = False
    """Check every block of every payload file at load, however large (``memcore info --check``)."""
    generation: str | None = None
    """Which creation of index ``name`` this is: a random token written with its definition
    when it is created or redefined (kept when only search-time options change; None for an
    index created before generations were kept). Another process compares it to follow a
    drop and re-creation under the same name; a saved payload carries it and is loaded only
    by a handle of the same generation."""
    canonical_kinds: Callable[[Any], Any] = field(default=lambda value: value, repr=False)
    """Rewrites deprecated kind spellings in a saved ``index.json`` to the current names
    (:meth:`memcore.registry.Registry.canonical_kinds`), so an index saved before its kind
    was renamed loads instead of being rebuilt."""

    def definition(self) -> dict[str, Any]:
        """The index's kind and config (what two definitions are compared by)."""
        return {"kind": self.kind, "config": self.config.model_dump(mode="json")}

    def stored_definition(self) -> dict[str, Any]:
        """What the store keeps about this index: :meth:`definition` and its :attr:`generation`."""
        definition = self.definition()
        if self.generation is not None:
            definition["generation"] = self.generation
        return definition

    # -- applying changes ----------------------------------------------------------------

    def apply(
        self,
        ops: Sequence[Op],
        store: Store,
        cache: dict[str, Record] | None = None,
        *,
        replay: bool = False,
        rows: RecordRows | None = None,
        added: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Apply logged ops, taking records from ``cache`` first and the store otherwise.

        ``replay``: the ops are a catch-up (the index may have seen some of them, see
        :attr:`Index.durable_writes`), not a write the index has never seen. ``rows``: the
        write's new records inserted as columns, in order (the index is handed that list
        itself when it adds exactly them: it keeps their vectors as one matrix).
        ``added``: the write's ops as :attr:`Applied.adds` holds them (``{index: ids}``, only
        adds, each id once), read instead of ``ops``."""
        name = self.name
        adds: Sequence[str]
        if added is not None:
            removes: list[str] = []
            adds = added.get(name, ())
        else:
            mine = ops if {*map(_index, ops)} == {name} else [op for op in ops if op.index == name]
            removes, adds = fold_ops(mine, durable=replay and self.index.durable_writes)
        if not removes and not adds:
            return
        cache = cache or {}
        whole = rows is not None and adds == rows.ids  # the write's records, as the write built them
        missing = [] if whole else [rid for rid in adds if rid not in cache]
        if missing:
            # an index that reads the store's data itself is handed the records without vectors
            fetched = {r.id: r for r in store.get(missing, with_vectors=not self.index.reads_store) if r is not None}
            records = [cache.get(rid) or fetched[rid] for rid in adds if rid in cache or rid in fetched]
        elif whole and rows is not None:
            records = rows
        else:  # every record at hand (what a write passes along)
            records = list(map(cache.__getitem__, adds))
        self.pristine = False
        if removes:
            self.index.remove(removes)
        if records:
            self.index.add(records)
        self.dirty = True

    def catch_up(self, store: Store, read: LogRead | None = None, records: dict[str, Record] | None = None) -> int | None:
        """Apply every op logged since ``applied_seq``; returns how many ops were applied,
        or None when the log was pruned past ``applied_seq`` (a gap: rebuild instead).

        ``read``: this index's log as read already (:meth:`Store.read_tail`, above
        ``applied_seq``), else it is read now; ``records``: records read with it, by id
        (taken before the store is asked)."""
        if read is None:
            read = store.read_log(self.applied_seq, self.name)
        if self.applied_seq < read.start:
            return None
        if read.last <= self.applied_seq:
            return 0
        ops = read.ops
        self.apply(ops, store, records, replay=True)
        self.applied_seq = read.last
        if ops:
            log.info("index.caught_up", name=self.name, ops=len(ops))
        return len(ops)

    def rebuild(self, store: Store, fill: Callable[[list[Record]], list[Record]], progress: Callable[[int], None] | None = None) -> int:
        """Recreate the index from the store's members; ``fill`` completes missing vectors."""
        started = time.perf_counter()
        seq = store.last_seq()
        fresh = self.index if self.pristine else self.make()
        self.pristine = False
        count = 0
        for batch in store.iter_records(index=self.name):
            fresh.add(fill(batch))
            count += len(batch)
            if progress:
                progress(len(batch))
        if fresh is not self.index:
            self.close_index()  # the replaced instance
        self.index = fresh
        self.applied_seq = seq
        self.dirty = True
        self.stale = False
        self.loaded_from_disk = False
        log.info("index.rebuilt", name=self.name, kind=self.kind, records=count, seconds=round(time.perf_counter() - started, 3))
        return count

    # -- persistence ---------------------------------------------------------------------

    def save(self) -> None:
        """Save into ``directory`` (files first, ``index.json`` with checksums last).

        :raises StorageFullError: no room on the disk (or under the quota or file size
            limit); the previous save and the store's log still hold every acknowledged record.
        """
        if self.directory is None or self.stale or self.error is not None:
            return  # a broken index keeps its files untouched until it is rebuilt or dropped
        with storage_full_errors(self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
            with directory_lock(self.directory):  # other processes may save their copy here (postgres store)
                self._save()

    def _save(self) -> None:
        assert self.directory is not None
        manifest = self.directory / MANIFEST
        if not self.dirty:
            # Unchanged since loaded/saved while the store moved on without touching this
            # index: the files are current at ``applied_seq``. Record it, or the log pruned
            # past the old number would force a needless rebuild on the next open.
            try:
                meta = json.loads(manifest.read_text())
                if meta.get("generation") != self.generation:
                    raise ValueError("the folder holds another generation's save")  # rewritten whole, below
                if meta.get("seq") != self.applied_seq:
                    atomic_write_json(manifest, {**meta, "seq": self.applied_seq})
                self._drop_previous()  # a save cut short after its manifest left it: it may hold deleted content
                return
            except (OSError, ValueError):
                pass  # no readable manifest: save everything
        self._keep_previous(manifest)
        if manifest.exists():
            manifest.unlink()  # a crash mid-save leaves no manifest here -> the previous save, never a mix
        self.index.save(self.directory)
        paths = [p for p in sorted(self.directory.iterdir()) if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")]
        files = {p.name: _sha256(p) for p in paths}
        blocks = {p.name: _crc_blocks(p) for p in paths}
        atomic_write_json(
            manifest,
            {
                **self.stored_definition(),
                "format_version": self.index.format_version,
                "seq": self.applied_seq,
                "files": files,
                "blocks": blocks,
                "count": len(self.index),
            },
        )
        self.dirty = False
        self._drop_previous()

    def _drop_previous(self) -> None:
        """Delete the backup of the last save (and a staging folder a cut-short save left):
        called once the folder holds a complete save, so that nothing a later write deleted
        stays on disk in an old copy of the index."""
        assert self.directory is not None
        shutil.rmtree(self.directory / PREVIOUS, ignore_errors=True)
        shutil.rmtree(self.directory / (PREVIOUS + ".tmp"), ignore_errors=True)

    def _keep_previous(self, manifest: Path) -> None:
        """Hard-link the current save into ``.previous/`` before overwriting it.

        Index files are replaced atomically (new inodes), so the links keep the previous
        save intact: a kill during this save recovers from it plus the log instead of a
        full rebuild. Kept as is when the directory holds no manifest (a save was cut short).
        """
        assert self.directory is not None
        previous = self.directory / PREVIOUS
        if not manifest.exists():
            return
        shutil.rmtree(previous, ignore_errors=True)
        staging = self.directory / (PREVIOUS + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for path in sorted(self.directory.iterdir(), key=lambda p: p.name == MANIFEST):  # the manifest last
            if path.is_file() and not path.name.startswith("."):
                try:
                    os.link(path, staging / path.name)
                except OSError:  # no hard links here: copy
                    shutil.copy2(path, staging / path.name)
        staging.rename(previous)

    def load(self) -> int | None:
        """Load the saved index -- or, when a save was cut short, the previous one; returns
        its sequence number, or None when it must be rebuilt."""
        if self.directory is None:
            return None
        with directory_lock(self.directory, shared=True):  # never half of another process's save
            seq = self._load_from(self.directory)
            previous = self.directory / PREVIOUS
            if seq is None and (previous / MANIFEST).is_file():
                seq = self._load_from(previous)
                if seq is not None:
                    self.dirty = True  # the main folder holds a cut-short save: rewrite it
                    log.info("index.recovered_previous", name=self.name, seq=seq)
        return seq

    def _load_from(self, directory: Path) -> int | None:
        manifest = directory / MANIFEST
        if not manifest.exists():
            if directory.exists() and directory == self.directory:
                log.warning("index.no_manifest", name=self.name)
            return None
        try:
            meta = self.canonical_kinds(json.loads(manifest.read_text()))
            saved_config = meta.get("config")
            if (
                meta.get("kind") != self.kind
                or not isinstance(saved_config, dict)
                or build_time_part(with_defaults(saved_config, self.config), self.config)
                != build_time_part(with_defaults(self.definition()["config"], self.config), self.config)
            ):
                raise CorruptError("saved kind/config differ from the collection's definition")
            if meta.get("generation") != self.generation:
                # saved by a process still holding an index of this name that was dropped since
                raise CorruptError("saved for another generation of the index (dropped and created again since)")
            saved_version = meta.get("format_version")
            if saved_version != self.index.format_version and saved_version not in self.index.readable_versions:
                readable = sorted({self.index.format_version, *self.index.readable_versions})
                raise CorruptError(f"format version {saved_version} is not one this {self.kind} index reads ({', '.join(map(str, readable))})")
            _check_files(directory, meta, full=self.full_check)
            self.pristine = False
            self.index.load(directory)
            len(self.index)  # a library that opens its files lazily reads them now, not at the first search
        except Exception as exc:  # noqa: BLE001 - any failure to read the saved files (a library's own errors too): rebuilt from the store
            self.load_error = describe_failure(exc)
            log.warning("index.load_failed", name=self.name, error=self.load_error, action="rebuild")
            self.close_index()
            self.index = self.make()
            self.pristine = True
            return None
        self.loaded_from_disk = True
        self.dirty = saved_version != self.index.format_version  # an older format is rewritten at the next save
        return int(meta["seq"])

    def size_bytes(self) -> int:
        """Bytes on disk."""
        if self.directory is None or not self.directory.exists():
            return 0
        return sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())

    def set_aside(self) -> None:
        """Move files found where a *new* index will live to ``indexes/.orphan-<name>-<time>``:
        the store does not account for them, so memcore does not delete them."""
        if self.directory is None or not self.directory.exists():
            return
        if self.directory.is_dir() and not any(self.directory.iterdir()):
            self.directory.rmdir()
            return
        target = self.directory.with_name(f".orphan-{self.name}-{time.time_ns()}")
        self.directory.rename(target)
        log.warning("index.orphan_kept", name=self.name, path=str(target))

    def close_index(self) -> None:
        """Let go of the live index instance (:meth:`memcore.Index.close`); a failure is logged."""
        try:
            self.index.close()
        except Exception as exc:  # noqa: BLE001 - a plugin's close must not break a close/drop
            log.warning("index.close_failed", name=self.name, kind=self.kind, error=str(exc))

    def remove_files(self) -> None:
        """Delete the index directory."""
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)
