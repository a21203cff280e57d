"""Bring a cluster up, stop it, destroy it: `up`, `down` and `destroy` as short lists of
named steps over one cluster handle (host/cluster.py), its provider doing the rest.

`up` is idempotent: on a running cluster it changes nothing; after `down` or an
engine restart it starts what is stopped; a node removed behind our back
is recreated (user data lives in volumes, or in the cluster's own file systems for
/home and /projects (aitestbed.host.storage), per-cluster secrets in the state dir).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aitestbed.host import provider as providers
from aitestbed.host import storage
from aitestbed.host.cluster import Cluster
from aitestbed.host.errors import AitestbedError
from aitestbed.host.health import wait_ready
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.naming import LABEL_CLUSTER, owner
from aitestbed.host.provider import NodeGone, NodeHandle, Provider
from aitestbed.host.provider.base import Provisioned
from aitestbed.host.state import ClusterState, state_home

PARALLEL = 4


def provider_of(state: ClusterState) -> Provider:
    """The provider the cluster was made with (Docker for one not made yet)."""
    return providers.for_cluster(state.name)


@dataclass
class UpResult:
    topology: Topology
    outdated: list[str]  # nodes left running an image older than this checkout's
    replaced: list[str]  # nodes whose container was replaced by one of the current image
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth a line, not a warning
    cluster: Cluster | None = None  # the cluster as `up` left it (its record saved)


RESTART_REASON = "restarted by aitestbed up"
STOP_REASON = "stopped by aitestbed down"
MARKED_DOWN = "slurm-nodes-marked-down.json"  # in the state dir: what `down` told slurmctld


def slurm_restarts(topology: Topology, starting: set[str]) -> dict[str, list[str]]:
    """controller -> the compute nodes of its Slurm cluster among `starting` (the nodes
    an `up` starts, or a `down` stops).

    Whatever ran on them is gone, but their controller may still count those jobs as
    RUNNING until a periodic registration (about a minute) shows they are missing.
    """
    restarts: dict[str, list[str]] = {}
    for node in topology.nodes:
        if node.name not in starting or not node.slurm_cluster \
                or "slurm_gres" not in topology.hostvars.get(node.name, {}):
            continue
        for ctl in topology.nodes:
            if ctl.node_class == "slurmctld" and ctl.slurm_cluster == node.slurm_cluster:
                restarts.setdefault(ctl.name, []).append(node.name)
    return restarts


def mark_down(provider: Provider, cluster: str, controller: str, nodes: list[str],
              timeout: float = 30, reason: str = RESTART_REASON) -> str | None:
    """Tell slurmctld that `nodes` went down: their jobs end NODE_FAIL, or are requeued if
    they asked for --requeue, at once. ReturnToService=2 puts each node back in service
    when its slurmd registers. Returns a warning, or None."""
    argv = ["scontrol", "update", f"nodename={','.join(nodes)}", "state=down",
            f"reason={reason}"]
    deadline = time.monotonic() + timeout
    output = ""
    while True:
        try:
            result = provider.exec(cluster, controller, argv)
            output = result.output.strip()
            if result.exit_code == 0:
                return None
        except NodeGone as err:
            output = str(err)
        if time.monotonic() > deadline:
            return (f"could not tell {controller} that {', '.join(nodes)} restarted ({output}): "
                    "jobs that ran there may show RUNNING for about a minute")
        time.sleep(0.5)  # slurmctld is still starting


def _report_down(provider: Provider, cluster: str, topology: Topology,
                 stopping: set[str], running: set[str], reason: str) -> set[str]:
    """Tell each running controller that its compute nodes in `stopping` go down; returns
    the nodes it was told about."""
    told = set()
    for controller, nodes in sorted(slurm_restarts(topology, stopping).items()):
        if controller in running and not mark_down(provider, cluster, controller, nodes,
                                                   timeout=5, reason=reason):
            told.update(nodes)
    return told


def up(name: str, profile: str | None, systems: list[str] | None, user: str, *,
       wait: bool = True, timeout: float = 180, recreate: bool = False,
       provider: str | None = None, provider_options: dict | None = None) -> UpResult:
    """Create or start the cluster.

    Nodes are kept across `up` (that is what keeps node-local state); a node whose
    image is older than this checkout's is reported, or with `recreate` replaced.
    Volumes (/home, /projects, /software, the controllers' state) stay.
    """
    cluster = Cluster.for_up(name, profile, systems, user, provider, provider_options)
    cluster.provider.check()
    if cluster.fresh and (refusal := not_ours(name, cluster.provider.holder(name), owner())):
        raise AitestbedError(refusal)
    provisioned = _provision(cluster)
    cluster.prepare()
    tags = cluster.provider.ensure_images(cluster.topology.class_systems)
    existing = cluster.provider.nodes(name)
    outdated = _outdated(cluster, tags, existing)
    reported = _replace(cluster, outdated, existing) if recreate else set()
    _remove_remade(cluster, existing)
    warnings = provisioned.warnings + cluster.provider.before_start(cluster, existing)
    started = time.monotonic()

    def left() -> float:
        return max(1.0, timeout - (time.monotonic() - started))

    warnings += _start(cluster, tags, existing, reported, left)
    _learn_after_start(cluster)
    if wait:
        wait_ready(cluster.provider, name, [n.name for n in cluster.topology.nodes],
                   timeout=left())
    if recreate:
        return UpResult(cluster.topology, [], outdated, warnings, provisioned.notes, cluster)
    return UpResult(cluster.topology, outdated, [], warnings, provisioned.notes, cluster)


def not_ours(name: str, holder: str | None, me: str) -> str | None:
    """Why `up` must not take a cluster this user has no record of while the provider
    holds something of that name (`holder`: its owner label, "" when unlabelled), None
    when it holds nothing. Another user's cluster on a shared engine is theirs; one of
    this user's own whose state directory went is removed by hand, never adopted."""
    if holder is None:
        return None
    if holder and holder != me:
        return (f"a cluster named {name!r} on this Docker engine belongs to {holder}: "
                "choose another --name (each user's clusters need names of their own)")
    return (f"the Docker engine holds containers, networks or volumes of a cluster named "
            f"{name!r} that you have no record of (was {state_home() / name} removed?): "
            "choose another --name, or remove what carries the label "
            f"{LABEL_CLUSTER}={name} (`docker ps -a --filter label=...`; its volumes hold "
            "its /home)")


def _provision(cluster: Cluster) -> Provisioned:
    """The record's inventory, what the provider provisions (ports, storage, network,
    volumes); the record saved once."""
    cluster.record.inventory = str(cluster.topology.inventory_path)
    provisioned = cluster.provider.provision(cluster)
    cluster.save()
    return provisioned


def _outdated(cluster: Cluster, tags: dict[str, str], existing: dict[str, NodeHandle]
              ) -> list[str]:
    """The nodes made from another image than their class's now."""
    return sorted(n.name for n in cluster.topology.nodes if n.name in existing
                  and existing[n.name].image != tags[n.node_class])


def _replace(cluster: Cluster, outdated: list[str], existing: dict[str, NodeHandle]
             ) -> set[str]:
    """Remove the outdated nodes (made again by `_start`); the compute nodes among them
    their controllers heard go down first, as on `down` (those are not held back until
    their controller is up again)."""
    if not outdated:
        return set()
    running = {n for n, h in existing.items() if h.running}
    told = _report_down(cluster.provider, cluster.name, cluster.topology,
                        set(outdated) & running, running, STOP_REASON)
    _remove(cluster, outdated, existing)
    return told


def _remove_remade(cluster: Cluster, existing: dict[str, NodeHandle]) -> None:
    """A node its provider cannot keep as it was made (`NodeHandle.remake`) is removed, to
    be made again with the rest: its volumes and the shared file systems stay."""
    remade = sorted(n for n, h in existing.items() if h.remake)
    if remade:
        _remove(cluster, remade, existing)


def _remove(cluster: Cluster, nodes: list[str], existing: dict[str, NodeHandle]) -> None:
    cluster.provider.remove_nodes(cluster.name, nodes)
    for node in nodes:
        existing.pop(node)


def _taken_marked_down(state: ClusterState) -> set[str]:
    """The nodes `down` told their controllers about (forgotten once read)."""
    marked = state.root / MARKED_DOWN
    reported = set(json.loads(marked.read_text())) if marked.is_file() else set()
    marked.unlink(missing_ok=True)
    return reported


def _start(cluster: Cluster, tags: dict[str, str], existing: dict[str, NodeHandle],
           reported: set[str], left: Callable[[], float]) -> list[str]:
    """Make what is missing and start what is stopped: the controllers first where
    compute nodes of theirs went down unannounced. The nodes left running get the state
    directory's files as they are now. Warnings."""
    name, topology, where = cluster.name, cluster.topology, cluster.provider
    starting = {n.name for n in topology.nodes
                if existing.get(n.name) is None or not existing[n.name].running}
    # Nodes `down` already reported down need nothing more: they come back into service
    # as their slurmd registers. Only nodes stopped some other way (a crash, an engine
    # restart) make `up` start the controllers first.
    reported = reported | _taken_marked_down(cluster.state)
    restarts = {} if cluster.fresh else slurm_restarts(topology, starting - reported)
    later = {n for nodes in restarts.values() for n in nodes}
    warnings = []
    _start_nodes(cluster, tags, [n for n in topology.nodes if n.name not in later], existing)
    if restarts:
        # The controllers first, so that no job they count as running on a restarted
        # compute node stays RUNNING with no process (and no new job starts there
        # before they know): then the compute nodes.
        wait_ready(where, name, sorted(restarts), timeout=left())
        for controller, nodes in sorted(restarts.items()):
            if warning := mark_down(where, name, controller, nodes):
                warnings.append(warning)
        _start_nodes(cluster, tags, [n for n in topology.nodes if n.name in later], existing)
    where.sync_files(cluster, sorted(set(existing) - starting))
    return warnings


def _learn_after_start(cluster: Cluster) -> None:
    """What the provider learns once nodes started (Kubernetes: where the login nodes'
    ssh is reached) saved, and the host's known_hosts written for it."""
    if cluster.provider.after_start(cluster):
        cluster.save()
        cluster.prepare()


def _start_nodes(cluster: Cluster, tags: dict[str, str], nodes: list[Node],
                 existing: dict[str, NodeHandle]) -> None:
    """Make what is missing and start what is not running, a few nodes at a time."""
    where = cluster.provider

    def one(node: Node) -> None:
        handle = existing.get(node.name)
        if handle is not None and handle.running:
            return
        if handle is None:
            where.create_node(cluster, node, tags[node.node_class])
        where.start_node(cluster, node)

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(one, nodes))


def publish(name: str, address: str, timeout: float = 180) -> list[str]:
    """Publish the login nodes' ssh on `address`; the nodes the provider made again for
    it (Docker: none, its gate is made again)."""
    cluster = Cluster.open(name)
    nodes = cluster.provider.publish(cluster, address)
    if nodes:
        wait_ready(cluster.provider, name, nodes, timeout=timeout)
    return nodes


def down(name: str) -> int:
    """Stop the cluster's nodes. First each Slurm controller hears that its compute
    nodes go down, so the jobs running there end (NODE_FAIL, or requeued with --requeue)
    now, not a minute after the next `up`; queued jobs stay queued."""
    cluster = Cluster.open(name)
    running = _running(cluster)
    _tell_controllers(cluster, running)
    cluster.provider.stop_nodes(name, sorted(running))
    return len(running)


def _running(cluster: Cluster) -> set[str]:
    return {n for n, h in cluster.provider.nodes(cluster.name).items() if h.status != "exited"}


def _tell_controllers(cluster: Cluster, running: set[str]) -> None:
    """Each running controller hears that its running compute nodes go down; who was
    told is kept (MARKED_DOWN) for the next `up`."""
    marked = cluster.state.root / MARKED_DOWN
    reported = set(json.loads(marked.read_text())) if marked.is_file() else set()
    reported |= _report_down(cluster.provider, cluster.name, cluster.topology, running,
                             running, STOP_REASON)
    marked.write_text(json.dumps(sorted(reported)) + "\n")


def destroy(name: str) -> list[str]:
    """Remove the provider's nodes, networks and volumes, the cluster's own file systems
    and its state directory; what was removed."""
    state = ClusterState(name)
    removed = providers.for_cluster(name).destroy(name)
    removed += _release_storage(state)
    removed += _remove_state(state)
    if not removed:
        raise AitestbedError(f"there is no cluster named {name!r}")
    return removed


def _release_storage(state: ClusterState) -> list[str]:
    # Unmounted before the state directory goes, or its removal would walk into them.
    return storage.release(state.root)


def _remove_state(state: ClusterState) -> list[str]:
    if not state.root.exists():
        return []
    state.remove()
    return [f"state {state.root}"]
