"""Repository-wide pytest setup (loaded for every testpath: tests/, plugins/, examples/).

``--slow`` selects the ``slow`` hypothesis profile (ten times the examples of the default
``ci`` profile, random instead of derandomized): the nightly-style run. See
:mod:`memcore.testing.hypothesis_profiles`.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow", action="store_true", default=False, help="hypothesis 'slow' profile: 10x the examples of the default 'ci' profile (nightly-style run)"
    )


def pytest_configure(config: pytest.Config) -> None:
    from memcore.testing.hypothesis_profiles import load_profile

    load_profile(slow=config.getoption("--slow"))
