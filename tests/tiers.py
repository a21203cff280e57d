"""The suite's tiers (docs/testing.md): `make test` runs every test but the `slow` tier;
`make test-all` runs them all.

Every cluster test carries a decision, closest marker first (a test's own marker over its
module's `pytestmark`):

- `@pytest.mark.presubmit`: proves a workflow once, in its smallest honest form; runs on
  every change (`make test`, CI).
- `@pytest.mark.slow("why, in one line")`: the guide's full epochs and calibrated timings,
  faults and restarts, scale and load, a cluster of its own; runs in `make test-all`.

A cluster test without either, or a slow one that does not say why, stops the session at
collection: nothing drops out of both tiers unnoticed. Unit tests are presubmit unless
marked slow (a slow unit test says why as well).

A pytest plugin (tests/conftest.py loads it; `pytest -p tests.tiers` elsewhere).
"""

from __future__ import annotations

from pathlib import Path

import pytest

PRESUBMIT, SLOW = "presubmit", "slow"
REASON_LIMIT = 120  # characters: one line


def pytest_configure(config):
    config.addinivalue_line("markers", "presubmit: runs on every change (make test, CI): "
                                       "proves a workflow once, in its smallest honest form")
    config.addinivalue_line("markers", "slow(reason): only in make test-all; the reason says "
                                       "in one line why the test is slow")


def _folder(item) -> str:
    return Path(str(item.fspath)).parent.name


def decision(item) -> tuple[str | None, str | None]:
    """(tier, problem): the item's closest tier marker and, if it is not a valid decision,
    what is wrong."""
    for mark in item.iter_markers():
        if mark.name == PRESUBMIT:
            return PRESUBMIT, None
        if mark.name == SLOW:
            reason = mark.args[0] if mark.args else mark.kwargs.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                return SLOW, "marked slow without saying why: @pytest.mark.slow(\"why\")"
            if "\n" in reason or len(reason) > REASON_LIMIT:
                return SLOW, f"its slow reason is not one line of at most {REASON_LIMIT} " \
                             "characters"
            return SLOW, None
    if _folder(item) == "cluster":
        return None, "no tier: mark the module (pytestmark) or the test presubmit or " \
                     "slow(\"why\") (tests/tiers.py)"
    return PRESUBMIT, None


def problems(items) -> list[str]:
    """One line per test whose tier decision is missing or malformed."""
    found = []
    for item in items:
        _, problem = decision(item)
        if problem:
            found.append(f"{item.nodeid}: {problem}")
    return found


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every test is checked
def pytest_collection_modifyitems(config, items):
    found = problems(items)
    if found:
        shown = "\n  ".join(found[:20])
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise pytest.UsageError(f"{len(found)} test(s) without a valid tier "
                                f"(docs/testing.md):\n  {shown}{more}")
