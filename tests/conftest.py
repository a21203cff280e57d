"""Mark tests by folder: tests/unit -> unit, tests/cluster -> cluster."""

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in ("unit", "cluster"):
            item.add_marker(getattr(pytest.mark, folder))
