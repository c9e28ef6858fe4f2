"""The ``colbert`` plugin is installed and loads through the plugin host (it registers nothing yet)."""

from memcore.testing import PluginRegistrationContract


class TestColbertRegistration(PluginRegistrationContract):
    plugin = "colbert"
    registers = {}
