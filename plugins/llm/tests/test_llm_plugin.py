"""The ``llm`` plugin is installed, loads through the plugin host and registers its LLM kinds and
its ``llm_rerank`` stage (whose config model parses settings as documented); loading it starts
no server and imports no model library."""

import pytest

import memcore
from memcore import ConfigError
from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

import memcore_llm


class TestLLMRegistration(PluginRegistrationContract):
    plugin = "llm"
    registers = {
        "stages": {"llm_rerank": (memcore_llm.LLMRerankStage, memcore_llm.LLMRerankConfig)},
        "llms": {
            "openai": (memcore_llm.ChatClient, memcore_llm.ChatConfig),
            "llama_server": (memcore_llm.LlamaServerLLM, memcore_llm.LlamaServerConfig),
        },
    }


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
        assert type(config) is memcore_llm.LlamaServerConfig and config.kind == "llama_server" and config.max_tokens == 32
