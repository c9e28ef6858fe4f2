"""The ``lsh`` plugin is installed, loads through the plugin host, registers its index kind,
and loading it imports no heavy library."""

from memcore.testing import PluginRegistrationContract

from memcore_lsh import LSHIndex, LSHIndexConfig


class TestLSHRegistration(PluginRegistrationContract):
    plugin = "lsh"
    registers = {"indexes": {"lsh": (LSHIndex, LSHIndexConfig)}}
