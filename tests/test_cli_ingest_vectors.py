"""``memcore ingest`` with precomputed vectors: a ``vectors`` field per line or ``--vectors FILE.npy``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import memcore
from memcore.cli import main

SETTINGS = """
[spaces.default]
dim = 4

[indexes.vector]
kind = "exact"
space = "default"
"""

ROWS = [{"id": f"r{i}", "text": f"record {i}"} for i in range(3)]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "memcore.toml"
    path.write_text(SETTINGS)
    return path


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args], env={"MEMCORE_LOG": None})
    assert result.exit_code == code, result.output + repr(result.exception)
    return result


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def stored(config: Path, directory: Path) -> dict[str, np.ndarray]:
    with memcore.open(config, path=directory) as memory:
        return {r.id: r.vectors["default"] for r in memory.get(where={})}


def test_vectors_field_in_each_line(tmp_path, config):
    rows = [{**r, "vectors": {"default": [float(i), 1.0, 0.0, 0.0]}} for i, r in enumerate(ROWS)]
    run("ingest", "-c", config, "-p", tmp_path / "m", write(tmp_path / "in.jsonl", rows))
    vectors = stored(config, tmp_path / "m")
    np.testing.assert_array_equal(vectors["r2"], [2.0, 1.0, 0.0, 0.0])
    with memcore.open(config, path=tmp_path / "m") as memory:
        assert memory.collection.retrieve({"vectors": {"default": [2.0, 1.0, 0.0, 0.0]}}, k=1)[0].id == "r2"


def test_vectors_from_an_npy_file(tmp_path, config):
    matrix = np.eye(3, 4, dtype=np.float32)
    np.save(tmp_path / "v.npy", matrix)
    out = run("ingest", "-c", config, "-p", tmp_path / "m", "--vectors", tmp_path / "v.npy", "--json", write(tmp_path / "in.jsonl", ROWS))
    assert json.loads(out.stdout)["inserted"] == 3
    vectors = stored(config, tmp_path / "m")
    for i in range(3):
        np.testing.assert_array_equal(vectors[f"r{i}"], matrix[i])


def test_bad_vectors_insert_nothing(tmp_path, config):
    data = write(tmp_path / "in.jsonl", ROWS)
    np.save(tmp_path / "short.npy", np.ones((2, 4), dtype=np.float32))
    assert "2 row(s) for 3 line(s)" in run("ingest", "-c", config, "-p", tmp_path / "m", "--vectors", tmp_path / "short.npy", data, code=2).output
    np.save(tmp_path / "wide.npy", np.ones((3, 5), dtype=np.float32))
    assert "dimension 5" in run("ingest", "-c", config, "-p", tmp_path / "m", "--vectors", tmp_path / "wide.npy", data, code=2).output
    nan = np.ones((3, 4), dtype=np.float32)
    nan[1, 2] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    assert "NaN" in run("ingest", "-c", config, "-p", tmp_path / "m", "--vectors", tmp_path / "nan.npy", data, code=2).output
    rows = [{**ROWS[0], "vectors": {"other": [1, 2, 3, 4]}}]
    assert "undeclared space 'other'" in run("ingest", "-c", config, "-p", tmp_path / "m", write(tmp_path / "o.jsonl", rows), code=2).output
    assert "--space names the space" in run("ingest", "-c", config, "-p", tmp_path / "m", "--space", "default", data, code=2).output
    with memcore.open(config, path=tmp_path / "m") as memory:
        assert memory.count() == 0
