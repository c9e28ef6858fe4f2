"""The ``faiss`` plugin is installed, loads through the plugin host, registers its index kind,
and loading it does not import faiss."""

from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

from memcore_faiss import FaissIndexConfig


class TestFaissRegistration(PluginRegistrationContract):
    plugin = "faiss"
    registers = {"indexes": {"faiss": (None, FaissIndexConfig)}}  # the factory is a builder that imports faiss


def test_the_config_parses_from_settings():
    config = get_registry().get("indexes", "faiss").parse_config({"factory": "HNSW32", "ef_search": 64}, "indexes.vec")
    assert (config.kind, config.factory, config.metric, config.space) == ("faiss", "HNSW32", "cosine", "default")
