"""The ``bm25`` plugin is installed, loads through the plugin host and registers the ``bm25``
index kind; its settings parse, and loading the plugin imports neither bm25s nor PyStemmer
(building an index is what imports them)."""

from __future__ import annotations

import subprocess
import sys

from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

from memcore_bm25 import BM25Config, BM25Index


class TestBM25Registration(PluginRegistrationContract):
    plugin = "bm25"
    registers = {"indexes": {"bm25": (BM25Index, BM25Config)}}
    light_imports = ("memcore_bm25.bm25",)


def test_bm25_settings_parse():
    config = get_registry().get("indexes", "bm25").parse_config({"stemmer": "none", "merge_threshold": 10}, "indexes.kw")
    assert isinstance(config, BM25Config) and config.stemmer is None and config.k1 == 1.2


def test_building_a_bm25_index_imports_bm25s():
    code = (
        "import sys; from memcore import IndexContext; from memcore_bm25.bm25 import BM25Config, BM25Index; "
        "assert 'bm25s' not in sys.modules; "
        "BM25Index(BM25Config(), IndexContext('kw')); print('bm25s' in sys.modules and 'Stemmer' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]
