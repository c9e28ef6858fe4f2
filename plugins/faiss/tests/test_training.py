"""Training of trainable indexes: polysemous training off, a bounded training sample."""

from __future__ import annotations

import numpy as np
import pytest

from memcore.plugin import ConfigError
from memcore_faiss.build import import_faiss
from memcore_faiss.training import _nodes, default_train_sample, training_sample

PQ_FACTORIES = ["IVF4,PQ4x4", "PQ4x4", "OPQ4,IVF4,PQ4x4", "IVF4_HNSW8,PQ4x4", "PCA8,PQ4x4"]


@pytest.mark.parametrize("factory", PQ_FACTORIES)
def test_factory_turns_polysemous_training_on_and_the_index_turns_it_off(make, kit, factory):
    faiss = import_faiss()
    raw = faiss.index_factory(16, factory, faiss.METRIC_L2)
    assert any(getattr(node, "do_polysemous_training", False) for node in _nodes(faiss, raw))  # what faiss does by default
    index = make(16, factory=factory, metric="l2", min_train=256)  # OPQ trains 256 centroids of its own
    for part in (index._main.index, index._layout.new_index()):
        assert not any(getattr(node, "do_polysemous_training", False) for node in _nodes(faiss, part))
    base = kit.clustered(300, 16)
    index.add(kit.records(base))  # trains
    assert index.trained and index.stats()["trained_on"] == 300
    assert not any(getattr(node, "do_polysemous_training", False) for node in _nodes(faiss, index._main.index))
    assert [h.id for h in index.search(kit.query(base[3]), 1)] == ["r3"]


def test_training_sees_at_most_train_sample_vectors_and_all_are_added(make, kit):
    base = kit.clustered(400, 16)
    index = make(16, factory="IVF4,Flat", metric="l2", min_train=100, train_sample=150, nprobe=4)
    index.add(kit.records(base[:50]))
    assert not index.trained and index.stats()["trained_on"] is None
    index.add(kit.records(base[50:], start=50))  # 400 collected when it trains
    stats = index.stats()
    assert stats["trained_on"] == 150 and stats["train_sample"] == 150
    assert stats["faiss_ntotal"] == 400 == len(index) and stats["pending"] == 0
    assert [index.search(kit.query(base[i]), 1)[0].id for i in (0, 120, 399)] == ["r0", "r120", "r399"]  # all added


def test_fewer_vectors_than_the_bound_all_train(make, kit):
    index = make(16, factory="IVF4,PQ4x4", metric="l2", min_train=100, nprobe=4)
    index.add(kit.records(kit.clustered(120, 16)))
    assert index.stats()["trained_on"] == 120


def test_the_sample_is_seeded(make, kit):
    base = kit.clustered(300, 16, seed=3)
    hits = []
    for _ in range(2):
        index = make(16, factory="IVF4,PQ4x4", metric="l2", min_train=64, train_sample=80, nprobe=1)
        index.add(kit.records(base))
        hits.append([(h.id, h.raw) for h in index.search(kit.query(base[7]), 5)])
    assert hits[0] == hits[1]
    sample = training_sample(base, 80)
    assert sample.shape == (80, 16) and np.array_equal(sample, training_sample(base, 80))
    assert training_sample(base, 300) is base


def test_trained_on_survives_a_save(make, kit, tmp_path):
    index = make(16, factory="IVF4,PQ4x4", metric="l2", min_train=100, train_sample=120, nprobe=4)
    index.add(kit.records(kit.clustered(200, 16)))
    index.save(tmp_path)
    again = make(16, factory="IVF4,PQ4x4", metric="l2", min_train=100, train_sample=120, nprobe=4)
    again.load(tmp_path)
    assert again.stats()["trained_on"] == 120 and len(again) == 200


def test_default_train_sample(make):
    assert default_train_sample(16) == 65_536
    assert make(8, factory="IVF16,PQ4").stats()["train_sample"] == 65_536
    assert make(8, factory="IVF1024,Flat").stats()["train_sample"] == 256 * 1024
    assert make(8, factory="SQ8").stats()["train_sample"] == 65_536
    assert make(8, factory="HNSW32").stats()["train_sample"] == 0


def test_train_sample_below_the_centroids_is_refused(make):
    with pytest.raises(ConfigError, match="train_sample=100 is below the 256 centroids") as info:
        make(16, factory="IVF8,PQ4", train_sample=100)
    assert info.value.location == "indexes.vec.train_sample"
