"""What a plugin author sees when something of theirs breaks (issue 26, item 6): the file and
traceback of a plugin that fails to import, a PluginError naming the plugin and component
for an exception inside a constructor, and contract suites that catch state kept in a
Python attribute and options without a description."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import pytest
from click.testing import CliRunner
from pydantic import Field

import memcore
from memcore import ConfigError, PluginError, ValidationError
from memcore._plugins._host import PluginHost, get_host
from memcore._util.log import configure_logging
from memcore.cli import main
from memcore.plugin import ComponentConfig, Stage, hookimpl
from memcore.retrieval._stages import Limit, LimitConfig
from memcore.services._service import DefaultService, DefaultServiceConfig
from memcore.testing import PluginRegistrationContract, ServiceContract, StageContract, register_plugin, undescribed_options

# -- a plugin that fails to import ------------------------------------------------------------


def test_a_broken_plugin_reports_its_file_and_traceback():
    info = PluginHost().infos["broken"]  # tests/fixtures/broken_plugin, installed by requirements-dev.txt
    assert info.error == "RuntimeError: broken on purpose"
    assert info.where is not None and info.where.replace("\\", "/").endswith("memcore_broken_example/__init__.py:3")
    assert info.traceback is not None
    assert "Traceback (most recent call last)" in info.traceback
    assert 'raise RuntimeError("broken on purpose")' in info.traceback
    assert info.to_dict()["traceback"] == info.traceback and info.to_dict()["where"] == info.where


def test_the_traceback_is_logged_at_debug_level(capsys):
    configure_logging("json", "debug")
    try:
        PluginHost()
    finally:
        configure_logging("off")
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    failed = [e for e in events if e["event"] == "plugin.load_failed" and e["plugin"] == "broken"]
    assert failed and failed[0]["where"].replace("\\", "/").endswith("memcore_broken_example/__init__.py:3")
    traced = [e for e in events if e["event"] == "plugin.load_failed.traceback" and e["plugin"] == "broken"]
    assert traced and traced[0]["level"] == "debug"
    assert 'raise RuntimeError("broken on purpose")' in traced[0]["traceback"]


def test_the_traceback_is_logged_only_at_debug_level(capsys):
    configure_logging("json", "info")
    try:
        PluginHost()
    finally:
        configure_logging("off")
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "plugin.load_failed" for e in events)
    assert not any(e["event"] == "plugin.load_failed.traceback" for e in events)


def test_memcore_plugins_verbose_shows_the_traceback():
    host = get_host()

    def boom() -> None:
        raise RuntimeError("verbose test plugin exploded")

    host.load("verbose-test-broken", boom, version="1.0", distribution="memcore-verbose-test")
    try:
        runner = CliRunner()
        short = runner.invoke(main, ["plugins"], catch_exceptions=False).output
        assert "error: RuntimeError: verbose test plugin exploded" in short
        assert f"at: {__file__}:" in short  # the file and line that raised
        assert "Traceback" not in short
        verbose = runner.invoke(main, ["plugins", "--verbose"], catch_exceptions=False).output
        assert "Traceback (most recent call last)" in verbose
        assert 'raise RuntimeError("verbose test plugin exploded")' in verbose
    finally:
        host.remove("verbose-test-broken")


# -- an exception inside a component's constructor ----------------------------------------------


class ExplodingConfig(ComponentConfig):
    """Config of the test stage."""

    kind: str = "exploding"
    mode: str = Field("zero", description="What the constructor does: zero (ZeroDivisionError), config (ConfigError), valid (ValidationError), ok.")


class ExplodingStage(Stage):
    """A stage whose constructor raises what its config says."""

    def __init__(self, config: ExplodingConfig):
        self.config = config
        if config.mode == "zero":
            _ = 1 / 0
        if config.mode == "config":
            raise ConfigError("mode 'config' is refused on purpose", location="pipeline")
        if config.mode == "valid":
            raise ValidationError("mode 'valid' is refused on purpose")

    def run(self, ctx: Any) -> None:
        """Nothing."""


@hookimpl
def register_exploding(register: Any) -> None:
    register("exploding", ExplodingStage, ExplodingConfig)


@pytest.fixture
def exploding_plugin():
    host = get_host()
    info = host.add("exploding-plugin", SimpleNamespace(register_stages=register_exploding), distribution="memcore-exploding")
    assert info.error is None
    yield
    host.remove("exploding-plugin")


def settings(mode: str) -> dict[str, Any]:
    return {"store": {"kind": "memory"}, "pipeline": [{"kind": "recall"}, {"kind": "exploding", "mode": mode}]}


def test_an_exception_in_a_constructor_is_a_plugin_error_naming_plugin_and_component(exploding_plugin):
    with pytest.raises(PluginError) as caught:
        memcore.open(settings("zero"))
    message = str(caught.value)
    assert "stage 'exploding'" in message
    assert "plugin 'exploding-plugin'" in message and "memcore-exploding" in message
    assert "ZeroDivisionError: division by zero" in message
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize(("mode", "error"), [("config", ConfigError), ("valid", ValidationError)])
def test_memcore_errors_raised_by_a_constructor_pass_unchanged(exploding_plugin, mode, error):
    with pytest.raises(error, match="refused on purpose") as caught:
        memcore.open(settings(mode))
    assert type(caught.value) is error


def test_a_constructor_that_works_builds(exploding_plugin):
    with memcore.open(settings("ok")) as memory:
        assert [s.name for s in memory.pipeline.stages] == ["vector", "exploding"]  # recall is named after its index


def test_an_index_constructor_failure_names_the_index_kind():
    class BadIndexConfig(ComponentConfig):
        kind: str = "bad_ctor"

    def factory(config: Any, context: Any) -> Any:
        raise KeyError("missing library handle")

    @hookimpl
    def register_indexes(register: Any) -> None:
        register("bad_ctor", factory, BadIndexConfig)

    with register_plugin(SimpleNamespace(register_indexes=register_indexes), name="bad-ctor-plugin"):
        collection = memcore.Collection.create()
        with pytest.raises(PluginError, match="index 'bad_ctor' of plugin 'bad-ctor-plugin' failed to build: KeyError") as caught:
            collection.create_index("mine", "bad_ctor")
        assert isinstance(caught.value.__cause__, KeyError)
        assert "mine" not in [i["name"] for i in collection.list_indexes()]  # nothing changed
        collection.close()


# -- the contract suites catch state kept in a Python attribute ----------------------------------


class CountingServiceConfig(DefaultServiceConfig):
    """Settings of the counting test service."""

    kind: str = "counting"


class CountingService(DefaultService):
    """A deliberately bad service: numbers its inserts with a counter kept in a Python
    attribute (lost when the memory is reopened) and writes the number into the record."""

    config: CountingServiceConfig  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.turn = 0

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        self.turn += 1
        return super().insert(text, vector, {**(metadata or {}), "turn": self.turn}, **kwargs)


@hookimpl
def register_counting(register: Any) -> None:
    register("counting", CountingService, CountingServiceConfig)


def opener(tmp_path: Path, service: str) -> tuple[Callable[..., memcore.Memory], list[memcore.Memory]]:
    """What the suite's ``service_memories`` fixture gives a test (called directly here)."""
    opened: list[memcore.Memory] = []

    def open_(path: Path | None = None) -> memcore.Memory:
        memory = memcore.open({"service": {"kind": service}}, path=path or tmp_path / "memory")
        original, done = memory.close, []

        def close() -> None:
            if not done:
                done.append(True)
                original()

        memory.close = close  # type: ignore[method-assign]
        opened.append(memory)
        return memory

    return open_, opened


def run_reopen_check(tmp_path: Path, service: str) -> None:
    open_, opened = opener(tmp_path, service)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            ServiceContract().test_behaviour_survives_reopen(open_, tmp_path, monkeypatch)
    finally:
        for memory in opened:
            memory.close()


def test_the_service_contract_catches_a_counter_lost_on_reopen(tmp_path):
    with register_plugin(SimpleNamespace(register_services=register_counting), name="counting-plugin"):
        with pytest.raises(AssertionError, match="differs from its twin that stayed open") as caught:
            run_reopen_check(tmp_path, "counting")
    assert "turn" in str(caught.value)


def test_the_reopen_check_passes_a_service_keeping_no_state_in_python(tmp_path):
    run_reopen_check(tmp_path, "default")


def test_the_reopen_check_compares_plain_service_attributes(tmp_path):
    class QuietCounting(CountingService):
        """Counts in a Python attribute without writing the number anywhere."""

        def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
            self.turn += 1
            return DefaultService.insert(self, text, vector, metadata, **kwargs)

    @hookimpl
    def register_services(register: Any) -> None:
        register("quiet_counting", QuietCounting, CountingServiceConfig)

    with register_plugin(SimpleNamespace(register_services=register_services), name="quiet-counting-plugin"):
        with pytest.raises(AssertionError, match="service attributes"):
            run_reopen_check(tmp_path, "quiet_counting")


# -- the contract suites catch an option without a description -----------------------------------


class HalfDescribedConfig(ComponentConfig):
    """A config whose second option has no description."""

    kind: str = "half_described"
    depth: int = Field(3, description="How deep.")
    width: int = 2


class HalfDescribedStage(Limit):
    """A limit stage with a badly documented config."""

    def __init__(self, config: HalfDescribedConfig):
        super().__init__(LimitConfig())
        self.config = config  # type: ignore[assignment]


@hookimpl
def register_half_described(register: Any) -> None:
    register("half_described", HalfDescribedStage, HalfDescribedConfig)


def test_undescribed_options_names_the_options_without_description():
    assert undescribed_options(HalfDescribedConfig) == ["width"]
    assert undescribed_options(HalfDescribedConfig()) == ["width"]
    assert undescribed_options(ExplodingConfig) == []
    assert undescribed_options(object()) == []


def test_the_stage_contract_catches_an_option_without_description():
    stage = HalfDescribedStage(HalfDescribedConfig())
    with pytest.raises(AssertionError, match=r"option\(s\) \['width'\] of HalfDescribedConfig have no description"):
        StageContract().test_every_option_has_a_description(stage)
    StageContract().test_every_option_has_a_description(Limit(LimitConfig()))  # the builtin passes


def test_the_service_contract_catches_an_option_without_description(tmp_path):
    class UndescribedServiceConfig(DefaultServiceConfig):
        kind: str = "undescribed"
        window: int = 5

    @hookimpl
    def register_services(register: Any) -> None:
        register("undescribed", DefaultService, UndescribedServiceConfig)

    with register_plugin(SimpleNamespace(register_services=register_services), name="undescribed-plugin"):
        open_, opened = opener(tmp_path, "undescribed")
        try:
            with pytest.raises(AssertionError, match=r"\['window'\]"):
                ServiceContract().test_every_option_has_a_description(open_)
        finally:
            for memory in opened:
                memory.close()


def test_the_registration_contract_catches_an_option_without_description():
    class Contract(PluginRegistrationContract):
        plugin = "half-described-plugin"

    host = PluginHost(load_entry_points=False)
    assert host.add("half-described-plugin", SimpleNamespace(register_stages=register_half_described)).error is None
    with pytest.raises(AssertionError, match=r"stages 'half_described' \(HalfDescribedConfig\)\": \['width'\]"):
        Contract().test_every_option_has_a_description(host)
