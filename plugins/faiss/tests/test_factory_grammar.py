"""Issue 13, critical 2: no factory string accepted by validation may abort the process.

``HNSW0`` passed validation, the store committed, and the first add aborted in a faiss
assertion (SIGABRT) -- then every later open too. The property: any string is either a
ConfigError at validation or builds, adds, trains, searches, saves and loads without
aborting. Candidates run in a child process, so an abort fails the test instead of
killing pytest, and the failing string is named.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memcore import ConfigError
from memcore._plugins._registry import Registration
from memcore.testing import examples
from memcore_faiss import FaissIndexConfig
from memcore_faiss.index import FaissIndex

CHILD = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path
    import numpy as np
    from memcore import ConfigError, IndexContext, Query, Record, SpaceInfo
    from memcore._plugins._registry import Registration
    from memcore_faiss import FaissIndexConfig
    from memcore_faiss.index import FaissIndex

    reg = Registration("indexes", "faiss", FaissIndex, FaissIndexConfig, "faiss")
    rng = np.random.default_rng(0)
    for text, dim, metric in json.loads(sys.stdin.read()):
        print(json.dumps({"start": text}), flush=True)
        ctx = IndexContext("vec", {"default": SpaceInfo("default", dim, "t")})
        try:
            try:
                index = FaissIndex(reg.parse_config({"factory": text, "metric": metric, "min_train": 256}, "indexes.vec"), ctx)
            except ConfigError as exc:
                if "min_train" not in str(exc):
                    raise
                index = FaissIndex(reg.parse_config({"factory": text, "metric": metric}, "indexes.vec"), ctx)
        except ConfigError:
            print(json.dumps({"config_error": text}), flush=True)
            continue
        x = rng.standard_normal((300, dim)).astype("float32")
        index.add([Record(id=f"r{i}", text="t", vectors={"default": v}) for i, v in enumerate(x)])
        index.remove(["r1", "r2"])
        hits = index.search(Query(vectors={"default": x[0]}), 5)
        assert hits, text
        with tempfile.TemporaryDirectory() as d:
            index.save(Path(d))
            again = FaissIndex(index.config, ctx)
            again.load(Path(d))
            assert again.search(Query(vectors={"default": x[0]}), 5)
        print(json.dumps({"ok": text}), flush=True)
    """
)


def run_child(candidates: list[tuple[str, int, str]]) -> list[dict]:
    """Run the candidates in one child process; fail naming the string that killed it."""
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(candidates), capture_output=True, text=True, timeout=600)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        last = next((l["start"] for l in reversed(lines) if "start" in l), None)
        pytest.fail(f"factory {last!r} killed or failed the process (rc {proc.returncode}): {proc.stderr[-800:]}")
    return lines


_NUMBERS = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "4", "8", "16", "32", "64", "256", "257", "4096", "65536", "65537", "08", "99999999999999999999"]),
    st.integers(0, 300).map(str),
)
_STORAGE = st.one_of(
    st.sampled_from(["Flat", "SQ4", "SQ6", "SQ8", "SQfp16", "SQ7", "LSH", "RFlat"]),
    st.builds(lambda m, b: f"PQ{m}" + (f"x{b}" if b else ""), _NUMBERS, st.one_of(st.none(), _NUMBERS)),
)
_MAIN = st.one_of(
    _STORAGE,
    st.builds(lambda m, sep, s: f"HNSW{m}" + (f"{sep}{s}" if s else ""), _NUMBERS, st.sampled_from([",", "_"]), st.one_of(st.none(), _STORAGE)),
    st.builds(lambda n, q, s: f"IVF{n}" + (f"_HNSW{q}" if q else "") + f",{s}", _NUMBERS, st.one_of(st.none(), _NUMBERS), _STORAGE),
    st.text(alphabet="HNSWIVFPQLSDXx0123456789,_ .()", max_size=12),
)
_TRANSFORM = st.one_of(
    st.builds(lambda p, d: f"{p}{d}", st.sampled_from(["PCA", "PCAW", "PCAR", "PCAWR", "RR", "OPQ", "ITQ"]), _NUMBERS),
    st.builds(lambda m, d: f"OPQ{m}_{d}", _NUMBERS, _NUMBERS),
    st.just("L2norm"),
)
FACTORIES = st.builds(lambda pre, main: ",".join([*pre, main]), st.lists(_TRANSFORM, max_size=2), _MAIN)
CANDIDATE = st.tuples(FACTORIES, st.sampled_from([8, 16]), st.sampled_from(["l2", "ip", "cosine"]))


@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(CANDIDATE, min_size=15, max_size=15))
def test_any_factory_is_a_config_error_or_works_without_aborting(candidates):
    lines = run_child(candidates)
    done = [l for l in lines if "ok" in l or "config_error" in l]
    assert len(done) == len(candidates)


KNOWN_ABORTS = ["HNSW0", "HNSW1", "PQ4x1", "PQ4x2", "HNSW0,Flat", "IVF8_HNSW0,Flat", "IVF8_HNSW1,Flat", "HNSW1_SQ8", "PQ4x16"]


@pytest.mark.parametrize("text", KNOWN_ABORTS)
def test_strings_that_crashed_faiss_are_config_errors_at_validation(text):
    reg = Registration("indexes", "faiss", FaissIndex, FaissIndexConfig, "faiss")
    with pytest.raises(ConfigError) as info:
        reg.parse_config({"factory": text}, "indexes.vec")
    assert info.value.location == "indexes.vec.factory"


def test_the_documented_factories_still_work():
    docs = [
        "Flat",
        "HNSW32",
        "HNSW16_SQ8",
        "HNSW32,Flat",
        "HNSW16,PQ4",
        "IVF8,Flat",
        "IVF4,PQ4x4",
        "PQ4x4",
        "SQ8",
        "SQfp16",
        "PCA4,IVF4,Flat",
        "OPQ4,IVF4,PQ4",
        "IVF8_HNSW32,Flat",
        "L2norm,Flat",
        "RR8,HNSW8",
    ]
    lines = run_child([(text, 8, "l2") for text in docs])
    assert [l["ok"] for l in lines if "ok" in l] == docs
