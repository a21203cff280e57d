"""Bring a cluster up, stop it, destroy it: containers, network and volumes.

`up` is idempotent: on a running cluster it changes nothing; after `down` or an
engine restart it starts what is stopped; a container removed behind our back
is recreated (user data lives in volumes, or in the cluster's own file systems for
/home and /projects (aitestbed.host.storage), per-cluster secrets in the state dir).
"""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aitestbed.host import provider as providers
from aitestbed.host import storage
from aitestbed.host.accounts import parse_size
from aitestbed.host.errors import AitestbedError
from aitestbed.host.health import wait_ready
from aitestbed.host.inventory import PROFILE_ALIASES, Node, Topology
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.naming import node_volume_name, volume_name
from aitestbed.host.provider import NodeGone, NodeHandle, Provider
from aitestbed.host.state import ClusterRecord, ClusterState, free_port, port_in_use, recorded_ports

PARALLEL = 4
_on_image = storage.on_image


def provider_of(state: ClusterState) -> Provider:
    """The provider the cluster was made with."""
    return providers.for_cluster(state.name)


def _has_nodes(record: ClusterRecord) -> bool:
    """Does the record's provider hold any node of it (True when it cannot tell)?"""
    try:
        return bool(providers.get(record.provider, **record.provider_options).nodes(record.name))
    except AitestbedError:
        return True


def _record(state: ClusterState, profile: str | None, systems: list[str] | None,
            user: str) -> ClusterRecord:
    if state.exists():
        record = state.load()
        if profile and PROFILE_ALIASES.get(profile, profile) not in (record.profile,
                                                                      record.inventory):
            raise AitestbedError(
                f"cluster {state.name!r} was created with profile {record.profile!r}: "
                f"destroy it first or choose another --name"
            )
        if systems and sorted(systems) != sorted(record.systems or []):
            raise AitestbedError(
                f"cluster {state.name!r} was created with systems "
                f"{','.join(record.systems) if record.systems else 'all'}: destroy it first or "
                "choose another --name"
            )
        return record
    return ClusterRecord(name=state.name, profile=PROFILE_ALIASES.get(profile, profile or "alcf"),
                         inventory="",
                         systems=systems, user=user, storage="")


def _assign_ports(state: ClusterState, topology: Topology, record: ClusterRecord) -> None:
    taken = recorded_ports() - set(record.ports.values())
    for node in topology.nodes:
        if not node.ssh_publish:
            continue
        if node.ssh_port:
            record.ports[node.name] = node.ssh_port
        elif node.name not in record.ports:
            port = free_port(taken | set(record.ports.values()))
            record.ports[node.name] = port


@dataclass
class UpResult:
    topology: Topology
    outdated: list[str]  # nodes left running an image older than this checkout's
    replaced: list[str]  # nodes whose container was replaced by one of the current image
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth a line, not a warning


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
    state = ClusterState(name)
    fresh = not state.exists()  # no Slurm controller has any job yet
    record = _record(state, profile, systems, user)
    options = {k: v for k, v in (provider_options or {}).items() if v is not None}
    if fresh and provider:
        record.provider = provider
        record.provider_options = options
    if provider and provider != record.provider:
        raise AitestbedError(
            f"cluster {name!r} runs on the {record.provider} provider: destroy it first or "
            "choose another --name")
    changed = {k for k, v in options.items() if record.provider_options.get(k) != v}
    if changed and not _has_nodes(record):
        # An `up` that stopped before making any node (a registry it could not push to):
        # the next one may name other options.
        record.provider_options = {**record.provider_options, **options}
        changed = set()
    if changed:
        raise AitestbedError(
            f"cluster {name!r} was made with other provider options "
            f"({', '.join(f'{k}={record.provider_options.get(k)}' for k in sorted(changed))}): "
            "destroy it first or choose another --name")
    where = providers.get(record.provider, **record.provider_options)
    where.check()
    topology = load_inventory(record.profile, record.systems)
    record.inventory = str(topology.inventory_path)
    if where.local_ports:
        _assign_ports(state, topology, record)
    state.save(record)
    if where.host_storage:
        warnings, notes = shared_storage(state, record, topology)
    else:
        record.storage, record.storage_note = "volume", (
            f"on the {record.provider} provider they are volumes of its storage class")
        state.save(record)
        warnings = [NOT_ENFORCED + record.storage_note] if storage.image_mounts(
            storage.topology_mounts(topology)) else []
        notes = []
    state.prepare(topology, record, reach=where.ansible_vars)
    if record.storage == "image":
        warnings += storage.apply_accounts(
            state.root, storage.topology_mounts(topology),
            json.loads((state.common_dir / "accounts.json").read_text()))

    tags = where.ensure_images(topology.class_systems)
    warnings += where.ensure_network(name, topology)
    for mount in sorted({m for n in topology.nodes for m in n.mounts}):
        if not _on_image(record, mount):
            where.ensure_volume(name, volume_name(name, mount), mount)
    for node in topology.nodes:
        for path in node.volumes:
            where.ensure_volume(name, node_volume_name(name, node.name, path), path)

    existing = where.nodes(name)
    outdated = sorted(n.name for n in topology.nodes if n.name in existing
                      and existing[n.name].image != tags[n.node_class])
    stopped_first = set()
    if recreate and outdated:
        # The controllers hear first that the compute nodes replaced go down, as on `down`:
        # those are not held back until their controller is up again.
        running = {n for n, h in existing.items() if h.running}
        stopped_first = _report_down(where, name, topology, set(outdated) & running,
                                     running, STOP_REASON)
        where.remove_nodes(name, outdated)
        for node in outdated:
            existing.pop(node)
    # A login node published on another address than the record's (`classroom create
    # --listen`, `classroom destroy`) is made again: Docker binds ports at creation.
    rebound = sorted(n for n, h in existing.items()
                     if n in record.ports and h.listen not in (None, record.listen))
    if rebound:
        where.remove_nodes(name, rebound)
        for node in rebound:
            existing.pop(node)
    if where.local_ports:
        _check_ports(topology, record, existing)
    started = time.monotonic()
    starting = {n.name for n in topology.nodes
                if existing.get(n.name) is None or not existing[n.name].running}
    # Nodes `down` already reported down need nothing more: they come back into service
    # as their slurmd registers. Only nodes stopped some other way (a crash, an engine
    # restart) make `up` start the controllers first.
    marked = state.root / MARKED_DOWN
    reported = set(json.loads(marked.read_text())) if marked.is_file() else set()
    marked.unlink(missing_ok=True)
    reported |= stopped_first
    restarts = {} if fresh else slurm_restarts(topology, starting - reported)
    later = {n for nodes in restarts.values() for n in nodes}

    def start(nodes: list[Node]) -> None:
        _start_nodes(where, state, record, tags, nodes, existing)

    start([n for n in topology.nodes if n.name not in later])
    if restarts:
        # The controllers first, so that no job they count as running on a restarted
        # compute node stays RUNNING with no process (and no new job starts there
        # before they know): then the compute nodes.
        wait_ready(where, name, sorted(restarts),
                   timeout=max(1.0, timeout - (time.monotonic() - started)))
        for controller, nodes in sorted(restarts.items()):
            if warning := mark_down(where, name, controller, nodes):
                warnings.append(warning)
        start([n for n in topology.nodes if n.name in later])
    # Nodes left running see the state directory as it is now.
    where.sync_files(state, sorted(set(existing) - starting))
    if not where.local_ports and (endpoints := where.ssh_endpoints(name, topology)):
        if (record.listen, record.ports) != (endpoints[0], endpoints[1]):
            record.listen, record.ports = endpoints[0], dict(endpoints[1])
            state.save(record)
            state.prepare(topology, record, reach=where.ansible_vars)  # the host's known_hosts
    if wait:
        wait_ready(where, name, [n.name for n in topology.nodes],
                   timeout=max(1.0, timeout - (time.monotonic() - started)))
    if recreate:
        return UpResult(topology, [], outdated, warnings, notes)
    return UpResult(topology, outdated, [], warnings, notes)


def _start_nodes(where: Provider, state: ClusterState, record: ClusterRecord,
                 tags: dict[str, str], nodes: list[Node], existing: dict[str, NodeHandle]
                 ) -> None:
    """Make what is missing and start what is not running, a few nodes at a time."""
    def one(node: Node) -> None:
        handle = existing.get(node.name)
        if handle is not None and handle.running:
            return
        if handle is None:
            where.create_node(state, record, node, tags[node.node_class])
        where.start_node(state, record, node)

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(one, nodes))


def publish(name: str, address: str, timeout: float = 180) -> list[str]:
    """Publish the login nodes' ssh on `address`: each login node is made again from the
    image it runs (Docker binds ports at creation), its volumes and the shared file
    systems kept; what runs on it and its own logs start over. The nodes made again."""
    state = ClusterState(name)
    record = state.load()
    where = provider_of(state)
    if not where.local_ports:
        raise AitestbedError(
            f"cluster {name!r} runs on the {record.provider} provider: its login nodes are "
            "reached through their Services (docs/kubernetes.md), not a host address")
    record.listen = address
    state.save(record)
    topology = load_inventory(record.profile, record.systems)
    existing = where.nodes(name)
    nodes = [n for n in topology.nodes if n.name in record.ports and n.name in existing
             and existing[n.name].listen != address]
    if not nodes:
        return []
    for node in nodes:
        if port_in_use(record.ports[node.name], address) and not existing[node.name].running:
            raise AitestbedError(f"port {address}:{record.ports[node.name]} for {node.name}'s "
                                 "ssh is already in use by another program: stop it first")
    where.ensure_network(name, topology)
    images_of = {n.name: existing[n.name].image for n in nodes}
    where.remove_nodes(name, [n.name for n in nodes])
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(lambda n: (where.create_node(state, record, n, images_of[n.name]),
                                 where.start_node(state, record, n)), nodes))
    wait_ready(where, name, [n.name for n in nodes], timeout=timeout)
    return [n.name for n in nodes]


NOT_ENFORCED = "/home and /projects quotas are reported, not enforced: "
KEPT_VOLUMES = ("this cluster keeps the Docker volumes it was made with (its files stay; "
                "a cluster made again, after `destroy`, gets its own file systems)")


def shared_storage(state: ClusterState, record: ClusterRecord, topology: Topology
                   ) -> tuple[list[str], list[str]]:
    """/home and /projects: a new cluster gets its own file systems when the host can
    make them (else volumes, said once on each `up`); an existing one keeps what it has,
    its images mounted again after a host restart. Returns (warnings, notes)."""
    mounts = storage.image_mounts(storage.topology_mounts(topology))
    if not mounts:
        return [], []
    notes = []
    if record.storage == "":
        caps = topology.common_vars.get("shared_storage_caps") or {}
        wanted = {m: parse_size(caps.get(m, storage.DEFAULT_CAP)) for m in mounts}
        state.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        reason = storage.unavailable()
        if reason is None:
            sizes = storage.plan_sizes(wanted, shutil.disk_usage(state.root).free, state.root)
            try:
                storage.create(state.root, sizes, state.name)
            except storage.Unavailable as err:
                reason = str(err)
            else:
                notes.append(
                    " and ".join(f"{m} ({storage.human(s)})" for m, s in sizes.items())
                    + " on file systems of their own, quotas enforced (sparse images in "
                    f"{storage.Layout(state.root, mounts[0]).directory})")
        record.storage, record.storage_note = ("volume", reason) if reason else ("image", "")
        state.save(record)
    if record.storage == "image":
        for mount in mounts:
            storage.ensure_mounted(storage.Layout(state.root, mount))
        return [], notes
    return [NOT_ENFORCED + (record.storage_note or KEPT_VOLUMES)], notes


def _check_ports(topology: Topology, record: ClusterRecord,
                 existing: dict[str, NodeHandle]) -> None:
    for node in topology.nodes:
        port = record.ports.get(node.name)
        handle = existing.get(node.name)
        if port and (handle is None or not handle.running) and port_in_use(
                port, record.listen):
            raise AitestbedError(
                f"port {record.listen}:{port} for {node.name}'s ssh is already in use by another "
                "program: stop it, or set ssh_port for this host in the inventory"
            )


def down(name: str) -> int:
    """Stop the cluster's nodes. First each Slurm controller hears that its compute
    nodes go down, so the jobs running there end (NODE_FAIL, or requeued with --requeue)
    now, not a minute after the next `up`; queued jobs stay queued."""
    state = ClusterState(name)
    record = state.load()
    where = provider_of(state)
    running = {n for n, h in where.nodes(name).items() if h.status != "exited"}
    marked = state.root / MARKED_DOWN
    reported = set(json.loads(marked.read_text())) if marked.is_file() else set()
    topology = load_inventory(record.profile, record.systems)
    reported |= _report_down(where, name, topology, running, running, STOP_REASON)
    marked.write_text(json.dumps(sorted(reported)) + "\n")
    where.stop_nodes(name, sorted(running))
    return len(running)


def destroy(name: str) -> list[str]:
    state = ClusterState(name)
    removed = provider_of(state).destroy(name)
    # Unmounted before the state directory goes, or its removal would walk into them.
    removed += storage.release(state.root)
    if state.root.exists():
        state.remove()
        removed.append(f"state {state.root}")
    if not removed:
        raise AitestbedError(f"there is no cluster named {name!r}")
    return removed
