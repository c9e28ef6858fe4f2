"""The ``rrf`` plugin is installed, loads through the plugin host and registers its fusions,
leaving the core's ``rrf`` and ``concat`` alone."""

from memcore._plugins._host import get_registry
from memcore.testing import PluginRegistrationContract

import memcore_rrf


class TestRRFRegistration(PluginRegistrationContract):
    plugin = "rrf"
    registers = {
        "fusions": {
            "weighted": (memcore_rrf.WeightedFusion, memcore_rrf.WeightedConfig),
            "dbsf": (memcore_rrf.DistributionBasedFusion, memcore_rrf.DBSFConfig),
            "union": (memcore_rrf.UnionFusion, memcore_rrf.UnionConfig),
        }
    }
    allowed_imports = {"__future__", "memcore", "numpy", "pydantic", "math", "numbers", "typing", "dataclasses"}


def test_the_core_keeps_its_rrf_and_concat():
    registry = get_registry()
    assert registry.get("fusions", "rrf").plugin == "memcore.default_plugins.fusions"
    assert registry.get("fusions", "concat").plugin == "memcore.default_plugins.fusions"
