"""The ``hyperamy`` service: ServiceContract, particles with v/T, retrieval with time evolution."""

from __future__ import annotations

import pytest

import memcore
from memcore import ValidationError
from memcore.testing import ServiceContract


def settings(**service):
    return {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}},
        "service": {"kind": "hyperamy", **service},
    }


class TestHyperAmyContract(ServiceContract):
    # a particle is born when it is inserted: the same text inserted again is a new particle
    idempotent_inserts = False

    @pytest.fixture
    def open_memory(self):
        return lambda path: memcore.open(settings(), path=path)


def test_intensity_and_time_evolution(tmp_path):
    memory = memcore.open(settings(index_options={"f": {"law": "exponential", "half_life": 100.0}}), path=tmp_path)
    text = "I am so angry about the cancelled trip"
    strong = memory.service.insert(text, metadata={"who": "me"}, v=2.0, T=0.4, born=0.0)
    weak = memory.service.insert(text + " again", v=0.5, born=1000.0)
    assert memory.collection.get(strong).metadata == {"who": "me", "hyperamy_v": 2.0, "hyperamy_T": 0.4, "hyperamy_born": 0.0}
    at_birth = memory.service.retrieve(text, k=2, v=2.0, t_now=0.0)
    assert at_birth[0]["id"] == strong and at_birth[0]["metadata"] == {"who": "me"}
    assert at_birth[0]["score"] == pytest.approx(0.0, abs=1e-5)
    # 1000 s later the strong memory has decayed (2.0 / 2^10): a weak query now finds the fresh, weak one first
    later = memory.service.retrieve(text + " again", k=2, v=0.5, t_now=1000.0)
    assert [r["id"] for r in later] == [weak, strong]
    memory.close()


def test_links_bring_neighbours(tmp_path):
    memory = memcore.open(settings(), path=tmp_path)
    calm = memory.service.insert("a quiet afternoon reading in the garden", v=0.5)
    anger = memory.service.insert("shouting match with the landlord", v=1.5, links=[calm])
    hits = memory.service.retrieve("shouting match with the landlord", k=2, v=1.5, cone_width=1, neighbor_penalty=1.3)
    assert [h["id"] for h in hits] == [anger, calm]
    memory.close()


def test_bad_service_input(tmp_path):
    memory = memcore.open(settings(), path=tmp_path)
    with pytest.raises(ValidationError):
        memory.service.insert("x", metadata={"hyperamy_v": 1.0})
    for kwargs in ({"v": -1.0}, {"v": float("nan")}, {"T": "hot"}, {"born": float("inf")}, {"colour": "red"}):
        with pytest.raises(ValidationError):
            memory.service.insert("x", **kwargs)
    assert memory.collection.count() == 0
    memory.service.insert("something", v=1.0)
    for kwargs in ({"v": -1.0}, {"cone_width": 0}, {"neighbor_penalty": 0.5}, {"colour": "red"}):
        with pytest.raises(ValidationError):
            memory.service.retrieve("something", **kwargs)
    memory.close()
