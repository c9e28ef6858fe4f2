"""The ``pip install`` hints come from the plugin distributions' metadata, not a table in
the core: the root extras + ``[tool.memcore.provides]`` of ``plugins/*/pyproject.toml``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from memcore import UnknownComponentError
from memcore._plugins._host import PluginHost, get_registry
from memcore._plugins import _providers as providers_module
from memcore._plugins._providers import INSTALL_HINT, distribution_of, is_installed, known_providers, provider_of, providers_from_tree

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
    assert providers["indexes"]["bm25"] == "bm25"  # its own extra, though the fifo-kv extra brings it too
    assert providers["indexes"]["fifo"] == "fifo-kv"
    assert providers["stages"]["mmr"] == "mmr"
    assert providers["fusions"]["dbsf"] == providers["fusions"]["rrf"] == "rrf"
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


@pytest.fixture
def nothing_installed(monkeypatch):
    """As on a machine where no plugin distribution is installed."""
    monkeypatch.setattr(providers_module, "is_installed", lambda distribution: False)


def test_an_unknown_name_hints_the_extra_with_the_constraint_file(nothing_installed):
    registry = PluginHost(load_entry_points=False).registry
    with pytest.raises(UnknownComponentError) as info:
        registry.get("indexes", "bm25", location="indexes.words.kind")
    assert info.value.extra == "bm25"
    assert INSTALL_HINT.format(extra="bm25") in str(info.value)
    assert 'pip install -c constraints.txt "memcore[bm25]"' in str(info.value)
    with pytest.raises(UnknownComponentError) as info:
        registry.get("stages", "mmrr")  # a typo of a plugin's name: the closest, and its extra
    assert info.value.closest == "mmr" and info.value.extra == "mmr"
    with pytest.raises(UnknownComponentError) as info:
        get_registry().get("indexes", "faiz")
    assert info.value.closest == "faiss" and info.value.extra is None  # installed: no hint needed


def _message(registry, category: str, name: str) -> UnknownComponentError:
    with pytest.raises(UnknownComponentError) as info:
        registry.get(category, name)
    return info.value


def every_provided_name() -> list[tuple[str, str, str]]:
    return sorted((category, name, extra) for category, names in known_providers().items() for name, extra in names.items())


def test_every_extra_names_its_distribution():
    for _, _, extra in every_provided_name():
        assert distribution_of(extra) == f"memcore-{extra}", extra


@pytest.mark.parametrize(("category", "name", "extra"), every_provided_name())
def test_every_install_hint_carries_the_constraint_file(category, name, extra, nothing_installed):
    error = _message(PluginHost(load_entry_points=False).registry, category, name)
    assert f'pip install -c constraints.txt "memcore[{extra}]"' in str(error)
    assert str(error).count("pip install") == str(error).count("pip install -c constraints.txt")


@pytest.mark.parametrize(("category", "name", "extra"), every_provided_name())
def test_no_hint_ever_names_an_installed_distribution(category, name, extra):
    """Without its entry point loaded, a kind is missing; pip is the fix only when its
    distribution is not installed, else the message says it is installed (see memcore plugins)."""
    error = str(_message(PluginHost(load_entry_points=False).registry, category, name))
    dist = distribution_of(extra)
    if is_installed(dist):
        assert "pip install" not in error, error
        assert f"distribution {dist}, which provides {name!r}, is installed but did not register it" in error and "memcore plugins" in error
    else:
        assert f'pip install -c constraints.txt "memcore[{extra}]"' in error


def test_a_failed_entry_point_of_an_installed_distribution_points_to_its_error():
    if not is_installed("memcore-bm25"):
        pytest.skip("memcore-bm25 is not installed")
    host = PluginHost(load_entry_points=False)
    host.load("bm25", lambda: (_ for _ in ()).throw(ImportError("No module named 'bm25s'")), distribution="memcore-bm25")
    error = str(_message(host.registry, "indexes", "bm25"))
    assert "Plugin 'bm25', which provides it, failed to load (ImportError: No module named 'bm25s')" in error
    assert "pip install" not in error and "memcore plugins" in error
    error = str(_message(host.registry, "indexes", "bm26"))  # a typo of its kind: the closest, still no pip
    assert "Did you mean 'bm25'?" in error and "pip install" not in error


def test_a_plugin_distribution_left_out_by_memcore_plugins_is_not_reinstalled(monkeypatch):
    if not is_installed("memcore-faiss"):
        pytest.skip("memcore-faiss is not installed")
    monkeypatch.setenv("MEMCORE_DISABLE_PLUGINS", "faiss")
    error = str(_message(PluginHost().registry, "indexes", "faiss"))
    assert "distribution memcore-faiss, which provides 'faiss', is installed but did not register it" in error
    assert "MEMCORE_DISABLE_PLUGINS" in error and "pip install" not in error


HINT_SOURCES = sorted(p for root in ("core/memcore", "plugins") for p in (ROOT / root).rglob("*.py") if "tests" not in p.parts and ".venv" not in p.parts)


def test_every_pip_install_in_the_code_carries_the_constraint_file():
    """Hints and docstrings alike: without ``-c constraints.txt`` pip resolves CUDA torch
    (``--no-deps`` installs nothing else, so it needs none)."""
    import ast
    import re

    bad = []
    for path in HINT_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for command in re.findall(r"pip install\s+[^`\n;)&]+", node.value):
                    if "-c constraints.txt" not in command and "--no-deps" not in command:
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {command.strip()}")
    assert not bad, "pip install without -c constraints.txt:\n" + "\n".join(bad)
