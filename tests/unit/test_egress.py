"""The firewall rule of clusters made before the gate (host/egress): removed, every copy."""

from __future__ import annotations

import subprocess

from aitestbed.host import egress


class Iptables:
    """A DOCKER-USER chain in memory, driven by the argv egress runs."""

    def __init__(self, fail_insert: str = ""):
        self.rules: list[list[str]] = []
        self.fail_insert = fail_insert
        self.calls: list[list[str]] = []

    def __call__(self, argv):
        argv = list(argv)
        self.calls.append(argv)
        op, chain, rest = argv[1], argv[2], argv[3:]
        assert chain == "DOCKER-USER"
        if op == "-C":
            return subprocess.CompletedProcess(argv, 0 if rest in self.rules else 1, "", "")
        if op == "-I":
            if self.fail_insert:
                return subprocess.CompletedProcess(argv, 4, "", self.fail_insert)
            self.rules.insert(int(rest[0]) - 1, rest[1:])
            return subprocess.CompletedProcess(argv, 0, "", "")
        if op == "-D":
            if rest in self.rules:
                self.rules.remove(rest)
                return subprocess.CompletedProcess(argv, 0, "", "")
            return subprocess.CompletedProcess(argv, 1, "", "Bad rule")
        raise AssertionError(argv)


def test_the_bridge_name_fits_linux_and_differs_per_cluster():
    assert len(egress.front_bridge("a-very-long-cluster-name-indeed")) <= 15
    assert egress.front_bridge("ci-1") != egress.front_bridge("ci-2")
    assert egress.front_bridge("ci-1") == egress.front_bridge("ci-1")


def test_the_rule_drops_what_the_login_bridge_forwards_elsewhere():
    rule = egress.rule("ci-1")
    bridge = egress.front_bridge("ci-1")
    assert rule[:4] == ["-i", bridge, "!", "-o"] and rule[4] == bridge
    assert rule[-2:] == ["-j", "DROP"]


def test_remove_deletes_every_copy_of_the_rule_and_nothing_else():
    chain = Iptables()
    chain.rules = [egress.rule("ci-1"), egress.rule("ci-2"), egress.rule("ci-1"), ["-j", "RETURN"]]
    egress.remove("ci-1", run=chain)
    assert chain.rules == [egress.rule("ci-2"), ["-j", "RETURN"]]
    egress.remove("ci-1", run=chain)  # nothing left to remove: no error
    assert chain.rules == [egress.rule("ci-2"), ["-j", "RETURN"]]
