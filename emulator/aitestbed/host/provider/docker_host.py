"""What a Docker cluster takes of this host: its login nodes' ssh ports and its services'
ports (the Metis gateway's HTTPS, on 127.0.0.1; picked once, kept in the record, checked
free before nodes start) and /home and /projects as file systems
of its own where the host can make them (host/storage), else Docker volumes.
"""

from __future__ import annotations

import shutil

from aitestbed.host import storage
from aitestbed.host.accounts import parse_size
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Topology
from aitestbed.host.provider.base import NOT_ENFORCED
from aitestbed.host.state import ClusterRecord, ClusterState, free_port, port_in_use, recorded_ports

KEPT_VOLUMES = ("this cluster keeps the Docker volumes it was made with (its files stay; "
                "a cluster made again, after `destroy`, gets its own file systems)")


def service_key(node: str, port: int) -> str:
    """The record's name of a node's published service port."""
    return f"{node}:{port}"


def assign_ports(topology: Topology, record: ClusterRecord) -> None:
    """Each published login node's port: the inventory's ssh_port, the one the record has,
    or a free one no other cluster recorded; each published service's port likewise (the
    record's, or a free one: services are always published on 127.0.0.1)."""
    taken = recorded_ports() - set(record.ports.values()) - set(record.services.values())

    def mine() -> set[int]:
        return taken | set(record.ports.values()) | set(record.services.values())

    for node in topology.nodes:
        if not node.ssh_publish:
            continue
        if node.ssh_port:
            record.ports[node.name] = node.ssh_port
        elif node.name not in record.ports:
            record.ports[node.name] = free_port(mine())
    wanted = {service_key(n.name, p) for n in topology.nodes for p in n.publish_ports}
    for key in sorted(set(record.services) - wanted):
        del record.services[key]
    for key in sorted(wanted - set(record.services)):
        record.services[key] = free_port(mine())


def check_ports(topology: Topology, record: ClusterRecord, held: set[int]) -> None:
    """The login nodes' and services' ports are free, or `held` (the cluster's own gate
    publishes them); another program's is named."""
    for node in topology.nodes:
        port = record.ports.get(node.name)
        if port and port not in held and port_in_use(port, record.listen):
            raise AitestbedError(
                f"port {record.listen}:{port} for {node.name}'s ssh is already in use by another "
                "program: stop it, or set ssh_port for this host in the inventory"
            )
    for key, port in sorted(record.services.items()):
        if port not in held and port_in_use(port):
            raise AitestbedError(
                f"port 127.0.0.1:{port} for {key} is already in use by another program: stop "
                f"it, or forget the port (delete \"{key}\" from services in cluster.json) so "
                "the next `up` picks another")


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
