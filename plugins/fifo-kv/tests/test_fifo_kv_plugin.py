"""The ``fifo-kv`` plugin is installed, loads through the plugin host and registers its three
index kinds; loading it imports neither bm25s nor PyStemmer (only building a bm25 index does)."""

from memcore.testing import PluginRegistrationContract

from memcore_fifo_kv import FifoIndex, FifoIndexConfig, SortedIndex, SortedIndexConfig
from memcore_fifo_kv.bm25 import BM25Config, BM25Index


class TestFifoKVRegistration(PluginRegistrationContract):
    plugin = "fifo-kv"
    registers = {
        "indexes": {
            "fifo": (FifoIndex, FifoIndexConfig),
            "sorted": (SortedIndex, SortedIndexConfig),
            "bm25": (BM25Index, BM25Config),
        }
    }
    light_imports = ("memcore_fifo_kv.fifo", "memcore_fifo_kv.sorted_index", "memcore_fifo_kv.bm25")
