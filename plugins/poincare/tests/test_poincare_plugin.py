"""The ``poincare`` plugin is installed, registers the index kind ``poincare`` and the
service ``hyperamy``, and loading it imports neither chromadb nor any other heavy library."""

from memcore._plugins._host import get_registry
from memcore.testing import HEAVY_MODULES, PluginRegistrationContract

from memcore_poincare import HyperAmyService, HyperAmyServiceConfig, PoincareIndexConfig


class TestPoincareRegistration(PluginRegistrationContract):
    plugin = "poincare"
    registers = {
        "indexes": {"poincare": (None, PoincareIndexConfig)},
        "services": {"hyperamy": (HyperAmyService, HyperAmyServiceConfig)},
    }
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
        "sqlite3",  # chroma_state: Chroma's write position, read-only
        "zlib",  # snapshot: CRC-32 of the snapshot files
        "faiss",  # mirror: the exact cone (imported on first search)
    }
    light_imports = ("memcore_poincare", "memcore_poincare:PoincareIndex", "memcore_poincare.storage", "memcore_poincare.retrieval")


def test_the_index_config_parses_from_settings():
    config = (
        get_registry()
        .get("indexes", "poincare")
        .parse_config({"curvature": 0.5, "f": {"law": "exponential", "half_life": 60}, "connection": {"mode": "http", "port": 8123}}, "indexes.emo")
    )
    assert (config.curvature, config.f.law, config.f.half_life, config.g.law, config.connection.port) == (0.5, "exponential", 60.0, "identity", 8123)
