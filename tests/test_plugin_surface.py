"""The plugin surface is declared once, in :mod:`memcore._plugins.hookspecs`, and derived elsewhere.

``memcore._plugins._registry.CATEGORIES``, ``memcore.plugin.FACTORY_PROTOCOLS``, the plugin host's
list of known hooks and the singular nouns of "unknown <thing> kind" messages must agree
with the hookspecs themselves (issue 21).
"""

from __future__ import annotations

import inspect

import pluggy
import pytest

import memcore
from memcore import ConfigError, UnknownComponentError
from memcore import plugin as factories
from memcore._plugins import hookspecs, _registry as registry
from memcore._plugins._host import _hook_names, get_registry


def _specs() -> dict[str, object]:
    """Every function of :mod:`memcore._plugins.hookspecs` that pluggy takes as a hookspec."""
    pm = pluggy.PluginManager("memcore")
    pm.add_hookspecs(hookspecs)
    return {name: getattr(hookspecs, name) for name in dir(hookspecs) if getattr(pm.hook, name, None) is not None and name.startswith("register_")}


def test_every_register_hookspec_is_a_component_or_the_cli_hook():
    specs = _specs()
    assert set(specs) == {c.hook for c in hookspecs.COMPONENTS} | {"register_commands"}
    assert set(hookspecs.HOOK_NAMES) == set(specs)
    assert _hook_names() == list(hookspecs.HOOK_NAMES)
    assert _hook_names()[-1] == "register_commands"


def test_categories_and_factory_protocols_are_derived_from_the_hookspecs():
    categories = tuple(c.category for c in hookspecs.COMPONENTS)
    assert registry.CATEGORIES == hookspecs.CATEGORIES == categories
    assert registry.CATEGORIES == ("stores", "embedders", "indexes", "stages", "fusions", "services", "llms")
    assert set(factories.FACTORY_PROTOCOLS) == set(categories)
    assert set(registry.Registry().entries) == set(categories)


@pytest.mark.parametrize("component", hookspecs.COMPONENTS, ids=lambda c: c.category)
def test_each_component_has_a_singular_noun_and_the_factory_protocol_of_its_hook(component):
    assert component.singular and component.singular != component.category
    assert hookspecs.SINGULAR[component.category] == component.singular
    protocol = factories.FACTORY_PROTOCOLS[component.category]
    assert protocol.__name__ == component.factory and protocol.__name__ in factories.__all__
    # the hookspec takes ``register`` (typed Register[Any]: the factory protocols live in memcore.plugin, above the hookspecs)
    spec = getattr(hookspecs, component.hook)
    assert list(inspect.signature(spec).parameters) == ["register"]
    assert spec.__annotations__["register"] == "Register[Any]"


def test_a_component_hook_must_be_named_register_something():
    with pytest.raises(ValueError, match="register_<category>"):
        hookspecs.component_hookspec(singular="x", factory="XFactory")(lambda: None)


@pytest.mark.parametrize("component", hookspecs.COMPONENTS, ids=lambda c: c.category)
def test_unknown_kind_message_uses_the_singular_noun(component):
    with pytest.raises(UnknownComponentError) as info:
        get_registry().get(component.category, "nope")
    message = str(info.value)
    assert message.startswith(f"unknown {component.singular} kind 'nope'.")


def test_unknown_llm_kind_reads_right():
    with pytest.raises(ConfigError) as info:
        memcore.open({"store": "memory", "llms": {"default": "scriptd"}})
    assert "unknown llm kind 'scriptd'" in str(info.value)
    assert "llms kind" not in str(info.value)
