"""examples/postgres_hybrid.toml: ``pgvector`` + ``pg_text`` fused by RRF on the embedded
PostgreSQL, with no index data in the memory directory (an application server on it is
stateless). The hashing embedder stands in for MiniLM (no model in the test)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import memcore

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "postgres_hybrid.toml"

DOCS = [
    {"id": "trip", "text": "Alice booked a train to the mountains for the holidays", "scope": {"user_id": "alice"}},
    {"id": "garden", "text": "Alice waters the tomatoes in her garden every sunday", "scope": {"user_id": "alice"}},
    {"id": "violin", "text": "Bob is learning the violin with a patient teacher", "scope": {"user_id": "bob"}},
    {"id": "market", "text": "Stock markets fell sharply on Monday", "scope": {"user_id": "bob"}},
]


def test_the_example_runs_with_no_local_index_data(pg_dir: Path) -> None:
    settings = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert settings["store"] == {"kind": "postgres", "schema": "memcore"}  # the embedded server: no url
    settings["spaces"] = {"default": {"embedder": {"kind": "hashing", "dim": 384}}}
    with memcore.open(settings, path=pg_dir) as memory:
        memory.insert(DOCS)
        hits = memory.query("which train did Alice book to the mountains", k=3)
        assert hits[0].id == "trip"
        assert {c.source for c in hits[0].provenance} >= {"vector", "text"}  # both recalled lists were fused
        assert "violin" not in {h.id for h in memory.query("violin teacher", k=4, scope={"user_id": "alice"})}
        memory.update("market", text="Bob booked a train to the sea")
        assert "market" in {h.id for h in memory.query("train to the sea", k=2)}
        memory.delete("trip")
        assert "trip" not in {h.id for h in memory.query("train to the mountains", k=4)}
    files = [p.relative_to(pg_dir) for p in pg_dir.rglob("*") if p.is_file() and p.relative_to(pg_dir).parts[0] != "pgdata"]
    index_files = [p for p in files if p.parts[0] == "indexes"]
    assert {p.name for p in index_files} <= {"index.json", "pgvector.json", "pg_text.json"}, files
    assert sum((pg_dir / p).stat().st_size for p in index_files) < 8192, files
    other = [p for p in files if p.parts[0] != "indexes"]
    assert all(p.suffix in (".json", ".toml", ".lock") or p.name.startswith(".") for p in other), other
