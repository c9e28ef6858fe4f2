"""The ``embed`` plugin is installed, loads through the plugin host and registers its embedders
and its ``llm_rerank`` stage (whose config models parse settings as documented); loading it
imports no torch."""

import pytest

import memcore
from memcore import ConfigError
from memcore.plugins import get_registry
from memcore.testing import PluginRegistrationContract

import memcore_embed


class TestEmbedRegistration(PluginRegistrationContract):
    plugin = "embed"
    registers = {
        "embedders": {
            "minilm": (memcore_embed.MiniLMEmbedder, memcore_embed.MiniLMConfig),
            "openai": (memcore_embed.OpenAIEmbedder, memcore_embed.OpenAIEmbedderConfig),
        },
        "stages": {"llm_rerank": (memcore_embed.LLMRerankStage, memcore_embed.LLMRerankConfig)},
        "llms": {
            "openai": (memcore_embed.ChatClient, memcore_embed.ChatConfig),
            "llama_server": (memcore_embed.LlamaServerLLM, memcore_embed.LlamaServerConfig),
        },
    }
    light_imports = ("memcore_embed:MiniLMEmbedder",)


def test_the_embedder_configs_parse_settings():
    registry = get_registry()
    minilm, openai = registry.get("embedders", "minilm"), registry.get("embedders", "openai")
    config = minilm.parse_config({}, "spaces.default.embedder")
    assert (config.batch_size, config.normalize, config.device, config.model_path, config.max_seq_length) == (32, True, "cpu", None, None)
    with pytest.raises(ConfigError, match=r"spaces\.default\.embedder\.batch_size"):
        minilm.parse_config({"batch_size": 0}, "spaces.default.embedder")
    with pytest.raises(ConfigError, match=r"spaces\.x\.embedder\.bogus"):
        minilm.parse_config({"bogus": 1}, "spaces.x.embedder")
    with pytest.raises(ConfigError, match=r"spaces\.x\.embedder\.dim"):
        openai.parse_config({"model": "m"}, "spaces.x.embedder")


def test_the_stage_config_parses_settings():
    stage = get_registry().get("stages", "llm_rerank")
    config = stage.parse_config({"llm": "judge"}, "pipeline[1]")
    assert (config.llm, config.top_n, config.batch, config.fallback, config.max_chars) == ("judge", 20, None, "keep", 500)
    with pytest.raises(ConfigError, match=r"pipeline\[1\]\.llm"):
        stage.parse_config({"llm": {"model": "m"}}, "pipeline[1]")


def test_the_old_spelling_llama_server_still_works_with_a_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match=r"llm kind 'llama-server' \(llms\.default\.kind\) is deprecated: write 'llama_server'"):
        memory = memcore.open({"llms": {"default": {"kind": "llama-server", "max_tokens": 32}}}, path=tmp_path)
    with memory:
        config = memory.llms._configs["default"]  # built on first use: the parsed settings entry
        assert type(config) is memcore_embed.LlamaServerConfig and config.kind == "llama_server" and config.max_tokens == 32
