"""memcore.registry: registrations, config parsing with located errors, unknown names."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from memcore.plugin import ComponentConfig
from memcore import ConfigError, PluginError, UnknownComponentError
from memcore._plugins._registry import CATEGORIES, EmptyConfig, Registry


class WidgetConfig(ComponentConfig):
    kind: str = "widget"
    size: int = Field(3, gt=0)


def factory(config):
    return config


def test_make_registration_validates_each_part():
    reg = Registry.make_registration("stages", "widget", factory, WidgetConfig, "p")
    assert (reg.category, reg.name, reg.factory, reg.config_model, reg.plugin) == ("stages", "widget", factory, WidgetConfig, "p")
    assert Registry.make_registration("stages", "bare", factory, None, "p").config_model is EmptyConfig
    for name in ("Widget", "", "1st", None, "wid get"):
        with pytest.raises(PluginError, match="invalid name"):
            Registry.make_registration("stages", name, factory, None, "p")
    with pytest.raises(PluginError, match="not callable"):
        Registry.make_registration("stages", "w", 42, None, "p")
    with pytest.raises(PluginError, match="pydantic model class"):
        Registry.make_registration("stages", "w", factory, dict, "p")

    class NoKind(BaseModel):
        size: int = 1

    with pytest.raises(PluginError, match="'kind' field"):
        Registry.make_registration("stages", "w", factory, NoKind, "p")


def test_conflicts_name_the_owner_and_repeats():
    registry = Registry()
    registry.add_all([Registry.make_registration("stages", "widget", factory, WidgetConfig, "first")])
    again = Registry.make_registration("stages", "widget", factory, WidgetConfig, "second")
    twice = [Registry.make_registration("fusions", "x", factory, None, "second")] * 2
    assert registry.conflicts([again, *twice]) == ["stages 'widget' is already registered by 'first'", "fusions 'x' is registered twice"]


def test_parse_config_sets_the_kind_and_locates_errors():
    reg = Registry.make_registration("stages", "widget", factory, WidgetConfig, "p")
    config = reg.parse_config({"size": 5}, "pipeline[0]")
    assert config == WidgetConfig(size=5) and reg.parse_config(config, "x") is config
    assert reg.parse_config(None, "x").size == 3
    with pytest.raises(ConfigError) as info:
        reg.parse_config({"size": 0}, "pipeline[0]")
    assert info.value.location == "pipeline[0].size"
    with pytest.raises(ConfigError, match="unknown option; did you mean 'size'") as info:
        reg.parse_config({"sise": 4}, "pipeline[0]")
    assert info.value.location == "pipeline[0].sise"


def test_get_unknown_names_the_installed_and_the_closest():
    registry = Registry()
    registry.add_all([Registry.make_registration("stages", "widget", factory, WidgetConfig, "p")])
    assert registry.get("stages", "widget").factory is factory
    with pytest.raises(UnknownComponentError) as info:
        registry.get("stages", "widgit", location="pipeline[0].kind")
    assert info.value.installed == ["widget"] and info.value.closest == "widget" and info.value.extra is None
    assert info.value.location == "pipeline[0].kind"
    assert registry.names("stages") == ["widget"] and set(registry.entries) == set(CATEGORIES)
