"""Readiness: each node reports its services through aitestbed-node-health.

A node is ready when its entrypoint has applied the cluster's settings and
every service's check passes; `wait` blocks on that (CI never sleeps).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from aitestbed.host.cluster import Cluster
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider import NodeGone, Provider
from aitestbed.host.provider.base import Lasting

HEALTH_COMMAND = ["/usr/local/sbin/aitestbed-node-health"]


@dataclass
class NodeHealth:
    node: str
    state: str  # the node's, as its provider has it: running, exited, missing, ...
    ready: bool
    services: list[str]

    @property
    def summary(self) -> str:
        return ", ".join(self.services) if self.services else self.state


@dataclass(frozen=True)
class NodeStatus:
    """One row of `aitestbed status`: a node of the inventory and its health."""
    name: str
    system: str
    node_class: str
    health: NodeHealth
    ssh_port: int | None

    @property
    def state(self) -> str:
        return "ready" if self.health.ready else self.health.state


def cluster_status(cluster: Cluster) -> list[NodeStatus]:
    """Every node of the cluster's inventory, in order, with its health and login port."""
    record, topology = cluster.record, cluster.topology
    healths = {h.node: h for h in probe_all(cluster.provider, cluster.name,
                                             [n.name for n in topology.nodes])}
    return [NodeStatus(node.name, node.system, node.node_class, healths[node.name],
                       record.ports.get(node.name)) for node in topology.nodes]


def probe(provider: Provider, cluster: str, node: str,
          handle_status: str | None = None, problem: str | None = None) -> NodeHealth:
    """The node's health (`handle_status`, `problem`: its handle's, if the caller already
    has it)."""
    if handle_status is None:
        handle = provider.nodes(cluster).get(node)
        handle_status = handle.status if handle is not None else "missing"
        problem = handle.problem if handle is not None else None
    if problem:
        return NodeHealth(node, handle_status, False, [problem])
    if handle_status != "running":
        return NodeHealth(node, handle_status, False, [])
    try:
        result = provider.exec(cluster, node, HEALTH_COMMAND)
    except NodeGone as err:  # stopped between the two calls
        return NodeHealth(node, handle_status, False, [str(err)])
    return NodeHealth(node, "running", result.exit_code == 0, result.output.splitlines())


def probe_all(provider: Provider, cluster: str, nodes: list[str]) -> list[NodeHealth]:
    handles = provider.nodes(cluster)
    status = {n: handles[n].status if n in handles else "missing" for n in nodes}
    problems = {n: handles[n].problem if n in handles else None for n in nodes}
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda n: probe(provider, cluster, n, status[n], problems[n]),
                             nodes))


def _last_log_line(provider: Provider, cluster: str, node: str) -> str:
    lines = [ln for ln in provider.logs(cluster, node, tail=5).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def wait_ready(provider: Provider, cluster: str, nodes: list[str],
               timeout: float = 120, interval: float = 0.3) -> float:
    """Block until every node is ready; return the seconds waited. A node its provider
    says cannot start (no machine takes it, its image cannot be pulled) stops the wait
    once that has lasted PROBLEM_LASTS (it may pass: a volume still being bound)."""
    started = time.monotonic()
    pending = list(nodes)
    last: dict[str, NodeHealth] = {}
    troubled = Lasting()
    while pending:
        for health in probe_all(provider, cluster, pending):
            last[health.node] = health
            problem = health.services[0] if health.state == "pending" and health.services \
                else None
            if troubled.lasted(health.node, problem):
                raise AitestbedError(f"node {health.node} cannot start: {problem}")
            if health.state in ("exited", "dead", "missing", "restarting"):
                why = _last_log_line(provider, cluster, health.node) or health.state
                raise AitestbedError(f"node {health.node} is {health.state}: {why}")
        pending = [n for n in pending if not last[n].ready]
        if not pending:
            break
        if time.monotonic() - started > timeout:
            detail = "; ".join(f"{n}: {last[n].summary}" for n in pending)
            raise AitestbedError(f"not ready after {timeout:.0f} s: {detail}")
        time.sleep(interval)
    return time.monotonic() - started
