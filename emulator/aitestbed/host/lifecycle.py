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
from pathlib import Path

import docker
from docker.errors import APIError, NotFound

from aitestbed.host import egress, images, storage
from aitestbed.host.accounts import parse_size
from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.health import wait_ready
from aitestbed.host.inventory import PROFILE_ALIASES, Node, Topology
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.naming import (
    LABEL_CLASS,
    LABEL_CLUSTER,
    LABEL_NODE,
    LABEL_SYSTEM,
    container_name,
    front_network_name,
    network_name,
    node_volume_name,
    volume_name,
)
from aitestbed.host.state import ClusterRecord, ClusterState, free_port, port_in_use, recorded_ports
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

PARALLEL = 4
DNS_OPTIONS = ["timeout:1", "attempts:1"]


def cluster_containers(client: docker.DockerClient, name: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={name}"})


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


def mark_down(client: docker.DockerClient, cluster: str, controller: str, nodes: list[str],
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
            result = client.containers.get(container_name(cluster, controller)).exec_run(argv)
            output = result.output.decode(errors="replace").strip()
            if result.exit_code == 0:
                return None
        except (APIError, NotFound) as err:
            output = str(err)
        if time.monotonic() > deadline:
            return (f"could not tell {controller} that {', '.join(nodes)} restarted ({output}): "
                    "jobs that ran there may show RUNNING for about a minute")
        time.sleep(0.5)  # slurmctld is still starting


def _report_down(client: docker.DockerClient, cluster: str, topology: Topology,
                 stopping: set[str], running: set[str], reason: str) -> set[str]:
    """Tell each running controller that its compute nodes in `stopping` go down; returns
    the nodes it was told about."""
    told = set()
    for controller, nodes in sorted(slurm_restarts(topology, stopping).items()):
        if controller in running and not mark_down(client, cluster, controller, nodes,
                                                   timeout=5, reason=reason):
            told.update(nodes)
    return told


def up(name: str, profile: str | None, systems: list[str] | None, user: str, *,
       wait: bool = True, timeout: float = 180, recreate: bool = False) -> UpResult:
    """Create or start the cluster.

    Containers are kept across `up` (that is what keeps node-local state); a node
    whose image is older than this checkout's is reported, or with `recreate`
    replaced. Volumes (/home, /projects, /software, the controllers' state) stay.
    """
    client = connect()
    state = ClusterState(name)
    fresh = not state.exists()  # no Slurm controller has any job yet
    record = _record(state, profile, systems, user)
    topology = load_inventory(record.profile, record.systems)
    record.inventory = str(topology.inventory_path)
    _assign_ports(state, topology, record)
    state.save(record)
    warnings, notes = shared_storage(state, record, topology)
    state.prepare(topology, record)
    if record.storage == "image":
        warnings += storage.apply_accounts(
            state.root, storage.topology_mounts(topology),
            json.loads((state.common_dir / "accounts.json").read_text()))

    tags = images.ensure_class_images(client, topology.node_classes)
    network, note = _ensure_network(client, name, topology)
    if note:
        warnings.append(note)
    front = None
    if any(node.name in record.ports for node in topology.nodes):
        front = _ensure_front(client, name)
        if warning := egress.ensure(name):
            warnings.append(warning)
    for mount in sorted({m for n in topology.nodes for m in n.mounts}):
        if not _on_image(record, mount):
            _ensure_volume(client, name, volume_name(name, mount), mount)
    for node in topology.nodes:
        for path in node.volumes:
            _ensure_volume(client, name, node_volume_name(name, node.name, path), path)

    existing = {c.labels.get(LABEL_NODE): c for c in cluster_containers(client, name)}
    outdated = sorted(n.name for n in topology.nodes if n.name in existing
                      and existing[n.name].attrs["Config"]["Image"] != tags[n.node_class])
    stopped_first = set()
    if recreate and outdated:
        # The controllers hear first that the compute nodes replaced go down, as on `down`:
        # those are not held back until their controller is up again.
        running = {n for n, c in existing.items() if c.status == "running"}
        stopped_first = _report_down(client, name, topology, set(outdated) & running,
                                     running, STOP_REASON)
        replaced = [existing.pop(n) for n in outdated]
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            # Stopped first, as `down` does: slurmctld saves its queue when asked to stop
            # (killed, it may lose the jobs submitted since its last save).
            list(pool.map(lambda c: (c.stop(), c.remove()), replaced))
    # A login node published on another address than the record's (`classroom create
    # --listen`, `classroom destroy`) is made again: Docker binds ports at creation.
    rebound = sorted(n for n, c in existing.items()
                     if n in record.ports and published_on(c) not in (None, record.listen))
    if rebound:
        replaced = [existing.pop(n) for n in rebound]
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            list(pool.map(lambda c: (c.stop(), c.remove()), replaced))
    _check_ports(topology, record, existing)
    started = time.monotonic()
    starting = {n.name for n in topology.nodes
                if existing.get(n.name) is None or existing[n.name].status != "running"}
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
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda n: _ensure_node(client, state, record, network, front, tags,
                                                 n, existing.get(n.name)), nodes))

    start([n for n in topology.nodes if n.name not in later])
    if restarts:
        # The controllers first, so that no job they count as running on a restarted
        # compute node stays RUNNING with no process (and no new job starts there
        # before they know): then the compute nodes.
        wait_ready(client, name, sorted(restarts),
                   timeout=max(1.0, timeout - (time.monotonic() - started)))
        for controller, nodes in sorted(restarts.items()):
            if warning := mark_down(client, name, controller, nodes):
                warnings.append(warning)
        start([n for n in topology.nodes if n.name in later])
    if wait:
        wait_ready(client, name, [n.name for n in topology.nodes],
                   timeout=max(1.0, timeout - (time.monotonic() - started)))
    if recreate:
        return UpResult(topology, [], outdated, warnings, notes)
    return UpResult(topology, outdated, [], warnings, notes)


def publish(name: str, address: str, timeout: float = 180) -> list[str]:
    """Publish the login nodes' ssh on `address`: each login container is made again from
    the image it runs (Docker binds ports at creation), its volumes and the shared file
    systems kept; what runs on it and its own logs start over. The nodes made again."""
    client = connect()
    state = ClusterState(name)
    record = state.load()
    record.listen = address
    state.save(record)
    topology = load_inventory(record.profile, record.systems)
    existing = {c.labels.get(LABEL_NODE): c for c in cluster_containers(client, name)}
    nodes = [n for n in topology.nodes if n.name in record.ports and n.name in existing
             and published_on(existing[n.name]) != address]
    if not nodes:
        return []
    for node in nodes:
        if port_in_use(record.ports[node.name], address) and existing[node.name].status != \
                "running":
            raise AitestbedError(f"port {address}:{record.ports[node.name]} for {node.name}'s "
                                 "ssh is already in use by another program: stop it first")
    network, _ = _ensure_network(client, name, topology)
    front = _ensure_front(client, name)
    images_of = {n.name: existing[n.name].attrs["Config"]["Image"] for n in nodes}
    with ThreadPoolExecutor(PARALLEL * 2) as pool:
        list(pool.map(lambda n: (existing[n.name].stop(), existing[n.name].remove()), nodes))
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(lambda n: _ensure_node(client, state, record, network, front,
                                             {n.node_class: images_of[n.name]}, n, None),
                      nodes))
    wait_ready(client, name, [n.name for n in nodes], timeout=timeout)
    return [n.name for n in nodes]


def published_on(container) -> str | None:
    """The address a login node's ssh port is published on (None: not published)."""
    bindings = (container.attrs.get("HostConfig") or {}).get("PortBindings") or {}
    for binding in bindings.get("22/tcp") or []:
        return binding.get("HostIp") or "0.0.0.0"
    return None


def _on_image(record: ClusterRecord, mount: str) -> bool:
    return record.storage == "image" and mount in storage.IMAGE_MOUNTS


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


def _ensure_network(client: docker.DockerClient, name: str, topology: Topology):
    """The cluster's internal network, and a note when it had to be remade so: a cluster
    made before the network was internal is stopped, its nodes moved to the new network
    (with their names), and started again by `up`."""
    try:
        network = client.networks.get(network_name(name))
    except NotFound:
        return _create_network(client, name), None
    if network.attrs.get("Internal"):
        return network, None
    containers = cluster_containers(client, name)
    if any(c.status == "running" for c in containers):
        down(name)
    for container in containers:
        network.disconnect(container, force=True)
    network.remove()
    network = _create_network(client, name)
    aliases = {node.name: node.dns_names for node in topology.nodes}
    for container in containers:
        network.connect(container, aliases=aliases.get(container.labels.get(LABEL_NODE), []))
    return network, ("the cluster network is now internal (nothing leaves the machine); "
                     "its nodes restarted on it")


def _create_network(client: docker.DockerClient, name: str):
    return client.networks.create(network_name(name), driver="bridge", internal=True,
                                  labels={LABEL_CLUSTER: name})


def _ensure_front(client: docker.DockerClient, name: str):
    """The login nodes' network, where Docker publishes their ssh port (see host/egress)."""
    try:
        return client.networks.get(front_network_name(name))
    except NotFound:
        return client.networks.create(
            front_network_name(name), driver="bridge", labels={LABEL_CLUSTER: name},
            options={"com.docker.network.bridge.name": egress.front_bridge(name)})


def _ensure_volume(client: docker.DockerClient, name: str, volume: str, mount: str) -> None:
    try:
        client.volumes.get(volume)
    except NotFound:
        client.volumes.create(volume, labels={LABEL_CLUSTER: name, "aitestbed.mount": mount})


def _check_ports(topology: Topology, record: ClusterRecord, existing: dict) -> None:
    for node in topology.nodes:
        port = record.ports.get(node.name)
        container = existing.get(node.name)
        if port and (container is None or container.status != "running") and port_in_use(
                port, record.listen):
            raise AitestbedError(
                f"port {record.listen}:{port} for {node.name}'s ssh is already in use by another "
                "program: stop it, or set ssh_port for this host in the inventory"
            )


def _ensure_node(client, state: ClusterState, record: ClusterRecord, network, front,
                 tags: dict, node: Node, container) -> None:
    if container is not None and container.status == "running":
        return
    if container is None:
        container = _create(client, state, record, network, tags[node.node_class], node)
    if front is not None and node.name in record.ports:
        container.reload()
        if front.name not in container.attrs["NetworkSettings"]["Networks"]:
            front.connect(container)
    try:
        container.start()
    except APIError as err:
        text = str(err.explanation or err)
        if "port is already allocated" in text or "address already in use" in text:
            raise AitestbedError(
                f"port {record.listen}:{record.ports.get(node.name)} for {node.name}'s ssh is "
                "already in use: stop what holds it, or set ssh_port for this host in the inventory"
            ) from None
        raise AitestbedError(f"cannot start {node.name}: {text}") from None


def shm_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """The size of each node's /dev/shm: half the host's memory, as Linux sizes a
    host's own (a limit, not a reservation: tmpfs uses memory only for what is written)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30


def _create(client, state: ClusterState, record: ClusterRecord, network, image: str, node: Node):
    api = client.api
    binds = {
        str(state.node_dir(node.name)): {"bind": str(NODE_DIR), "mode": "ro"},
        str(state.common_dir): {"bind": str(CLUSTER_DIR), "mode": "ro"},
    }
    mounts = []
    for mount in node.mounts:
        if _on_image(record, mount):
            # The Mounts API: a missing source (the image not mounted) is an error at
            # start, where a legacy bind would make an empty directory on the host.
            mounts.append(docker.types.Mount(target=mount, type="bind",
                                             source=str(storage.Layout(state.root, mount).tree)))
        else:
            binds[volume_name(state.name, mount)] = {"bind": mount, "mode": "rw"}
    for path in node.volumes:
        binds[node_volume_name(state.name, node.name, path)] = {"bind": path, "mode": "rw"}
    port = record.ports.get(node.name)
    host_config = api.create_host_config(
        binds=binds,
        mounts=mounts or None,
        port_bindings={22: (record.listen, port)} if port else None,
        restart_policy={"Name": "unless-stopped"},
        tmpfs={"/run": "rw,nosuid,nodev,mode=755"},
        # Docker's resolver on an internal network never answers a name it does not know
        # (it has nowhere to ask): a lookup would wait 2 x 5 s, and slurmctld starting
        # while its compute nodes are stopped tries each of them ten times.
        dns_opt=DNS_OPTIONS,
        # Docker's default /dev/shm is 64 MB: a DataLoader with workers passes its batches
        # through it and dies with `Bus error`. Linux gives a host half its memory.
        shm_size=shm_bytes(),
    )
    networking = api.create_networking_config(
        {network.name: api.create_endpoint_config(aliases=node.dns_names)})
    try:
        created = api.create_container(
            image, name=container_name(state.name, node.name), hostname=node.name,
            labels={LABEL_CLUSTER: state.name, LABEL_NODE: node.name,
                    LABEL_CLASS: node.node_class, LABEL_SYSTEM: node.system},
            ports=[22] if port else None, host_config=host_config,
            networking_config=networking, stop_timeout=15, detach=True)
    except APIError as err:
        if mounts and "bind source path does not exist" in str(err.explanation or err):
            raise AitestbedError(
                f"the Docker engine cannot see {storage.Layout(state.root, '/home').directory}"
                ", where this cluster's /home and /projects are mounted: it must run on this "
                "host and see its mounts (not a remote, rootless or sandboxed engine)") from None
        raise
    return client.containers.get(created["Id"])


def down(name: str) -> int:
    """Stop the cluster's containers. First each Slurm controller hears that its compute
    nodes go down, so the jobs running there end (NODE_FAIL, or requeued with --requeue)
    now, not a minute after the next `up`; queued jobs stay queued."""
    client = connect()
    state = ClusterState(name)
    record = state.load()
    containers = [c for c in cluster_containers(client, name) if c.status != "exited"]
    running = {c.labels.get(LABEL_NODE) for c in containers}
    marked = state.root / MARKED_DOWN
    reported = set(json.loads(marked.read_text())) if marked.is_file() else set()
    topology = load_inventory(record.profile, record.systems)
    reported |= _report_down(client, name, topology, running, running, STOP_REASON)
    marked.write_text(json.dumps(sorted(reported)) + "\n")
    with ThreadPoolExecutor(PARALLEL * 2) as pool:
        list(pool.map(lambda c: c.stop(), containers))
    return len(containers)


def destroy(name: str) -> list[str]:
    client = connect()
    state = ClusterState(name)
    removed = []
    containers = cluster_containers(client, name)
    with ThreadPoolExecutor(PARALLEL * 2) as pool:
        list(pool.map(lambda c: c.remove(force=True), containers))
    if containers:
        removed.append(f"{len(containers)} containers")
    label = {"label": f"{LABEL_CLUSTER}={name}"}
    egress.remove(name)
    for network in client.networks.list(filters=label):
        network.remove()
        removed.append(f"network {network.name}")
    for volume in client.volumes.list(filters=label):
        volume.remove(force=True)
        removed.append(f"volume {volume.name}")
    # Unmounted before the state directory goes, or its removal would walk into them.
    removed += storage.release(state.root)
    if state.root.exists():
        state.remove()
        removed.append(f"state {state.root}")
    if not removed:
        raise AitestbedError(f"there is no cluster named {name!r}")
    return removed
