"""The suite's tiers (tests/tiers.py): every cluster test decides presubmit or slow, a slow
one says why in one line, and a test without a decision stops collection."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import tiers

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


class Mark:
    def __init__(self, name, *args, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs


class Item:
    """What tiers reads of a pytest item: its path, id and markers, closest first."""

    def __init__(self, folder: str, *marks: Mark):
        self.fspath = f"/repo/tests/{folder}/test_x.py"
        self.nodeid = f"tests/{folder}/test_x.py::test_y"
        self.marks = marks

    def iter_markers(self):
        return iter(self.marks)


def test_the_closest_marker_decides():
    slow = Mark("slow", "kills a node (fault)")
    assert tiers.decision(Item("cluster", slow, Mark("presubmit"))) == ("slow", None)
    assert tiers.decision(Item("cluster", Mark("presubmit"), slow)) == ("presubmit", None)
    assert tiers.decision(Item("cluster", Mark("cluster"), slow)) == ("slow", None)
    assert tiers.decision(Item("cluster", Mark("slow", reason="restarts slurmctld"))) == (
        "slow", None)


def test_a_cluster_test_without_a_decision_or_reason_is_a_problem_a_unit_test_is_not():
    assert tiers.decision(Item("unit")) == ("presubmit", None)
    assert tiers.decision(Item("cluster", Mark("cluster")))[1].startswith("no tier")
    for bad in (Mark("slow"), Mark("slow", ""), Mark("slow", 3), Mark("slow", "a\nb"),
                Mark("slow", "x" * (tiers.REASON_LIMIT + 1))):
        tier, problem = tiers.decision(Item("unit", bad))
        assert tier == "slow" and problem, bad.args
    items = [Item("cluster", Mark("presubmit")), Item("cluster"), Item("unit", Mark("slow"))]
    found = tiers.problems(items)
    assert len(found) == 2 and found[0].startswith("tests/cluster/test_x.py::test_y: no tier")


def collect(where: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p",
                           "no:cacheprovider", "--collect-only", "-q", *args, str(where)],
                          capture_output=True, text=True, cwd=where, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_collection_stops_on_a_cluster_module_without_a_tier(tmp_path):
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "test_decided.py").write_text(textwrap.dedent("""\
        import pytest
        pytestmark = pytest.mark.presubmit
        def test_fast(): pass
        @pytest.mark.slow("restarts the controller (fault)")
        def test_restart(): pass
        """))
    decided = collect(tmp_path)
    assert decided.returncode == 0, decided.stdout + decided.stderr
    assert "2 tests collected" in decided.stdout
    presubmit = collect(tmp_path, "-m", "not slow")
    assert "1/2 tests collected (1 deselected)" in presubmit.stdout, presubmit.stdout
    (cluster / "test_undecided.py").write_text("def test_forgotten(): pass\n")
    undecided = collect(tmp_path)
    assert undecided.returncode == 4, undecided.stdout + undecided.stderr
    assert "1 test(s) without a valid tier" in undecided.stderr
    assert "test_undecided.py::test_forgotten: no tier" in undecided.stderr


def test_every_cluster_test_of_the_project_has_a_tier_and_both_tiers_have_tests():
    every = collect(ROOT / "tests" / "cluster")
    assert every.returncode == 0, every.stdout[-2000:] + every.stderr[-2000:]
    slow = collect(ROOT / "tests" / "cluster", "-m", "slow")
    presubmit = collect(ROOT / "tests" / "cluster", "-m", "not slow")
    assert "deselected" in slow.stdout and "deselected" in presubmit.stdout
