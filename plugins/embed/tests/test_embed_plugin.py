"""The ``embed`` plugin is installed, loads through the plugin host and registers its embedders
and its ``llm_rerank`` stage."""

import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from memcore import ConfigError
from memcore.plugins import PluginHost

import memcore_embed


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "embed"]
    assert found, "memcore-embed is not installed (pip install -e ./plugins/embed)"
    assert found[0].value == "memcore_embed"
    assert found[0].dist.metadata["Name"] == "memcore-embed"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["embed"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-embed"
    assert info.registers == {"embedders": ["minilm", "openai"], "stages": ["llm_rerank"]}
    assert info.hooks == ["register_embedders", "register_stages"]


def test_registered_factories_and_config_models(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    registry = PluginHost().registry
    minilm = registry.get("embedders", "minilm")
    openai = registry.get("embedders", "openai")
    assert minilm.plugin == openai.plugin == "embed"
    assert minilm.config_model is memcore_embed.MiniLMConfig
    assert openai.config_model is memcore_embed.OpenAIEmbedderConfig
    config = minilm.parse_config({}, "spaces.default.embedder")
    assert (config.batch_size, config.normalize, config.device, config.model_path, config.max_seq_length) == (32, True, "cpu", None, None)
    with pytest.raises(ConfigError, match=r"spaces\.default\.embedder\.batch_size"):
        minilm.parse_config({"batch_size": 0}, "spaces.default.embedder")
    with pytest.raises(ConfigError, match=r"spaces\.x\.embedder\.bogus"):
        minilm.parse_config({"bogus": 1}, "spaces.x.embedder")
    with pytest.raises(ConfigError, match=r"spaces\.x\.embedder\.dim"):
        openai.parse_config({"model": "m"}, "spaces.x.embedder")


def test_registered_stage(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    stage = PluginHost().registry.get("stages", "llm_rerank")
    assert stage.plugin == "embed"
    assert stage.factory is memcore_embed.LLMRerankStage
    assert stage.config_model is memcore_embed.LLMRerankConfig
    config = stage.parse_config({"llm": {"base_url": "http://127.0.0.1:8080/v1", "model": "m"}}, "pipeline[1]")
    assert (config.top_n, config.batch, config.fallback, config.max_chars) == (20, None, "keep", 500)
    assert isinstance(config.llm, memcore_embed.ChatConfig)
    with pytest.raises(ConfigError, match=r"pipeline\[1\]\.llm"):
        stage.parse_config({}, "pipeline[1]")


def test_loading_the_plugin_imports_no_torch():
    code = (
        "import sys\n"
        "from memcore.plugins import PluginHost\n"
        "host = PluginHost()\n"
        "assert host.infos['embed'].error is None\n"
        "from memcore_embed import MiniLMEmbedder\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
