"""The ``graph`` plugin is installed, loads through the plugin host, registers its index and
its stage, and imports networkx (and spaCy) only when an index is built."""

from memcore.plugin import IndexContext
from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

from memcore_graph import GraphIndexConfig, GraphRecall, GraphRecallConfig


class TestGraphRegistration(PluginRegistrationContract):
    plugin = "graph"
    registers = {
        "indexes": {"graph": (None, GraphIndexConfig)},  # the factory is a builder that imports networkx
        "stages": {"graph_recall": (GraphRecall, GraphRecallConfig)},
    }
    light_imports = ("memcore_graph:GraphIndex",)  # the index module imports networkx only when building


def test_registered_index_builds_from_settings():
    from memcore_graph.index import GraphIndex

    reg = get_registry().get("indexes", "graph")
    config = reg.parse_config({"directed": False, "decay": 0.5}, "indexes.links")
    index = reg.factory(config, IndexContext("links"))
    assert isinstance(index, GraphIndex) and index.config.decay == 0.5 and not index.graph.is_directed()
    assert index.requires.links and not index.requires.spaces
