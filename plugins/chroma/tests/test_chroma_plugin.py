"""The ``chroma`` plugin is installed, registers its index kind, and loading it imports no chromadb."""

from memcore._plugins._host import get_registry
from memcore.testing import HEAVY_MODULES, PluginRegistrationContract

from memcore_chroma import ChromaIndexConfig


class TestChromaRegistration(PluginRegistrationContract):
    plugin = "chroma"
    registers = {"indexes": {"chroma": (None, ChromaIndexConfig)}}
    heavy_modules = (*HEAVY_MODULES, "chromadb")
    allowed_imports = {
        "__future__",
        "dataclasses",
        "json",
        "math",
        "pathlib",
        "re",
        "time",
        "typing",
        "uuid",
        "memcore",
        "numpy",
        "pydantic",
        "chromadb",
        "memcore_chroma_support",
    }
    light_imports = ("memcore_chroma", "memcore_chroma:ChromaIndex", "memcore_chroma_support.home")


def test_the_config_parses_from_settings():
    config = get_registry().get("indexes", "chroma").parse_config({"metric": "l2", "connection": {"mode": "http", "port": 8123, "tenant": "t1"}}, "indexes.vec")
    assert (config.kind, config.metric, config.connection.mode, config.connection.port, config.connection.tenant) == ("chroma", "l2", "http", 8123, "t1")
    assert config.configuration() == {"hnsw": {"space": "l2"}}
