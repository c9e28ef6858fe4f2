"""examples/hyperamy_abc.py runs and reproduces the design's A/B/C scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "hyperamy_abc.py"


def run(*args):
    out = subprocess.run([sys.executable, str(SCRIPT), "--json", *args], check=True, capture_output=True, text=True, timeout=180).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_abc_scenario(tmp_path):
    res = run("--path", str(tmp_path / "db"))
    rows = lambda name: [(r["id"], r["type"]) for r in res[name]]  # noqa: E731
    assert rows("wide cone") == [("A", "direct"), ("B", "direct"), ("C", "direct")]
    assert rows("cone of 2") == [("A", "direct"), ("B", "direct"), ("C", "neighbor")]
    assert rows("weak query") == [("B", "direct"), ("C", "direct"), ("A", "direct")]
    wide, narrow = res["wide cone"], res["cone of 2"]
    assert wide[0]["score"] == 0.0 and wide[1]["score"] == pytest.approx(1.4)
    assert narrow[2]["score"] == pytest.approx(1.2 * wide[2]["score"], abs=2e-4)  # the neighbour penalty
    assert (tmp_path / "db").is_dir()


def test_abc_scenario_with_forgetting():
    res = run("--decay")
    assert [r["id"] for r in res["weak query"]] == ["A", "B", "C"]
    assert res["wide cone"][0]["score"] == pytest.approx(2 * (0.9 - 0.225), abs=1e-4)
