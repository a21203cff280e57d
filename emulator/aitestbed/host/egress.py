"""The firewall rule of clusters made before the gate, removed by their next `up` and by
`destroy`; nothing here makes one any more.

Login nodes used to sit on a second network that Docker published their ssh port from,
and a rule in the DOCKER-USER chain (root only) dropped whatever that network's bridge
forwarded elsewhere. Now every node is on the internal network alone and the cluster's
gate publishes the ports (host/provider/docker, aitestbed.node.gate): the offline guarantee
is Docker's own, for any user. The front network keeps its bridge name.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable, Sequence

CHAIN = "DOCKER-USER"  # Docker's chain for the user's rules, consulted before its own
Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def front_bridge(cluster: str) -> str:
    """The Linux bridge of the cluster's login network (at most 15 characters)."""
    return "ait" + hashlib.sha256(cluster.encode()).hexdigest()[:11]


def rule(cluster: str) -> list[str]:
    """The DOCKER-USER rule: drop what the login bridge forwards to any other interface."""
    bridge = front_bridge(cluster)
    return ["-i", bridge, "!", "-o", bridge, "-m", "comment", "--comment",
            f"aitestbed {cluster}: no traffic out of the login network", "-j", "DROP"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def remove(cluster: str, run: Runner = _run) -> None:
    """Delete the rule (every copy of it); nothing if it is not there."""
    iptables = shutil.which("iptables") if run is _run else "iptables"
    if iptables is None:
        return
    for _ in range(10):
        if run([iptables, "-D", CHAIN, *rule(cluster)]).returncode:
            return
