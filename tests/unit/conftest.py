"""Unit tests' per-test limit: 180 s (the suite's default of 600 s in pyproject.toml is sized for integration
modules whose scenario runs in a fixture). A test that needs more says so with @pytest.mark.timeout(N)."""

from pathlib import Path

import pytest

UNIT_TIMEOUT_S = 180
_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))
