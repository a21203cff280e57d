"""The Docker provider: each node a container on the cluster's internal network.

- the network `<cluster>-net` is internal (nothing leaves the machine); login nodes
  are also on `<cluster>-front`, where Docker publishes their ssh port on the record's
  address (127.0.0.1 unless a workshop named another) and host/egress drops whatever
  else would leave;
- the state directory's files are bound read-only (`nodes/<node>` and `common`), the
  shared file systems are named volumes or the cluster's own file systems
  (host/storage), per-node volumes are named volumes;
- a node is `docker exec`'d into; Ansible uses its docker connection;
- what a cluster takes of this host (login nodes' ports, /home and /projects as file
  systems of its own) is decided in `provision` (provider/docker_host).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import docker
from docker.errors import APIError, DockerException, NotFound

from aitestbed.host import egress, images, storage
from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
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
from aitestbed.host.provider import docker_host
from aitestbed.host.provider.base import (
    ExecResult,
    NodeGone,
    NodeHandle,
    Provider,
    Provisioned,
)
from aitestbed.host.state import port_in_use
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

if TYPE_CHECKING:
    from aitestbed.host.cluster import Cluster

PARALLEL = 4
DNS_OPTIONS = ["timeout:1", "attempts:1"]


def cluster_containers(client: docker.DockerClient, name: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={name}"})


def published_on(container) -> str | None:
    """The address a login node's ssh port is published on (None: not published)."""
    bindings = (container.attrs.get("HostConfig") or {}).get("PortBindings") or {}
    for binding in bindings.get("22/tcp") or []:
        return binding.get("HostIp") or "0.0.0.0"
    return None


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


class DockerProvider(Provider):
    name = "docker"

    def __init__(self, client: docker.DockerClient | None = None):
        self._client = client

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    def check(self) -> None:
        self.client  # noqa: B018 - connects, or says how to start an engine

    # the cluster's resources -----------------------------------------------------------
    def provision(self, cluster: Cluster) -> Provisioned:
        """The login nodes' ports on this host, /home and /projects (file systems of the
        cluster's own where the host can make them), the networks and the volumes."""
        docker_host.assign_ports(cluster.topology, cluster.record)
        warnings, notes = docker_host.shared_storage(cluster.state, cluster.record,
                                                     cluster.topology)
        warnings += self.ensure_network(cluster.name, cluster.topology)
        self.ensure_volumes(cluster)
        return Provisioned(warnings, notes)

    def before_start(self, cluster: Cluster, existing: dict[str, NodeHandle]) -> list[str]:
        """Each account's home and project with its quota on the cluster's own file
        systems; the ports of the login nodes about to start free."""
        warnings = []
        if cluster.record.storage == "image":
            warnings += storage.apply_accounts(
                cluster.state.root, storage.topology_mounts(cluster.topology),
                json.loads((cluster.state.common_dir / "accounts.json").read_text()))
        docker_host.check_ports(cluster.topology, cluster.record, existing)
        return warnings

    def publish(self, cluster: Cluster, address: str) -> list[str]:
        """Each login node not published on `address` is made again from the image it runs
        (Docker binds ports at creation), its volumes and the shared file systems kept."""
        record, name = cluster.record, cluster.name
        record.listen = address
        cluster.save()
        existing = self.nodes(name)
        nodes = [n for n in cluster.topology.nodes if n.name in record.ports
                 and n.name in existing and existing[n.name].listen != address]
        if not nodes:
            return []
        for node in nodes:
            if port_in_use(record.ports[node.name], address) and not existing[node.name].running:
                raise AitestbedError(f"port {address}:{record.ports[node.name]} for "
                                     f"{node.name}'s ssh is already in use by another program: "
                                     "stop it first")
        self.ensure_network(name, cluster.topology)
        images_of = {n.name: existing[n.name].image for n in nodes}
        self.remove_nodes(name, [n.name for n in nodes])
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda n: (self.create_node(cluster, n, images_of[n.name]),
                                     self.start_node(cluster, n)), nodes))
        return [n.name for n in nodes]

    def ensure_images(self, node_classes: list[str]) -> dict[str, str]:
        return images.ensure_class_images(self.client, node_classes)

    def ensure_network(self, cluster: str, topology: Topology) -> list[str]:
        warnings = []
        if note := self._ensure_internal(cluster, topology):
            warnings.append(note)
        if any(node.ssh_publish for node in topology.nodes):
            self._front(cluster)
            if warning := egress.ensure(cluster):
                warnings.append(warning)
        return warnings

    def _ensure_internal(self, cluster: str, topology: Topology) -> str | None:
        """The cluster's internal network, and a note when it had to be remade so: a
        cluster made before the network was internal is stopped, its nodes moved to the
        new network (with their names), and started again by `up`."""
        client = self.client
        try:
            network = client.networks.get(network_name(cluster))
        except NotFound:
            self._create_internal(cluster)
            return None
        if network.attrs.get("Internal"):
            return None
        containers = cluster_containers(client, cluster)
        self.stop_nodes(cluster, [c.labels.get(LABEL_NODE) for c in containers
                                  if c.status == "running"])
        for container in containers:
            network.disconnect(container, force=True)
        network.remove()
        network = self._create_internal(cluster)
        aliases = {node.name: node.dns_names for node in topology.nodes}
        for container in containers:
            network.connect(container, aliases=aliases.get(container.labels.get(LABEL_NODE), []))
        return ("the cluster network is now internal (nothing leaves the machine); "
                "its nodes restarted on it")

    def _create_internal(self, cluster: str):
        return self.client.networks.create(network_name(cluster), driver="bridge",
                                           internal=True, labels={LABEL_CLUSTER: cluster})

    def _front(self, cluster: str):
        """The login nodes' network, where Docker publishes their ssh port (host/egress)."""
        try:
            return self.client.networks.get(front_network_name(cluster))
        except NotFound:
            return self.client.networks.create(
                front_network_name(cluster), driver="bridge", labels={LABEL_CLUSTER: cluster},
                options={"com.docker.network.bridge.name": egress.front_bridge(cluster)})

    def ensure_volume(self, cluster: str, volume: str, mount: str) -> None:
        try:
            self.client.volumes.get(volume)
        except NotFound:
            self.client.volumes.create(volume, labels={LABEL_CLUSTER: cluster,
                                                       "aitestbed.mount": mount})

    # nodes -----------------------------------------------------------------------------
    def _containers(self, cluster: str) -> dict:
        return {c.labels.get(LABEL_NODE): c for c in cluster_containers(self.client, cluster)}

    def nodes(self, cluster: str) -> dict[str, NodeHandle]:
        return {name: NodeHandle(name, c.status, c.attrs["Config"]["Image"], published_on(c))
                for name, c in self._containers(cluster).items() if name}

    def create_node(self, cluster: Cluster, node: Node, image: str) -> None:
        state, record = cluster.state, cluster.record
        api = self.client.api
        binds = {
            str(state.node_dir(node.name)): {"bind": str(NODE_DIR), "mode": "ro"},
            str(state.common_dir): {"bind": str(CLUSTER_DIR), "mode": "ro"},
        }
        mounts = []
        for mount in node.mounts:
            if storage.on_image(record, mount):
                # The Mounts API: a missing source (the image not mounted) is an error at
                # start, where a legacy bind would make an empty directory on the host.
                mounts.append(docker.types.Mount(
                    target=mount, type="bind",
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
            # Docker's resolver on an internal network never answers a name it does not
            # know (it has nowhere to ask): a lookup would wait 2 x 5 s, and slurmctld
            # starting while its compute nodes are stopped tries each of them ten times.
            dns_opt=DNS_OPTIONS,
            # Docker's default /dev/shm is 64 MB: a DataLoader with workers passes its
            # batches through it and dies with `Bus error`. Linux gives a host half its
            # memory.
            shm_size=shm_bytes(),
        )
        networking = api.create_networking_config(
            {network_name(state.name): api.create_endpoint_config(aliases=node.dns_names)})
        try:
            api.create_container(
                image, name=container_name(state.name, node.name), hostname=node.name,
                labels={LABEL_CLUSTER: state.name, LABEL_NODE: node.name,
                        LABEL_CLASS: node.node_class, LABEL_SYSTEM: node.system},
                ports=[22] if port else None, host_config=host_config,
                networking_config=networking, stop_timeout=15, detach=True)
        except APIError as err:
            if mounts and "bind source path does not exist" in str(err.explanation or err):
                raise AitestbedError(
                    "the Docker engine cannot see "
                    f"{storage.Layout(state.root, '/home').directory}, where this cluster's "
                    "/home and /projects are mounted: it must run on this host and see its "
                    "mounts (not a remote, rootless or sandboxed engine)") from None
            raise

    def start_node(self, cluster: Cluster, node: Node) -> None:
        state, record = cluster.state, cluster.record
        container = self.client.containers.get(container_name(state.name, node.name))
        if container.status == "running":
            return
        if node.name in record.ports:
            front = self._front(state.name)
            if front.name not in container.attrs["NetworkSettings"]["Networks"]:
                front.connect(container)
        try:
            container.start()
        except APIError as err:
            text = str(err.explanation or err)
            if "port is already allocated" in text or "address already in use" in text:
                raise AitestbedError(
                    f"port {record.listen}:{record.ports.get(node.name)} for {node.name}'s "
                    "ssh is already in use: stop what holds it, or set ssh_port for this "
                    "host in the inventory") from None
            raise AitestbedError(f"cannot start {node.name}: {text}") from None

    def _each(self, cluster: str, nodes: list[str], work) -> None:
        containers = self._containers(cluster)
        chosen = [containers[n] for n in nodes if n in containers]
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            list(pool.map(work, chosen))

    def stop_nodes(self, cluster: str, nodes: list[str]) -> None:
        self._each(cluster, nodes, lambda c: c.stop())

    def remove_nodes(self, cluster: str, nodes: list[str]) -> None:
        # Stopped first, as `down` does: slurmctld saves its queue when asked to stop
        # (killed, it may lose the jobs submitted since its last save).
        self._each(cluster, nodes, lambda c: (c.stop(), c.remove()))

    def exec(self, cluster: str, node: str, argv: list[str], user: str | None = None,
             workdir: str | None = None, separate: bool = False) -> ExecResult:
        options = {"demux": separate}
        if user:
            options["user"] = user
        if workdir:
            options["workdir"] = workdir
        try:
            container = self.client.containers.get(container_name(cluster, node))
            result = container.exec_run(argv, **options)
        except NotFound as err:
            raise NodeGone(f"node {node} of cluster {cluster!r} has no container") from err
        except APIError as err:  # stopped between the two calls, or not running
            raise NodeGone(str(err.explanation or err)) from err
        except DockerException as err:
            raise AitestbedError(f"cannot run a command on {node}: {err}") from None
        if not separate:
            return ExecResult(result.exit_code, result.output or b"", b"")
        out, err = result.output
        return ExecResult(result.exit_code, out or b"", err or b"")

    def logs(self, cluster: str, node: str, tail: int = 5) -> str:
        try:
            return self.client.containers.get(container_name(cluster, node)).logs(
                tail=tail).decode(errors="replace")
        except (NotFound, APIError):
            return ""

    def terminal_argv(self, cluster: str, node: str, argv: list[str], tty: bool,
                      user: str | None = None) -> list[str]:
        docker_cli = shutil.which("docker")
        if docker_cli is None:
            raise AitestbedError("the docker command is missing: run `make engine`")
        return [docker_cli, "exec", "-i", *(["-t"] if tty else []),
                *(["-u", user] if user else []), container_name(cluster, node), *argv]

    def ansible_vars(self, cluster: str, node: str) -> dict:
        return {"ansible_connection": "docker", "ansible_host": container_name(cluster, node)}

    def destroy(self, cluster: str) -> list[str]:
        client = self.client
        removed = []
        containers = cluster_containers(client, cluster)
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            list(pool.map(lambda c: c.remove(force=True), containers))
        if containers:
            removed.append(f"{len(containers)} containers")
        label = {"label": f"{LABEL_CLUSTER}={cluster}"}
        egress.remove(cluster)
        for network in client.networks.list(filters=label):
            network.remove()
            removed.append(f"network {network.name}")
        for volume in client.volumes.list(filters=label):
            volume.remove(force=True)
            removed.append(f"volume {volume.name}")
        return removed
