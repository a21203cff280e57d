"""The Docker provider: each node a container on the cluster's internal network.

- the network `<cluster>-net` is internal: Docker drops what its containers send out of it
  and publishes nothing from it. Every node, login nodes included, is on it alone. The
  cluster's gate (`<cluster>-gate`, aitestbed.node.gate) is the one container also on
  `<cluster>-front`, where Docker publishes each login node's ssh port on the record's
  address (127.0.0.1 unless a workshop named another); it forwards each port to its login
  node's sshd and runs nothing else, as nobody, without capabilities. The offline
  guarantee is Docker's own, whoever runs `up` (no firewall rule, no root);
- the state directory's files are bound read-only (`nodes/<node>` and `common`), the
  shared file systems are named volumes or the cluster's own file systems
  (host/storage), per-node volumes are named volumes;
- a node is `docker exec`'d into; Ansible uses its docker connection;
- what a cluster takes of this host (login nodes' ports, /home and /projects as file
  systems of its own) is decided in `provision` (provider/docker_host).
"""

from __future__ import annotations

import datetime
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import docker
from docker.errors import APIError, DockerException, NotFound

from aitestbed.host import egress, engine, images, storage
from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.naming import (
    LABEL_CLASS,
    LABEL_CLUSTER,
    LABEL_NODE,
    LABEL_OWNER,
    LABEL_SYSTEM,
    container_name,
    front_network_name,
    gate_name,
    network_name,
    node_volume_name,
    owner,
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
from aitestbed.node import gate
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

if TYPE_CHECKING:
    from aitestbed.host.cluster import Cluster

PARALLEL = 4
DNS_OPTIONS = ["timeout:1", "attempts:1"]
# The gate: its forwarder in the login image's venv (roles/common), and the label that
# says which login node each of its ports reaches ({"gc-login-01": 2201, ...}).
GATE_PYTHON = "/opt/aitestbed/venv/bin/python"
LABEL_GATE = "aitestbed.gate"
LABEL_GATE_SERVICES = "aitestbed.gate.services"  # {"<node>:<port>": port on 127.0.0.1}
SERVICES_ADDRESS = "127.0.0.1"
NOBODY = "65534:65534"
GATE_READY_S = 30.0


def cluster_containers(client: docker.DockerClient, name: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={name}"})


def published_on(container, port: int | str = 22) -> str | None:
    """The address a container's `port` is published on (None: not published)."""
    bindings = (container.attrs.get("HostConfig") or {}).get("PortBindings") or {}
    for binding in bindings.get(f"{port}/tcp") or []:
        return binding.get("HostIp") or "0.0.0.0"
    return None


def gate_targets(container) -> dict[str, int]:
    """The gate's {login node: published port}, from its label."""
    try:
        return {str(k): int(v) for k, v in json.loads(container.labels.get(LABEL_GATE) or
                                                      "{}").items()}
    except (ValueError, AttributeError):
        return {}


def gate_services(container) -> dict[str, int]:
    """The gate's {"<node>:<port>": published port} of the services it forwards."""
    try:
        return {str(k): int(v) for k, v in json.loads(
            container.labels.get(LABEL_GATE_SERVICES) or "{}").items()}
    except (ValueError, AttributeError):
        return {}


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
        systems; the login nodes' ports free, or the cluster's running gate's."""
        warnings = []
        if cluster.record.storage == "image":
            warnings += storage.apply_accounts(
                cluster.state.root, storage.topology_mounts(cluster.topology),
                json.loads((cluster.state.common_dir / "accounts.json").read_text()))
        gate_ = self._gate_container(cluster.name)
        held = ({p for p in gate_targets(gate_).values()
                 if published_on(gate_, p) == cluster.record.listen}
                | {p for p in gate_services(gate_).values()
                   if published_on(gate_, p) == SERVICES_ADDRESS}
                if gate_ and gate_.status == "running" else set())
        docker_host.check_ports(cluster.topology, cluster.record, held)
        return warnings

    def after_start(self, cluster: Cluster) -> bool:
        """The gate, made again when what it publishes changed, started and listening."""
        self._ensure_gate(cluster)
        return False

    def publish(self, cluster: Cluster, address: str) -> list[str]:
        """The gate is made again publishing on `address` (Docker binds ports at creation);
        the login nodes and what runs on them are not touched: none is made again."""
        record = cluster.record
        if record.listen != address:
            current = self._gate_container(cluster.name)
            for node, port in sorted(record.ports.items()):
                if port_in_use(port, address) and not (current and current.status == "running"
                                                       and address == record.listen):
                    raise AitestbedError(f"port {address}:{port} for {node}'s ssh is already "
                                         "in use by another program: stop it first")
            record.listen = address
            cluster.save()
        self._ensure_gate(cluster)
        return []

    def ensure_images(self, node_classes: list[str]) -> dict[str, str]:
        return images.ensure_class_images(self.client, node_classes)

    def ensure_network(self, cluster: str, topology: Topology) -> list[str]:
        warnings = engine.describe(self.client)  # what a rootless or Podman engine lacks
        if note := self._ensure_internal(cluster, topology):
            warnings.append(note)
        if any(node.ssh_publish or node.publish_ports for node in topology.nodes):
            self._front(cluster)
        egress.remove(cluster)  # the firewall rule of clusters made before the gate
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
                                           internal=True, labels=self._labels(cluster))

    def _front(self, cluster: str):
        """The gate's published network (the only one a port is published from)."""
        try:
            return self.client.networks.get(front_network_name(cluster))
        except NotFound:
            return self.client.networks.create(
                front_network_name(cluster), driver="bridge", labels=self._labels(cluster),
                options={"com.docker.network.bridge.name": egress.front_bridge(cluster)})

    @staticmethod
    def _labels(cluster: str) -> dict[str, str]:
        return {LABEL_CLUSTER: cluster, LABEL_OWNER: owner()}

    def holder(self, cluster: str) -> str | None:
        label = {"label": f"{LABEL_CLUSTER}={cluster}"}
        held = [c.labels for c in cluster_containers(self.client, cluster)]
        held += [n.attrs.get("Labels") or {} for n in self.client.networks.list(filters=label)]
        held += [v.attrs.get("Labels") or {} for v in self.client.volumes.list(filters=label)]
        if not held:
            return None
        return next((o for labels in held if (o := labels.get(LABEL_OWNER))), "")

    def ensure_volume(self, cluster: str, volume: str, mount: str) -> None:
        try:
            self.client.volumes.get(volume)
        except NotFound:
            self.client.volumes.create(volume, labels={**self._labels(cluster),
                                                       "aitestbed.mount": mount})

    # nodes -----------------------------------------------------------------------------
    def _containers(self, cluster: str) -> dict:
        return {c.labels.get(LABEL_NODE): c for c in cluster_containers(self.client, cluster)}

    def nodes(self, cluster: str) -> dict[str, NodeHandle]:
        """Each node; a login node's `listen` is where the gate publishes its ssh. A node
        made before the gate (Docker publishing its ssh itself) is to be made again."""
        containers = self._containers(cluster)
        gate_ = containers.pop(None, None)
        listen = ({node: published_on(gate_, port) for node, port in gate_targets(gate_).items()}
                  if gate_ else {})
        return {name: NodeHandle(name, c.status, c.attrs["Config"]["Image"], listen.get(name),
                                 remake=published_on(c) is not None)
                for name, c in containers.items() if name}

    # the gate --------------------------------------------------------------------------
    def _gate_container(self, cluster: str):
        try:
            return self.client.containers.get(gate_name(cluster))
        except NotFound:
            return None

    def _ensure_gate(self, cluster: Cluster) -> None:
        """The gate publishing each login node's ssh port on the record's address and each
        published service's port on 127.0.0.1, made again when its ports, address or image
        changed; started, and listening when this returns. Nothing published, no gate."""
        name, record = cluster.name, cluster.record
        targets = {n.name: record.ports[n.name] for n in cluster.topology.nodes
                   if n.ssh_publish and n.name in record.ports}
        services = {key: port for key, port in record.services.items()
                    if key.rpartition(":")[0] in {n.name for n in cluster.topology.nodes}}
        current = self._gate_container(name)
        if not targets and not services:
            if current:
                current.remove(force=True)
            return
        containers = self._containers(name)
        image = next(containers[n].attrs["Config"]["Image"]
                     for n in [*sorted(targets), *sorted(k.rpartition(":")[0] for k in services)]
                     if n in containers)
        if current and (gate_targets(current) != targets
                        or gate_services(current) != services
                        or current.attrs["Config"]["Image"] != image
                        or any(published_on(current, p) != record.listen
                               for p in targets.values())
                        or any(published_on(current, p) != SERVICES_ADDRESS
                               for p in services.values())):
            current.remove(force=True)
            current = None
        if current is None:
            current = self._create_gate(cluster, targets, services, image)
        if current.status != "running":
            try:
                current.start()
            except APIError as err:
                text = str(err.explanation or err)
                if "port is already allocated" in text or "address already in use" in text:
                    taken = [f"{record.listen}:{p}" for p in targets.values()]
                    taken += [f"{SERVICES_ADDRESS}:{p}" for p in services.values()]
                    raise AitestbedError(
                        f"a port of {', '.join(taken)} (the login nodes' ssh and the cluster's "
                        "services) is already in use: stop what holds it, or set ssh_port for "
                        "that host in the inventory") from None
                raise AitestbedError(f"cannot start the cluster's gate: {text}") from None
        self._wait_listening(current)

    def _create_gate(self, cluster: Cluster, targets: dict[str, int],
                     services: dict[str, int], image: str):
        name, record = cluster.name, cluster.record
        api = self.client.api
        ports = sorted([*targets.values(), *services.values()])
        bindings = {p: (record.listen, p) for p in targets.values()}
        bindings.update({p: (SERVICES_ADDRESS, p) for p in services.values()})
        host_config = api.create_host_config(
            port_bindings=bindings,
            restart_policy={"Name": "unless-stopped"},
            cap_drop=["ALL"], security_opt=["no-new-privileges"], read_only=True,
            mem_limit="128m", pids_limit=64)
        networking = api.create_networking_config(
            {front_network_name(name): api.create_endpoint_config()})
        forwards = [f"{targets[n]}={n}:22" for n in sorted(targets)]
        forwards += [f"{port}={key}" for key, port in sorted(services.items())]
        made = api.create_container(
            image, name=gate_name(name), hostname="gate", user=NOBODY,
            entrypoint=[GATE_PYTHON, "-m", "aitestbed.node.gate"],
            command=forwards,
            labels={**self._labels(name), LABEL_GATE: json.dumps(targets, sort_keys=True),
                    LABEL_GATE_SERVICES: json.dumps(services, sort_keys=True)},
            ports=ports, host_config=host_config, networking_config=networking,
            stop_timeout=5, detach=True)
        # the nodes' network second: Docker creates a container on one network
        self.client.networks.get(network_name(name)).connect(made["Id"])
        return self.client.containers.get(made["Id"])

    @staticmethod
    def _wait_listening(container) -> None:
        """Until the gate's current run says it listens (an earlier run's lines, before a
        restart, do not count)."""
        deadline = time.monotonic() + GATE_READY_S
        container.reload()
        started = container.attrs["State"]["StartedAt"]
        since = int(datetime.datetime.fromisoformat(started[:19] + "+00:00").timestamp())
        while gate.READY not in container.logs(since=since).decode(errors="replace"):
            container.reload()
            if container.status != "running" or time.monotonic() > deadline:
                said = container.logs(tail=5).decode(errors="replace").strip()
                raise AitestbedError("the cluster's gate (its login nodes' ssh) did not start: "
                                     f"{said or container.status}")
            time.sleep(0.1)

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
        host_config = api.create_host_config(
            binds=binds,
            mounts=mounts or None,
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
                labels={**self._labels(state.name), LABEL_NODE: node.name,
                        LABEL_CLASS: node.node_class, LABEL_SYSTEM: node.system},
                host_config=host_config,
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
        state = cluster.state
        container = self.client.containers.get(container_name(state.name, node.name))
        if container.status == "running":
            return
        try:
            container.start()
        except APIError as err:
            raise AitestbedError(f"cannot start {node.name}: "
                                 f"{err.explanation or err}") from None

    def _each(self, cluster: str, nodes: list[str], work) -> None:
        containers = self._containers(cluster)
        chosen = [containers[n] for n in nodes if n in containers]
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            list(pool.map(work, chosen))

    def stop_nodes(self, cluster: str, nodes: list[str]) -> None:
        self._each(cluster, nodes, lambda c: c.stop())
        # the gate stops with the last node (`down`), and `up` starts it again
        containers = self._containers(cluster)
        gate_ = containers.pop(None, None)
        if gate_ and not any(c.status == "running" for c in containers.values()):
            gate_.stop(timeout=5)

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
