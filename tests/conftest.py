"""Mark tests by folder: tests/unit -> unit, tests/cluster -> cluster; and the tiers
(tests/tiers.py: presubmit and slow)."""

from pathlib import Path

import pytest

pytest_plugins = ["tests.tiers"]


def pytest_collection_modifyitems(items):
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in ("unit", "cluster"):
            item.add_marker(getattr(pytest.mark, folder))
