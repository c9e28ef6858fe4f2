"""The ``bm25`` index kind is registered by the fifo-kv plugin, and loading the plugin
imports neither bm25s nor PyStemmer (only building a bm25 index does)."""

from __future__ import annotations

import subprocess
import sys

from memcore.plugins import PluginHost

from memcore_fifo_kv.bm25 import BM25Config, BM25Index


def test_bm25_is_registered(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["fifo-kv"]
    assert info.error is None
    assert "bm25" in info.registers["indexes"]
    reg = host.registry.get("indexes", "bm25")
    assert (reg.factory, reg.config_model, reg.plugin) == (BM25Index, BM25Config, "fifo-kv")
    config = reg.parse_config({"stemmer": "none", "merge_threshold": 10}, "indexes.kw")
    assert isinstance(config, BM25Config) and config.stemmer is None and config.k1 == 1.2


def test_loading_the_plugin_imports_no_bm25s():
    code = (
        "import sys; from memcore.plugins import PluginHost; host = PluginHost(); "
        "assert host.infos['fifo-kv'].error is None; "
        "print(sorted(m for m in ('bm25s', 'Stemmer', 'scipy') if m in sys.modules)); "
        "from memcore import IndexContext; from memcore_fifo_kv.bm25 import BM25Config, BM25Index; "
        "BM25Index(BM25Config(), IndexContext('kw')); print('bm25s' in sys.modules and 'Stemmer' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "True"]
