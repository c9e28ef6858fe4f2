"""The ``mmr`` plugin is installed, loads through the plugin host and registers its stage."""

import ast
from importlib.metadata import entry_points
from pathlib import Path

from memcore.plugins import PluginHost

import memcore_mmr


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "mmr"]
    assert found, "memcore-mmr is not installed (pip install -e ./plugins/mmr)"
    assert found[0].value == "memcore_mmr"
    assert found[0].dist.metadata["Name"] == "memcore-mmr"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["mmr"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-mmr"


def test_registers_the_mmr_stage(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["mmr"]
    assert info.hooks == ["register_stages"]
    assert info.registers == {"stages": ["mmr"]}
    reg = host.registry.get("stages", "mmr")
    assert reg.plugin == "mmr"
    assert reg.factory is memcore_mmr.MMRStage and reg.config_model is memcore_mmr.MMRConfig


def test_the_plugin_imports_only_memcore_numpy_pydantic_and_the_stdlib():
    for path in Path(memcore_mmr.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots.add(node.module.split(".")[0])
        assert roots <= {"__future__", "memcore", "numpy", "pydantic", "re", "typing"}, (path.name, roots)
