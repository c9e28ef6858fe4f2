"""The ``embed`` plugin is installed, loads through the plugin host and registers its embedders
(whose config models parse settings as documented); loading it imports no torch."""

import pytest

import memcore
from memcore import ConfigError
from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

import memcore_embed


class TestEmbedRegistration(PluginRegistrationContract):
    plugin = "embed"
    registers = {
        "embedders": {
            "minilm": (memcore_embed.MiniLMEmbedder, memcore_embed.MiniLMConfig),
            "openai": (memcore_embed.OpenAIEmbedder, memcore_embed.OpenAIEmbedderConfig),
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


def test_the_former_error_name_is_memcores_endpoint_error():
    assert memcore_embed.EmbeddingServiceError is memcore.EndpointError
