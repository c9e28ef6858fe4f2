"""A stage has a usable ``name`` however it was built (core/memcore/pipeline.py ``Stage.name``)."""

from __future__ import annotations

from types import SimpleNamespace

import memcore
import memcore.plugin
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore.retrieval._stages import Fuse, FuseConfig, Limit, LimitConfig, Recall, RecallConfig, RerankConfig, RerankStage, Threshold, ThresholdConfig
from memcore.testing import register_plugin


class NoConfig(memcore.plugin.Stage):
    def run(self, ctx):
        pass


class Named(memcore.plugin.Stage):
    name = "custom"

    def run(self, ctx):
        pass


def test_a_stage_built_directly_is_named_after_its_config_kind():
    assert Limit(LimitConfig()).name == "limit"
    assert Threshold(ThresholdConfig(min_score=0.1)).name == "threshold"
    assert RerankStage(RerankConfig()).name == "rerank"


def test_a_stage_without_config_is_named_after_its_class():
    assert NoConfig().name == "no_config"


def test_given_names_win():
    assert Recall(RecallConfig(index="words")).name == "words"
    assert Fuse(FuseConfig()).name == "fused"
    assert Named().name == "custom"
    stage = Limit(LimitConfig())
    stage.name = "top"
    assert stage.name == "top"
    stage.name = None
    assert stage.name == "limit"


@memcore.hookimpl
def register_stages(register):
    register("configless_probe", lambda config: NoConfig(), memcore.plugin.ComponentConfig)


def test_settings_name_a_configless_stage_by_its_registered_kind():
    with register_plugin(SimpleNamespace(register_stages=register_stages), name="stage-name-probe"):
        pipeline = Pipeline.from_config([{"kind": "configless_probe"}, {"kind": "limit"}], get_registry())
    assert [s.name for s in pipeline.stages] == ["configless_probe", "limit"]


def test_the_trace_names_every_stage_of_a_pipeline_built_by_hand(tmp_path):
    with memcore.open(path=tmp_path) as memory:
        memory.insert(["Alice works in Zurich", "Bob bakes bread"])
        pipeline = Pipeline([Recall(RecallConfig()), RerankStage(RerankConfig(keyword_weight=0.5)), NoConfig(), Limit(LimitConfig())])
        ctx = pipeline.run_context(memory.collection, memory.collection.make_query("zurich", k=1))
    assert [entry["stage"] for entry in ctx.trace] == ["vector", "rerank", "no_config", "limit"]  # recall names its list after the index
