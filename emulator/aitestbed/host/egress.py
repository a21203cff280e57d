"""No traffic leaves the machine from a cluster: the testbed is offline by design.

The cluster network is internal (Docker gives its nodes no route out). Login nodes
also sit on a second, small network, the only one Docker can publish their ssh port
from (it publishes nothing from an internal network), on 127.0.0.1 only; a rule in
the DOCKER-USER chain drops whatever that network's bridge would forward elsewhere,
so a login node reaches neither the internet nor another network. Published ports
still work: the host's connection to a login node, and its answers, are the host's
own traffic (INPUT/OUTPUT), never forwarded.

The rule is made again by every `up` (a host restart empties the chain) and removed
by `destroy`.
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


def ensure(cluster: str, run: Runner = _run) -> str | None:
    """Insert the rule unless it is there. Returns a warning when it cannot be made."""
    iptables = shutil.which("iptables") if run is _run else "iptables"
    if iptables is None:
        return ("iptables is not installed here: the login nodes of this cluster can reach "
                "outside the machine")
    if run([iptables, "-C", CHAIN, *rule(cluster)]).returncode == 0:
        return None
    made = run([iptables, "-I", CHAIN, "1", *rule(cluster)])
    if made.returncode:
        return (f"could not add the firewall rule that keeps this cluster's login nodes "
                f"offline ({made.stderr.strip() or 'iptables failed'}): they can reach "
                "outside the machine")
    return None


def remove(cluster: str, run: Runner = _run) -> None:
    """Delete the rule (every copy of it); nothing if it is not there."""
    iptables = shutil.which("iptables") if run is _run else "iptables"
    if iptables is None:
        return
    for _ in range(10):
        if run([iptables, "-D", CHAIN, *rule(cluster)]).returncode:
            return
