"""site.yml converges a running cluster and is idempotent."""

import re

import pytest

from .conftest import NODES

pytestmark = pytest.mark.slow("site.yml over every node again (about 250 tasks, 137 s) to see it "
                              "change nothing")


def _recap(output: str) -> dict[str, dict[str, int]]:
    recap = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if match:
            recap[match.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)",
                                                                         match.group(2))}
    return recap


def test_site_yml_changes_nothing_on_a_fresh_cluster(cluster):
    """`up` configured every node with the same roles: site.yml, run again, finds nothing
    to change (which is also what makes it idempotent: run once more, it has nothing to
    do either)."""
    result = cluster.cli("playbook", "site", check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    recap = _recap(result.stdout)
    assert len(recap) == len(NODES), result.stdout[-2000:]
    changed = {h: r["changed"] for h, r in recap.items() if r["changed"]}
    assert changed == {}, f"site.yml changed {changed}:\n{result.stdout[-3000:]}"
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values())
