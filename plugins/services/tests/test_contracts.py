"""Every service passes memcore's ServiceContract (and the plugin registers them all)."""

from __future__ import annotations

import pytest
from memcore.testing import PluginRegistrationContract, ServiceContract

import memcore_services


class TestRegistration(PluginRegistrationContract):
    plugin = "services"
    registers = {
        "services": {
            "short_term_memory": (memcore_services.ShortTermMemory, memcore_services.ShortTermMemoryConfig),
            "memoryos": (memcore_services.MemoryOS, memcore_services.MemoryOSConfig),
            "hierarchical": (memcore_services.HierarchicalMemory, memcore_services.HierarchicalConfig),
            "vector_hash": (memcore_services.VectorHashMemory, memcore_services.VectorHashConfig),
            "hybrid": (memcore_services.HybridService, memcore_services.HybridConfig),
        },
        "stages": {"expand": (memcore_services.ExpandStage, memcore_services.ExpandConfig)},
    }


class TestShortTermMemory(ServiceContract):
    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "short_term_memory", "max_dialog": 20})


class TestMemoryOS(ServiceContract):
    """Small STM so items reach the MTM segments; MTM large enough that none is summarised and
    no heat promotion, so that every result is an inserted item (LTM entries are derived ones);
    no similarity floor (MemoryOS's 0.1 may rightly return nothing for a filtered query with
    the hashing embedder, the contract asks for a result)."""

    @pytest.fixture
    def open_memory(self, opener):
        service = {"kind": "memoryos", "stm_capacity": 3, "mtm_capacity": 50, "heat_threshold": None, "segment_min_sim": -1, "page_min_sim": -1}
        return lambda path: opener(path, service)


class TestHierarchicalThreeTier(ServiceContract):
    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 3}})


class TestHierarchicalFunctionalHeat(ServiceContract):
    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "hierarchical", "layout": "functional", "migration": "heat", "capacities": {"episodic": 3}})


class TestVectorHash(ServiceContract):
    """Thoughts given as they are (the pipeline's tri_embed + to_refactor path)."""

    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "vector_hash", "extract": False, "bits": 4, "tables": 8})


class TestHybrid(ServiceContract):
    @pytest.fixture
    def open_memory(self, opener):
        return lambda path: opener(path, {"kind": "hybrid"})
