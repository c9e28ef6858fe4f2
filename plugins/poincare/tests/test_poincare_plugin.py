"""The ``poincare`` plugin is installed, loads through the plugin host, and loading it
imports neither chromadb nor any other heavy library."""

from memcore.testing import HEAVY_MODULES, PluginRegistrationContract


class TestPoincareRegistration(PluginRegistrationContract):
    plugin = "poincare"
    registers = {}
    heavy_modules = (*HEAVY_MODULES, "chromadb")
    light_imports = ("memcore_poincare", "memcore_poincare.storage", "memcore_poincare.retrieval")
