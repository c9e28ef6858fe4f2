"""LLMs as components: ``register_llms``, ``[llms.<name>]`` settings, ``memory.llms``, services
and stages naming their LLM, and :func:`memcore.plugin.run_llm_step` falling back and reporting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import memcore
import memcore.plugin
from memcore.plugin import LLM, ComponentConfig, LLMs, run_llm_step
from memcore import ConfigError, ValidationError, hookimpl
from memcore.errors import MemcoreError
from memcore.testing import register_plugin


class ScriptedConfig(ComponentConfig):
    kind: str = "scripted"
    reply: str = "ok"
    fail: bool = False


class ScriptedLLM(LLM):
    """Replies ``reply`` (or raises a MemcoreError when ``fail``); counts calls and closes."""

    instances: list["ScriptedLLM"] = []

    def __init__(self, config: ScriptedConfig):
        self.config = config
        self.model = f"scripted-{config.reply}"
        self.calls: list[Any] = []
        self.closed = False
        ScriptedLLM.instances.append(self)

    def complete(self, messages: Any, **options: Any) -> str:
        self.calls.append(messages)
        if self.config.fail:
            raise MemcoreError("the scripted server is down")
        return self.config.reply

    def close(self) -> None:
        self.closed = True


@hookimpl
def register_llms(register):
    register("scripted", ScriptedLLM, ScriptedConfig)


@pytest.fixture(autouse=True)
def scripted_plugin():
    ScriptedLLM.instances.clear()
    with register_plugin(SimpleNamespace(register_llms=register_llms), name="scripted-llm"):
        yield


def test_declared_llms_are_built_on_first_use_and_closed_with_the_memory():
    memory = memcore.open({"store": "memory", "llms": {"default": {"kind": "scripted", "reply": "hi"}, "judge": "scripted"}})
    assert sorted(memory.llms) == ["default", "judge"] and ScriptedLLM.instances == []
    llm = memory.llms["default"]
    assert isinstance(llm, LLM) and llm.complete("x") == "hi" and llm.model == "scripted-hi"
    assert memory.llms["default"] is llm
    memory.close()
    assert llm.closed


def test_llm_settings_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"llms\.default\.reply"):
        memcore.open({"store": "memory", "llms": {"default": {"kind": "scripted", "reply": 3}}})
    with pytest.raises(ConfigError, match=r"llms\.default\.bogus"):
        memcore.open({"store": "memory", "llms": {"default": {"kind": "scripted", "bogus": 1}}})
    with pytest.raises(ConfigError, match=r"llms\.x\.kind: unknown llm kind 'scriptd'.*Did you mean 'scripted'"):
        memcore.open({"store": "memory", "llms": {"x": "scriptd"}})
    with pytest.raises(ConfigError, match=r"llms"):
        memcore.open({"store": "memory", "llms": {"x": {"reply": "no kind"}}})


def test_env_declares_an_llm(monkeypatch):
    monkeypatch.setenv("MEMCORE_LLMS__DEFAULT__KIND", "scripted")
    monkeypatch.setenv("MEMCORE_LLMS__DEFAULT__REPLY", "from-env")
    with memcore.open({"store": "memory"}) as memory:
        assert memory.llms["default"].complete("x") == "from-env"


def test_resolve():
    llms = LLMs.of(judge=ScriptedLLM(ScriptedConfig()))
    assert llms.resolve(None, "x") is None
    assert llms.resolve("default", "x") is None  # undeclared default: the fallback runs
    assert llms.resolve("judge", "x") is llms["judge"]
    with pytest.raises(ConfigError, match=r"^service\.llm: no LLM named 'other'"):
        llms.resolve("other", "service.llm")


def test_run_llm_step_reports_which_path_ran():
    ok = ScriptedLLM(ScriptedConfig(reply="42"))
    value, report = run_llm_step("answer", ok, lambda llm: llm.complete("q"), lambda: "fallback", "rule")
    assert (value, report.used, report.reason, report.model, report.fallback) == ("42", "llm", None, "scripted-42", "rule")
    value, report = run_llm_step("answer", None, lambda llm: llm.complete("q"), lambda: "fallback", "rule")
    assert (value, report.used, report.reason) == ("fallback", "fallback", "no_llm")
    down = ScriptedLLM(ScriptedConfig(fail=True))
    value, report = run_llm_step("answer", down, lambda llm: llm.complete("q"), lambda: "fallback", "rule")
    assert (value, report.used, report.reason) == ("fallback", "fallback", "llm_error")

    def unparseable(llm):
        raise ValidationError("no triple in the reply")

    value, report = run_llm_step("extract", ok, unparseable, lambda: [], "svo")
    assert (value, report.reason, report.to_dict()["step"]) == ([], "invalid_reply", "extract")


def test_a_programming_error_in_the_step_is_not_swallowed():
    ok = ScriptedLLM(ScriptedConfig())
    with pytest.raises(ZeroDivisionError):
        run_llm_step("s", ok, lambda llm: 1 / 0, lambda: None, "none")
