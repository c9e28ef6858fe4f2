"""Fuzz suite (issue 13): hypothesis-generated vectors, metadata, queries, settings and CLI input.

The property, for every input: the call succeeds, or it raises a memcore error
(:class:`memcore.MemcoreError`) and the store is unchanged (count, ids, last sequence
number); at the end the collection still opens and every record is found. Any other
exception fails the test. ``MEMCORE_FUZZ_EXAMPLES`` sets the examples per test (default 40, ×10 under ``pytest --slow``;
the issue's closing figure runs >= 500 in total).
"""

from __future__ import annotations

import os

import memcore
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from memcore import MemcoreError
from memcore.testing import examples

from .conftest import DIM, settings, snapshot, vec

EXAMPLES = int(os.environ.get("MEMCORE_FUZZ_EXAMPLES", "0")) or examples(40)
FUZZ = hsettings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One memory for a whole test module run; reopened and checked at the end."""
    directory = tmp_path_factory.mktemp("fuzz") / "memory"
    memory = memcore.open(settings(), path=directory)
    memory.collection.insert([{"id": f"r{i}", "text": f"record {i}", "metadata": {"n": i}, "vectors": {"v": vec(i)}} for i in range(8)])
    holder = {"memory": memory, "directory": directory}
    yield holder
    holder["memory"].close()
    with memcore.open(settings(), path=directory) as again:  # still opens, every record still found
        c = again.collection
        assert {i["name"]: i["status"] for i in c.list_indexes()} == {"exact": "ok", "flat": "ok"}
        total = c.count()
        for rid in c.ids():
            record = c.get(rid)
            if "v" in record.vectors:  # found, and scored like the best hit (fuzzed vectors repeat directions)
                for name in ("exact", "flat"):
                    hits = c.retrieve({"vectors": {"v": record.vectors["v"]}}, index=name, k=total, with_records=False)
                    scores = {h.id: h.score for h in hits}
                    assert rid in scores and scores[rid] >= hits[0].score - 1e-4 * max(1.0, abs(hits[0].score))


def attempt(memory, call):
    """Run ``call``; a memcore error must leave the store unchanged; anything else propagates."""
    before = snapshot(memory)
    try:
        call()
    except MemcoreError:
        assert snapshot(memory) == before


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([1e20, 3e38, -3e38, 1e-30, 1e-45, 0.0, 2.0**62, 1e18, 9.9e17]),
)
VECTORS = st.one_of(
    st.lists(_FLOATS, min_size=DIM, max_size=DIM).map(np.array),
    st.lists(_FLOATS, min_size=0, max_size=DIM + 3),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=DIM, max_size=DIM).map(lambda v: np.array(v, dtype=np.int64)),
    st.builds(lambda x: np.full(DIM, x), _FLOATS),
    st.sampled_from(["abc", None, 5, {"a": 1}, [[1.0] * DIM], b"\x00" * DIM * 4, [1j] * DIM]),
)

_KEYS = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.sampled_from(["", "\x00", "a\x00", "\ud800", None]))
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\x00", "\ud800", b"bytes", {1, 2}, object()]),
)
JSONISH = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=12)


def _deep(depth: int) -> dict:
    value: dict = {"x": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


METADATA = st.one_of(JSONISH, st.integers(0, 1200).map(_deep), st.dictionaries(_KEYS, JSONISH, max_size=4))


@FUZZ
@given(vector=VECTORS, write=st.sampled_from(["insert", "upsert", "update", "memory_insert", "query"]))
def test_fuzz_vectors(shared, vector, write):
    memory = shared["memory"]
    c = memory.collection
    calls = {
        "insert": lambda: c.insert([{"text": "fuzz vector", "vectors": {"v": vector}}]),
        "upsert": lambda: c.upsert([{"id": "r1", "text": "record 1", "metadata": {"n": 1}, "vectors": {"v": vector}}]),
        "update": lambda: c.update("r2", vectors={"v": vector}),
        "memory_insert": lambda: memory.insert("fuzz memory insert", vector=vector),
        "query": lambda: c.retrieve({"vectors": {"v": vector}}, index="flat"),
    }
    attempt(memory, calls[write])


@FUZZ
@given(metadata=METADATA, where=st.one_of(st.none(), st.dictionaries(st.sampled_from(["n", "$and", "$or", "x", ""]), JSONISH, max_size=2)))
def test_fuzz_metadata_and_filters(shared, metadata, where):
    memory = shared["memory"]
    c = memory.collection
    attempt(memory, lambda: c.insert([{"text": "fuzz metadata", "metadata": metadata, "vectors": {"v": vec(99)}}]))
    attempt(memory, lambda: c.update("r3", metadata=metadata, merge_metadata=True))
    attempt(memory, lambda: c.count(where=where))
    attempt(memory, lambda: c.retrieve({"vectors": {"v": vec(3)}}, index="exact", where=where))
    attempt(memory, lambda: c.set_state({("fuzz", "k"): metadata}))


OPTION_VALUES = st.one_of(
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.none(),
    st.booleans(),
    st.sampled_from(["HNSW0", "HNSW1", "IVF0,Flat", "PQ4x2", "Flat", "HNSW8", "IVF4,Flat", "PQ4x4", "l2", "ip", "cosine"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.floats(), max_size=2),
)
OPTION_NAMES = st.sampled_from(
    [
        "factory",
        "metric",
        "space",
        "ef_search",
        "ef_construction",
        "nprobe",
        "min_train",
        "params",
        "score_threshold",
        "compact_fraction",
        "omp_threads",
        "exact_filter_below",
        "blas_min_queries",
        "bogus",
    ]
)


@FUZZ
@given(
    kind=st.sampled_from(["exact", "faiss", "nope", ""]),
    options=st.dictionaries(OPTION_NAMES, OPTION_VALUES, max_size=4),
    extras=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["faiss", "x", 1]),
            st.dictionaries(st.sampled_from(["ef_search", "nprobe", "exact", "score_threshold", "bad"]), OPTION_VALUES, max_size=2),
            max_size=2,
        ),
        st.lists(st.integers(), max_size=2),
    ),
    k=st.one_of(st.integers(-3, 2**40), st.sampled_from([True, 2.5, "3", None])),
)
def test_fuzz_settings_and_query_options(shared, kind, options, extras, k):
    memory = shared["memory"]
    c = memory.collection
    options = {"space": "v", **options} if kind in ("exact", "faiss") and "space" not in options else options

    def create_and_use():
        c.create_index("fuzzed", kind, **options)
        try:
            c.insert_to_index("fuzzed", c.ids())
            c.retrieve({"vectors": {"v": vec(1)}}, index="fuzzed", k=3)
        finally:
            c.drop_index("fuzzed")

    attempt(memory, create_and_use)
    attempt(memory, lambda: c.retrieve({"vectors": {"v": vec(1)}, "extras": extras}, index="flat", k=k))


CLI_ARGS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "query",
                "info",
                "ingest",
                "plugins",
                "--json",
                "--k",
                "-k",
                "0",
                "-1",
                "99999999999999",
                "--index",
                "flat",
                "--where",
                '{"n": {"$gt": 1}}',
                "{not json",
                "[1]",
                "--config",
                "/nonexistent.toml",
                "--check",
                "--path",
            ]
        ),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    ),
    max_size=6,
)


@FUZZ
@given(args=CLI_ARGS)
def test_fuzz_cli(shared, args):
    from memcore.cli import main

    memory = shared["memory"]
    directory = shared["directory"]
    args = [a if a != "--path" else f"--path={directory}" for a in args]
    before = snapshot(memory)
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert isinstance(result.exception, MemcoreError), (args, repr(result.exception))
    # no traceback printed (`plugins --json` reports a broken plugin's traceback inside a JSON
    # string, its newlines escaped: the installed test fixtures include broken plugins)
    assert not any(line.startswith("Traceback (most recent call last)") for line in result.output.splitlines())
    assert snapshot(memory) == before
