"""The ``pip install`` hints come from the plugin distributions' metadata, not a table in
the core: the root extras + ``[tool.memcore.provides]`` of ``plugins/*/pyproject.toml``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from memcore import UnknownComponentError
from memcore.plugins import PluginHost, get_registry
from memcore.providers import INSTALL_HINT, known_providers, provider_of, providers_from_tree

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))


@pytest.fixture(scope="module")
def host():
    return PluginHost()


@pytest.mark.parametrize("plugin_dir", PLUGINS, ids=lambda p: p.name)
def test_each_plugin_declares_what_it_registers(plugin_dir, host):
    data = tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))
    dist = data["project"]["name"]
    if "memcore" not in data["project"].get("entry-points", {}):  # a library plugins share (memcore-chroma-support)
        assert "provides" not in data.get("tool", {}).get("memcore", {}), f"{dist} has no memcore entry point: it registers nothing"
        return
    loaded = [i for i in host.infos.values() if i.distribution == dist and i.error is None]
    if not loaded:
        pytest.skip(f"{dist} is not installed")
    provides = data.get("tool", {}).get("memcore", {}).get("provides")
    assert provides is not None, f"{plugin_dir}/pyproject.toml needs [tool.memcore.provides] (what {dist} registers)"
    assert {c: sorted(n) for c, n in provides.items()} == {c: sorted(n) for c, n in loaded[0].registers.items()}


def test_hints_come_from_the_checkout():
    providers = known_providers()
    assert providers["indexes"]["bm25"] == "fifo-kv"
    assert providers["stages"]["mmr"] == "mmr"
    assert providers["fusions"]["dbsf"] == "rrf"
    assert provider_of("indexes", "faiss") == "faiss"
    assert provider_of("indexes", "no-such-kind") is None


def test_a_tree_is_read_without_importing_anything(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "memcore"\n[project.optional-dependencies]\n'
        'shiny = ["memcore-shiny @ {root:uri}/plugins/shiny"]\nall = ["memcore-shiny @ {root:uri}/plugins/shiny"]\n'
    )
    (tmp_path / "plugins" / "shiny").mkdir(parents=True)
    (tmp_path / "plugins" / "shiny" / "pyproject.toml").write_text(
        '[project]\nname = "memcore-shiny"\n[project.entry-points.memcore]\nshiny = "memcore_shiny"\n'
        '[tool.memcore.provides]\nindexes = ["sparkle"]\nstages = ["glint"]\n'
    )
    assert providers_from_tree(tmp_path) == {"indexes": {"sparkle": "shiny"}, "stages": {"glint": "shiny"}}


def test_an_unknown_name_hints_the_extra_with_the_constraint_file():
    registry = PluginHost(load_entry_points=False).registry
    with pytest.raises(UnknownComponentError) as info:
        registry.get("indexes", "bm25", location="indexes.words.kind")
    assert info.value.extra == "fifo-kv"
    assert INSTALL_HINT.format(extra="fifo-kv") in str(info.value)
    assert 'pip install -c constraints.txt "memcore[fifo-kv]"' in str(info.value)
    with pytest.raises(UnknownComponentError) as info:
        registry.get("stages", "mmrr")  # a typo of a plugin's name: the closest, and its extra
    assert info.value.closest == "mmr" and info.value.extra == "mmr"
    with pytest.raises(UnknownComponentError) as info:
        get_registry().get("indexes", "faiz")
    assert info.value.closest == "faiss" and info.value.extra is None  # installed: no hint needed
