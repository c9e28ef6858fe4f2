"""The ``mmr`` plugin is installed, loads through the plugin host and registers its stage;
it needs only memcore, numpy, pydantic and the standard library."""

from memcore.testing import PluginRegistrationContract

import memcore_mmr


class TestMMRRegistration(PluginRegistrationContract):
    plugin = "mmr"
    registers = {"stages": {"mmr": (memcore_mmr.MMRStage, memcore_mmr.MMRConfig)}}
    allowed_imports = {"__future__", "memcore", "numpy", "pydantic", "re", "typing"}
