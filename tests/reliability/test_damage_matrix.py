"""Issue 27: the damage matrix -- every file of every installed index kind, damaged four ways.

For each index kind (one memory per kind, a few records, a removal, a clean close), each file
under ``indexes/<name>/`` is damaged: overwritten with garbage of the same size, truncated to
half, truncated to zero bytes, deleted. Then:

- ``memcore info --check`` runs without a traceback and reports the index ``ok`` or says
  why it will be rebuilt (``rebuild``) or is ``broken``;
- the memory opens; the index is either reported broken (``list_indexes``, a
  BrokenIndexError when searched) or returns exactly what a fresh rebuild returns;
- ``memcore index rebuild`` restores the results of a fresh rebuild.

By default every file of every kind gets one damage mode and each kind's largest file gets
all four (every kind and every mode covered); ``MEMCORE_DAMAGE_MATRIX=full`` runs every
file with every mode. The counts are printed (``-s``) as ``damage-matrix: {...}``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from click.testing import CliRunner

import memcore
from memcore._plugins._host import get_registry
from memcore.cli import main as cli

from .conftest import DIM, vec

T_NOW = 2.0e9  # poincare scores depend on the query time: a fixed one
KINDS: dict[str, dict[str, Any]] = {
    "exact": {"kind": "exact", "space": "v"},
    "faiss": {"kind": "faiss", "space": "v", "factory": "HNSW16", "ef_search": 128},
    "lsh": {"kind": "lsh", "space": "v", "bits": 6, "tables": 4, "fallback_exact": True},
    "fifo": {"kind": "fifo"},
    "sorted": {"kind": "sorted", "field": "turn"},
    "bm25": {"kind": "bm25"},
    "graph": {"kind": "graph"},
    "colbert": {"kind": "colbert", "embedder": {"kind": "token_hashing", "dim": 16}},
    "chroma": {"kind": "chroma", "space": "v"},
    "poincare": {"kind": "poincare", "space": "v"},
}
QUERIES: dict[str, Any] = {
    "fifo": {"text": "x", "extras": {"fifo": {"mode": "newest"}}},
    "sorted": {"text": "x", "extras": {"sorted": {"mode": "top", "order": "desc"}}},
    "bm25": "apple 3",
    "colbert": "apple 3 pear",
    "graph": "apple 3",
    "poincare": {"vectors": {"v": vec(3)}, "extras": {"poincare": {"t_now": T_NOW}}},
}
N = 16


def _garbage(p: Path) -> None:
    p.write_bytes(np.random.default_rng(len(p.name)).bytes(max(p.stat().st_size, 64)))


def _half(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


DAMAGES: dict[str, Callable[[Path], None]] = {
    "garbage": _garbage,
    "half": _half,
    "zero": lambda p: p.write_bytes(b""),
    "deleted": lambda p: p.unlink(),
}


def _installed() -> list[str]:
    names = set(get_registry().names("indexes"))
    return [k for k, d in KINDS.items() if d["kind"] in names]


def _settings(kind: str) -> dict[str, Any]:
    return {"spaces": {"v": {"dim": DIM}}, "indexes": {"idx": KINDS[kind]}, "pipeline": [{"kind": "recall", "index": "idx"}, {"kind": "limit"}]}


def _results(memory: memcore.Memory, kind: str) -> dict[str, Any]:
    c = memory.collection
    query = QUERIES.get(kind, {"vectors": {"v": vec(3)}})
    try:
        hits = [h.id for h in c.retrieve(query, index="idx", k=5, with_records=False)]
    except memcore.ValidationError:
        hits = None
    return {"hits": hits, "size": len(c.index("idx")), "members": sorted(c.ids(index="idx"))}


def _base(root: Path, kind: str) -> tuple[Path, dict[str, Any]]:
    """A closed memory with one index of ``kind``, and what a fresh rebuild of it returns."""
    base = root / f"base-{kind}"
    if not base.exists():
        with memcore.open(_settings(kind), path=base) as memory:
            c = memory.collection
            c.insert([{"id": f"r{i}", "text": f"apple {i} pear", "metadata": {"turn": i}, "vectors": {"v": vec(i)}} for i in range(N)])
            for i in range(1, N):
                c.link(f"r{i}", f"r{i - 1}")
            c.delete("r7")
    fresh = root / f"fresh-{kind}"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(base, fresh)
    with memcore.open(_settings(kind), path=fresh) as memory:
        memory.collection.rebuild_index("idx")
        expected = _results(memory, kind)
    assert expected["size"] == N - 1
    return base, expected


FULL = os.environ.get("MEMCORE_DAMAGE_MATRIX", "") == "full"


def _plan(files: list[str], full: bool) -> list[tuple[str, str]]:
    if full:
        return [(f, d) for f in files for d in DAMAGES]
    modes = list(DAMAGES)
    return sorted({(f, modes[i % len(modes)]) for i, f in enumerate(files)} | {(files[0], d) for d in modes})


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_file_damaged_every_way(kind, tmp_path_factory, capsys):
    if kind not in _installed():
        pytest.skip(f"index kind {kind!r} is not installed")
    root = tmp_path_factory.mktemp(f"damage-{kind}")
    base, expected = _base(root, kind)
    folder = base / "indexes" / "idx"
    files = sorted((p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()), key=lambda f: -(folder / f).stat().st_size)
    assert files
    counts = {"cases": 0, "reported_broken": 0, "verified_correct": 0, "rebuild_announced": 0}
    for rel, mode in _plan(files, FULL):
        case = f"{kind}: {rel} {mode}"
        work = root / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        DAMAGES[mode](work / "indexes" / "idx" / rel)
        checked = CliRunner().invoke(cli, ["info", "--path", str(work), "--check", "--json"])  # without settings, as an operator runs it
        assert checked.exception is None or isinstance(checked.exception, SystemExit), (case, checked.output, checked.exception)
        report = json.loads(checked.output)["check"]["indexes"]["idx"]
        assert report["status"] in ("ok", "rebuild", "broken"), (case, report)
        counts["rebuild_announced"] += report["status"] != "ok"
        with memcore.open(_settings(kind), path=work) as memory:
            status = {i["name"]: i for i in memory.collection.list_indexes()}["idx"]
            if status["status"] == "broken":
                counts["reported_broken"] += 1
                with pytest.raises(memcore.BrokenIndexError):
                    memory.collection.retrieve(QUERIES.get(kind, {"vectors": {"v": vec(3)}}), index="idx")
            else:
                assert _results(memory, kind) == expected, case
                counts["verified_correct"] += 1
        config = root / "settings.yaml"
        config.write_text(json.dumps(_settings(kind)))  # JSON is YAML
        rebuilt = CliRunner().invoke(cli, ["index", "rebuild", "--config", str(config), "--path", str(work), "idx"])
        assert rebuilt.exit_code == 0, (case, rebuilt.output, rebuilt.exception)
        with memcore.open(_settings(kind), path=work) as memory:
            assert {i["name"]: i["status"] for i in memory.collection.list_indexes()} == {"idx": "ok"}, case
            assert _results(memory, kind) == expected, case
        counts["cases"] += 1
    with capsys.disabled():
        print(f"\ndamage-matrix {kind}: files={len(files)} {counts}")
    assert counts["cases"] == counts["reported_broken"] + counts["verified_correct"]
