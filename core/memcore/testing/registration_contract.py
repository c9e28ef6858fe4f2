"""``PluginRegistrationContract``: an installed plugin loads and registers what it says it does."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pytest

from .._plugins._host import ENTRY_POINT_GROUP, PluginHost, PluginInfo
from .options import undescribed_options
from .plugin_api import dependency_packages, plugin_api_violations

__all__ = ["PluginRegistrationContract", "HEAVY_MODULES"]

HEAVY_MODULES: tuple[str, ...] = (
    "faiss",
    "torch",
    "sentence_transformers",
    "transformers",
    "bm25s",
    "Stemmer",
    "networkx",
    "spacy",
    "scipy",
    "sklearn",
)
"""Libraries no plugin may import when it is loaded (every ``memcore`` start loads them all)."""

_ENV = ("MEMCORE_PLUGINS", "MEMCORE_DISABLE_PLUGINS")

# Run in a fresh interpreter: load only the plugin, import what the test names, report
# which heavy modules got imported.
_PROBE = """
import importlib, json, sys
from memcore._plugins._host import PluginHost
plugin, imports, heavy = json.loads(sys.argv[1])
info = PluginHost().infos.get(plugin)
for name in imports:
    module, _, attribute = name.partition(":")
    value = importlib.import_module(module)
    if attribute:
        getattr(value, attribute)
print(json.dumps({"error": None if info is None else info.error, "loaded": info is not None,
                  "heavy": sorted(m for m in heavy if m in sys.modules)}))
"""


class PluginRegistrationContract:
    """Contract tests for an installed plugin distribution. Subclass it and set the class
    attributes (no fixture to write)::

        from memcore.testing import PluginRegistrationContract
        from memcore_keyword import KeywordIndex, KeywordIndexConfig

        class TestRegistration(PluginRegistrationContract):
            plugin = "keyword"  # the entry-point name
            registers = {"indexes": {"keyword": (KeywordIndex, KeywordIndexConfig)}}

    ``registers`` maps a category (``stores``, ``embedders``, ``indexes``, ``stages``,
    ``fusions``, ``services``) to the names registered there, each with the expected
    ``(factory, config_model)``; either may be None to leave it unchecked (a factory that
    is a private builder function, say).

    Checked: the entry point ``plugin`` of group ``memcore`` is installed and points at
    ``module`` (default ``memcore_<plugin>``) of the distribution ``distribution`` (default
    ``memcore-<plugin>``); the plugin host loads it without error, as a third-party plugin
    with the distribution's version; it implements exactly the hooks of the categories in
    ``registers`` (plus ``other_hooks``, such as ``register_commands``) and registers exactly those names, each owned by the plugin, with the
    expected factory and config model, whose defaults validate and whose every option (each
    field but ``kind``) has a description; each of its
    ``deprecated_names`` resolves to its kind with a DeprecationWarning; with
    ``MEMCORE_PLUGINS=<plugin>`` it is the only third-party plugin loaded. In a fresh
    interpreter, loading the plugin (and importing each of ``light_imports``: module
    names, or ``module:attribute``) imports none of ``heavy_modules`` (default
    :data:`HEAVY_MODULES`). The plugin's modules import memcore only through the plugin
    API (names in ``memcore.__all__`` and ``memcore.testing``) and import no other plugin
    (:func:`memcore.testing.plugin_api.plugin_api_violations`, read from their source);
    ``memcore_*`` packages of the library distributions it declares as dependencies (no
    ``memcore`` entry point: :func:`~memcore.testing.plugin_api.dependency_packages`) may be
    imported, and their modules must keep to the plugin API too.
    When ``allowed_imports`` is set, they import only those top-level packages.
    """

    plugin: ClassVar[str] = ""
    module: ClassVar[str | None] = None
    distribution: ClassVar[str | None] = None
    registers: ClassVar[Mapping[str, Mapping[str, tuple[Any, Any] | None]]] = {}
    heavy_modules: ClassVar[Sequence[str]] = HEAVY_MODULES
    light_imports: ClassVar[Sequence[str]] = ()
    allowed_imports: ClassVar[frozenset[str] | set[str] | None] = None
    #: hooks implemented besides the ``register_<category>`` ones (e.g. ``register_commands``)
    other_hooks: ClassVar[Sequence[str]] = ()

    # -- helpers ------------------------------------------------------------------------

    @classmethod
    def _names(cls) -> tuple[str, str, str]:
        if not cls.plugin:
            pytest.fail(f"{cls.__name__} must set the class attribute 'plugin' (see PluginRegistrationContract)")
        module = cls.module or f"memcore_{cls.plugin.replace('-', '_')}"
        return cls.plugin, module, cls.distribution or f"memcore-{cls.plugin}"

    def _info(self, host: PluginHost) -> PluginInfo:
        plugin, _, distribution = self._names()
        assert plugin in host.infos, f"the plugin host did not load {plugin!r}; is {distribution} installed?"
        return host.infos[plugin]

    @pytest.fixture
    def plugin_host(self, monkeypatch: pytest.MonkeyPatch) -> PluginHost:
        """A fresh plugin host loading every installed plugin (the allow/deny lists unset)."""
        for name in _ENV:
            monkeypatch.delenv(name, raising=False)
        return PluginHost()

    # -- the tests ----------------------------------------------------------------------

    def test_entry_point_is_installed(self) -> None:
        plugin, module, distribution = self._names()
        found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == plugin]
        assert found, f"{distribution} is not installed (pip install -c constraints.txt -e ./plugins/{plugin})"
        assert found[0].value == module
        dist = found[0].dist
        assert dist is not None and dist.metadata["Name"] == distribution

    def test_plugin_host_loads_it(self, plugin_host: PluginHost) -> None:
        _, _, distribution = self._names()
        info = self._info(plugin_host)
        assert info.error is None
        assert info.builtin is False
        assert info.distribution == distribution
        assert info.version == metadata.version(distribution)

    def test_it_registers_exactly_what_it_declares(self, plugin_host: PluginHost) -> None:
        info = self._info(plugin_host)
        assert {c: sorted(names) for c, names in info.registers.items()} == {c: sorted(names) for c, names in self.registers.items() if names}
        assert info.hooks == sorted([f"register_{c}" for c, names in self.registers.items() if names] + list(self.other_hooks))

    def test_registrations_have_the_declared_factories_and_config_models(self, plugin_host: PluginHost) -> None:
        plugin, _, _ = self._names()
        for category, names in self.registers.items():
            for name, expected in names.items():
                reg = plugin_host.registry.get(category, name)
                assert reg.plugin == plugin, (category, name)
                factory, config_model = expected or (None, None)
                if factory is not None:
                    assert reg.factory is factory, (category, name, reg.factory)
                if config_model is not None:
                    assert reg.config_model is config_model, (category, name, reg.config_model)
                defaults = reg.config_model.model_fields
                if all(not field.is_required() for key, field in defaults.items() if key != "kind"):
                    assert reg.parse_config({}, f"{category}.{name}").kind == name

    def test_every_option_has_a_description(self, plugin_host: PluginHost) -> None:
        plugin, _, _ = self._names()
        missing = {
            f"{category} {reg.name!r} ({reg.config_model.__name__})": undescribed_options(reg.config_model)
            for category, entries in plugin_host.registry.entries.items()
            for reg in entries.values()
            if reg.plugin == plugin and undescribed_options(reg.config_model)
        }
        assert not missing, f'options without a description (declare each as Field(<default>, description="..."), docs/plugins/writing.md): {missing}'

    def test_deprecated_names_resolve_to_their_kind_with_a_warning(self, plugin_host: PluginHost) -> None:
        plugin, _, _ = self._names()
        for category, entries in plugin_host.registry.entries.items():
            for reg in entries.values():
                for old in reg.deprecated_names if reg.plugin == plugin else ():
                    with pytest.warns(DeprecationWarning, match=re.escape(f"kind {old!r} is deprecated: write {reg.name!r}")):
                        assert plugin_host.registry.get(category, old) is reg

    def test_the_allow_list_loads_only_this_plugin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        plugin, _, _ = self._names()
        monkeypatch.setenv("MEMCORE_PLUGINS", plugin)
        monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
        host = PluginHost()
        assert {n for n, i in host.infos.items() if not i.builtin} == {plugin}
        for category, names in self.registers.items():
            assert set(names) <= set(host.registry.names(category))

    def test_loading_it_imports_no_heavy_library(self) -> None:
        plugin, _, _ = self._names()
        env = {k: v for k, v in os.environ.items() if k not in _ENV}
        env["MEMCORE_PLUGINS"] = plugin  # this plugin only: another one's imports are not its fault
        args = json.dumps([plugin, list(self.light_imports), list(self.heavy_modules)])
        result = subprocess.run([sys.executable, "-c", _PROBE, args], capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["loaded"] and report["error"] is None, report
        assert report["heavy"] == [], f"loading {plugin} imported {report['heavy']}; import them inside the factory that needs them"

    def test_its_modules_import_only_the_plugin_api(self) -> None:
        _, module, distribution = self._names()
        libraries = dependency_packages(distribution)
        problems = []
        for package in (module, *sorted(libraries)):
            spec = importlib.util.find_spec(package)
            if spec is None and package != module:
                continue  # a declared library that is not importable: nothing of it can be imported either
            assert spec is not None and spec.submodule_search_locations, f"{package} is not an installed package"
            own = package.split(".")[0]
            for location in spec.submodule_search_locations:
                problems += plugin_api_violations(Path(location), own, libraries=libraries - {own})
        assert not problems, "imports outside memcore's plugin API (docs/plugins/writing.md):\n" + "\n".join(problems)

    def test_its_modules_import_only_the_allowed_packages(self) -> None:
        if self.allowed_imports is None:
            pytest.skip("allowed_imports is not set")
        _, module, _ = self._names()
        package = importlib.import_module(module)
        assert package.__file__ is not None, f"{module} has no __file__"
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            roots: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    roots.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    roots.add(node.module.split(".")[0])
            assert roots <= set(self.allowed_imports), (path.name, sorted(roots - set(self.allowed_imports)))
