"""The ``fifo-kv`` plugin is installed, loads through the plugin host and registers its two
index kinds (``bm25`` moved to memcore-bm25: ``plugins/bm25/tests/test_bm25_plugin.py``)."""

from memcore.testing import PluginRegistrationContract

from memcore_fifo_kv import FifoIndex, FifoIndexConfig, SortedIndex, SortedIndexConfig


class TestFifoKVRegistration(PluginRegistrationContract):
    plugin = "fifo-kv"
    registers = {
        "indexes": {
            "fifo": (FifoIndex, FifoIndexConfig),
            "sorted": (SortedIndex, SortedIndexConfig),
        }
    }
    light_imports = ("memcore_fifo_kv.fifo", "memcore_fifo_kv.sorted_index")
