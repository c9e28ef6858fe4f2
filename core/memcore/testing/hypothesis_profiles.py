"""Hypothesis profiles shared by memcore's and the plugins' property tests.

Two profiles: ``ci`` (the default: a bounded number of examples, no deadline, derandomized
so a run is reproducible) and ``slow`` (ten times the examples, random: the nightly-style
run, selected with ``pytest --slow`` by the repository's root ``conftest.py``).

A test that states its own CI count scales it with :func:`examples`::

    from hypothesis import given, settings
    from memcore.testing import examples

    @settings(max_examples=examples(200))
    @given(...)
    def test_roundtrip(...): ...
"""

from __future__ import annotations

CI_EXAMPLES = 100
SLOW_EXAMPLES = 1000


def register_profiles() -> None:
    """Register the ``ci`` and ``slow`` hypothesis profiles (idempotent)."""
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None, derandomize=True, print_blob=True)
    settings.register_profile("slow", max_examples=SLOW_EXAMPLES, deadline=None, derandomize=False, suppress_health_check=[HealthCheck.too_slow])


def load_profile(slow: bool = False) -> None:
    """Register the profiles and load ``slow`` when *slow*, else ``ci``."""
    from hypothesis import settings

    register_profiles()
    settings.load_profile("slow" if slow else "ci")


def examples(ci: int) -> int:
    """The examples for a test whose CI count is *ci*: *ci* under the ``ci`` (or hypothesis'
    default) profile, scaled by ``slow``/``ci`` (×10) under the loaded ``slow`` profile."""
    from hypothesis import settings

    current = settings.default
    loaded = current.max_examples if current is not None else CI_EXAMPLES
    return max(1, ci * loaded // CI_EXAMPLES)
