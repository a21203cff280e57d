"""The firewall rule that keeps a cluster's login network offline (host/egress)."""

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


def test_ensure_inserts_once_at_the_top_and_remove_deletes_it():
    chain = Iptables()
    chain.rules.append(["-j", "RETURN"])
    assert egress.ensure("ci-1", run=chain) is None
    assert egress.ensure("ci-1", run=chain) is None  # a second `up` adds nothing
    assert chain.rules == [egress.rule("ci-1"), ["-j", "RETURN"]]
    egress.ensure("ci-2", run=chain)
    egress.remove("ci-1", run=chain)
    assert chain.rules == [egress.rule("ci-2"), ["-j", "RETURN"]]
    egress.remove("ci-1", run=chain)  # nothing left to remove: no error


def test_a_rule_that_cannot_be_made_is_a_clear_warning():
    chain = Iptables(fail_insert="iptables: Permission denied (you must be root).")
    warning = egress.ensure("ci-1", run=chain)
    assert "Permission denied" in warning and "can reach outside" in warning
