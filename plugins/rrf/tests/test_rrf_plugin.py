"""The ``rrf`` plugin is installed, loads through the plugin host and registers its fusions."""

import ast
from importlib.metadata import entry_points
from pathlib import Path

from memcore.plugins import PluginHost

import memcore_rrf


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "rrf"]
    assert found, "memcore-rrf is not installed (pip install -e ./plugins/rrf)"
    assert found[0].value == "memcore_rrf"
    assert found[0].dist.metadata["Name"] == "memcore-rrf"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["rrf"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-rrf"


def test_registers_its_fusions_and_leaves_the_builtin_rrf_alone(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["rrf"]
    assert info.hooks == ["register_fusions"]
    assert info.registers == {"fusions": ["weighted", "dbsf", "union"]}
    expected = {
        "weighted": (memcore_rrf.WeightedFusion, memcore_rrf.WeightedConfig),
        "dbsf": (memcore_rrf.DistributionBasedFusion, memcore_rrf.DBSFConfig),
        "union": (memcore_rrf.UnionFusion, memcore_rrf.UnionConfig),
    }
    for name, (factory, model) in expected.items():
        reg = host.registry.get("fusions", name)
        assert reg.plugin == "rrf"
        assert reg.factory is factory and reg.config_model is model
    # the core keeps rrf and concat
    assert host.registry.get("fusions", "rrf").plugin == "memcore.default_plugins.fusions"
    assert host.registry.get("fusions", "concat").plugin == "memcore.default_plugins.fusions"


def test_only_the_plugin_is_allowed(monkeypatch):
    monkeypatch.setenv("MEMCORE_PLUGINS", "rrf")
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    assert {n for n, i in host.infos.items() if not i.builtin} == {"rrf"}
    assert {"weighted", "dbsf", "union", "rrf", "concat"} == set(host.registry.names("fusions"))


def test_the_plugin_imports_only_memcore_numpy_pydantic_and_the_stdlib():
    for path in Path(memcore_rrf.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots.add(node.module.split(".")[0])
        assert roots <= {"__future__", "memcore", "numpy", "pydantic", "math", "numbers", "typing", "dataclasses"}, (path.name, roots)
