"""The particle mirror on disk: a base snapshot plus append-only delta segments.

A folder holds one snapshot:

- ``mirror-manifest.json``: what the snapshot is. It names the base, the delta segments in
  the order they apply, the size and CRC-32 of every file, the row count, the dimension and
  a *stamp* (what the snapshot must match to be used: the Chroma collection and, for a
  standalone :class:`~.storage.HyperAmyStorage`, Chroma's own write position). It is
  written last, atomically: files it does not name (a crash between steps, a leftover of
  an older snapshot) are ignored and deleted by the next full save.
- ``mirror-base-<id>.npy`` / ``.json``: every row's unit direction (float32, (n, d)) and
  the ids and Chroma metadatas.
- ``mirror-delta-<id>-<i>.npy`` / ``.json``: what changed since the previous segment: the
  rows upserted (directions, ids, metadatas) and the ids deleted. Deletes apply first.

A save writes only the rows changed since the last save (the mirror's journal) as a new
delta segment, unless the deltas would then hold more than ``compact_ratio`` times the
base's rows or more than ``max_deltas`` segments, or the folder's manifest is not the one
the mirror was last saved to or loaded from: then it writes a new base (compaction) and
drops the old files. Every file is written atomically (temp file, fsync, rename).

:meth:`MirrorSnapshot.load` returns None (the caller rebuilds the mirror from Chroma, the
truth) when the manifest is missing or unreadable, the stamp or the dimension differs, a
named file is missing, has another size or CRC-32, or does not parse into the shapes the
manifest announces. No pickle: ``.npy`` without objects and JSON.
"""

from __future__ import annotations

import json
import uuid
import zlib
from pathlib import Path
from typing import Any, Literal, Mapping

import numpy as np

from memcore.plugin import atomic_write_bytes, atomic_write_with

from .mirror import ParticleMirror

__all__ = ["MirrorSnapshot", "MANIFEST", "PREFIX", "SaveKind"]

MANIFEST = "mirror-manifest.json"
PREFIX = "mirror-"
FORMAT = 1
LEGACY = ("mirror.json",)  # the single-file snapshot of earlier versions (its .npy files match PREFIX)
SaveKind = Literal["base", "delta", "unchanged"]


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


class MirrorSnapshot:
    """The snapshot files of one folder (see the module docstring)."""

    def __init__(self, folder: Path, compact_ratio: float = 0.5, max_deltas: int = 64):
        self.folder = Path(folder)
        self.compact_ratio = float(compact_ratio)
        self.max_deltas = int(max_deltas)

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    # -- reading ---------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any] | None:
        """The manifest, or None when it is missing or not a JSON object of this format."""
        try:
            document = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            return None
        return document

    def _verified(self, entry: Any) -> tuple[np.ndarray, dict[str, Any]] | None:
        """The arrays and JSON of one segment, if its files are there with the recorded size and CRC."""
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("files"), dict):
            return None
        name, files = entry["name"], entry["files"]
        paths = {suffix: self.folder / f"{name}{suffix}" for suffix in (".npy", ".json")}
        for suffix, path in paths.items():
            want = files.get(suffix)
            try:
                if not isinstance(want, dict) or path.stat().st_size != want.get("size") or _crc(path) != want.get("crc32"):
                    return None
            except OSError:
                return None
        try:
            directions = np.load(paths[".npy"], allow_pickle=False)
            document = json.loads(paths[".json"].read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return (directions, document) if isinstance(document, dict) else None

    def load(self, dim: int, stamp: Mapping[str, Any]) -> ParticleMirror | None:
        """The mirror the snapshot holds, if it is whole and its stamp and dimension match."""
        manifest = self.manifest()
        if manifest is None or manifest.get("stamp") != dict(stamp) or manifest.get("dim") != dim:
            return None
        base = self._verified(manifest.get("base"))
        deltas = manifest.get("deltas")
        if base is None or not isinstance(deltas, list):
            return None
        directions, document = base
        ids, metas = document.get("ids"), document.get("metadatas")
        if not isinstance(ids, list) or not isinstance(metas, list) or len(ids) != len(metas) or directions.shape != (len(ids), dim):
            return None
        try:
            mirror = ParticleMirror.from_arrays(dim, [str(i) for i in ids], directions, metas)
            for entry in deltas:
                seg = self._verified(entry)
                if seg is None:
                    return None
                up, doc = seg
                up_ids, up_metas, gone = doc.get("upserts"), doc.get("metadatas"), doc.get("deletes")
                if not (isinstance(up_ids, list) and isinstance(up_metas, list) and isinstance(gone, list)) or up.shape != (len(up_ids), dim):
                    return None
                mirror.delete([str(i) for i in gone])
                mirror.upsert([str(i) for i in up_ids], up, up_metas)
        except (KeyError, TypeError, ValueError):  # metadata without v/T/born...
            return None
        if len(mirror) != manifest.get("count"):
            return None
        mirror.mark_saved((str(self.folder.resolve()), manifest["base"]["name"], len(deltas)))
        return mirror

    # -- writing ---------------------------------------------------------------------------

    def _write_segment(self, name: str, directions: np.ndarray, document: dict[str, Any]) -> dict[str, Any]:
        def write_npy(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(directions, dtype=np.float32), allow_pickle=False)

        atomic_write_with(self.folder / f"{name}.npy", write_npy)
        atomic_write_bytes(self.folder / f"{name}.json", json.dumps(document, separators=(",", ":")).encode("utf-8"))
        files = {}
        for suffix in (".npy", ".json"):
            path = self.folder / f"{name}{suffix}"
            files[suffix] = {"size": path.stat().st_size, "crc32": _crc(path)}
        return {"name": name, "files": files}

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_bytes(self.manifest_path, json.dumps(manifest, indent=1).encode("utf-8"))

    def save(self, mirror: ParticleMirror, stamp: Mapping[str, Any]) -> SaveKind:
        """Write what changed since the last save (a delta segment) or a new base; returns which."""
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest = self.manifest()
        where = str(self.folder.resolve())
        synced = (
            manifest is not None
            and manifest.get("dim") == mirror.dim
            and isinstance(manifest.get("deltas"), list)
            and isinstance(manifest.get("base"), dict)
            and mirror.saved_as == (where, manifest["base"].get("name"), len(manifest["deltas"]))
        )
        if synced:
            assert manifest is not None
            upserted, deleted = mirror.journal()
            if not upserted and not deleted:
                if manifest.get("stamp") != dict(stamp):
                    self._write_manifest({**manifest, "stamp": dict(stamp)})
                return "unchanged"
            pending = sum(int(d.get("rows", 0)) for d in manifest["deltas"]) + len(upserted) + len(deleted)
            if pending <= self.compact_ratio * max(int(manifest["base"].get("rows", 0)), 1) and len(manifest["deltas"]) < self.max_deltas:
                rows = mirror.rows_of(upserted)
                ids, directions, _, metas = mirror.take(rows)
                base_name = manifest["base"]["name"]
                name = f"{base_name.replace('base', 'delta', 1)}-{len(manifest['deltas'])}"
                entry = self._write_segment(name, directions, {"upserts": ids, "metadatas": metas, "deletes": deleted})
                entry["rows"] = len(ids) + len(deleted)
                deltas = [*manifest["deltas"], entry]
                self._write_manifest({**manifest, "stamp": dict(stamp), "count": len(mirror), "deltas": deltas})
                mirror.mark_saved((where, base_name, len(deltas)))
                return "delta"
        name = f"{PREFIX}base-{uuid.uuid4().hex[:12]}"
        entry = self._write_segment(name, mirror.directions, {"ids": mirror.ids, "metadatas": mirror.metadatas})
        entry["rows"] = len(mirror)
        self._write_manifest({"format": FORMAT, "dim": mirror.dim, "count": len(mirror), "stamp": dict(stamp), "base": entry, "deltas": []})
        mirror.mark_saved((where, name, 0))
        self._sweep(keep=name)
        return "base"

    def _sweep(self, keep: str) -> None:
        """Delete the snapshot files (and temp files) that do not belong to base ``keep``."""
        delta = keep.replace("base", "delta", 1) + "-"
        for path in self.folder.iterdir():
            name = path.name
            ours = name.startswith(PREFIX) or name in LEGACY or (name.startswith(f".{PREFIX}") and name.endswith(".tmp"))
            if ours and name != MANIFEST and not name.startswith(keep + ".") and not name.startswith(delta):
                path.unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove every snapshot file of the folder (the manifest first)."""
        if not self.folder.is_dir():
            return
        self.manifest_path.unlink(missing_ok=True)
        for path in self.folder.iterdir():
            if path.name.startswith(PREFIX) or path.name in LEGACY or path.name.startswith(f".{PREFIX}"):
                path.unlink(missing_ok=True)
