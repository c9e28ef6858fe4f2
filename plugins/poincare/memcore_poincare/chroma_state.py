"""Where an embedded Chroma collection stands: what a standalone storage's snapshot is checked against.

Every write to an embedded Chroma collection (``PersistentClient``, chromadb 1.x) goes
through its write-ahead log, a SQLite table (``embeddings_queue``) with an increasing
``seq_id``, and the collection's metadata segment records the last ``seq_id`` it applied
(``max_seq_id``). :func:`write_position` reads both (read-only, one short SQLite
connection): a snapshot saved at one position is used only while Chroma still stands
there, so a write made afterwards by anyone (another process, this one after its last
save, a crash) makes it stale. When the position cannot be read (no such file, another
layout in a future chromadb) it is None and no snapshot is trusted.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["write_position", "DB_FILE"]

DB_FILE = "chroma.sqlite3"


def write_position(persist_path: Path, collection_id: str) -> dict[str, Any] | None:
    """``{"collection_id", "segment", "applied", "logged"}`` for the collection, or None."""
    db = Path(persist_path) / DB_FILE
    if not db.is_file():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            seg = con.execute("SELECT id FROM segments WHERE collection = ? AND scope = 'METADATA'", (collection_id,)).fetchone()
            if seg is None:
                return None
            applied = con.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (seg[0],)).fetchone()
            # the newest log entry of this collection (scanned from the end: writes are recent)
            logged = con.execute("SELECT seq_id FROM embeddings_queue WHERE topic LIKE ? ORDER BY seq_id DESC LIMIT 1", (f"%/{collection_id}",)).fetchone()
        finally:
            con.close()
        return {
            "collection_id": collection_id,
            "segment": str(seg[0]),
            "applied": None if applied is None else int(applied[0]),
            "logged": None if logged is None else int(logged[0]),
        }
    except (sqlite3.Error, TypeError, ValueError):  # another schema: no position, no trusted snapshot
        return None
