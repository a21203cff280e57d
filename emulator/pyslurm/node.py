"""pyslurm.Node and pyslurm.Nodes, from `sinfo --json`."""

from __future__ import annotations

from . import _backend
from ._record import Collection, Record
from .error import RPCError

# pyslurm name -> sinfo --json field.
_SINFO_FIELDS = {
    "name": "name", "address": "address", "hostname": "hostname", "reason": "reason",
    "weight": "weight", "architecture": "architecture", "operating_system": "operating_system",
    "slurm_version": "slurmd_version", "real_memory": "real_memory",
    "free_memory": "free_memory", "allocated_memory": "alloc_memory",
    "total_cpus": "cpus", "allocated_cpus": "alloc_cpus", "idle_cpus": "idle_cpus",
    "sockets": "sockets", "boards": "boards", "cores_per_socket": "cores",
    "threads_per_core": "threads", "partitions": "partitions", "boot_time": "boot_time",
    "slurmd_start_time": "slurmd_start_time", "last_busy_time": "last_busy",
    "slurmd_port": "port", "comment": "comment",
}


class Node(Record):
    _FIELDS = _SINFO_FIELDS
    _DERIVED = ("state", "configured_gres", "allocated_gres", "cpu_load")

    def __init__(self, name: str | None = None):
        super().__init__({"name": name})

    @staticmethod
    def load(name: str) -> Node:
        for info in _backend.run_json("sinfo")["nodes"]:
            if info["name"] == name:
                return Node._from_json(info)
        raise RPCError(msg=f"Node '{name}' does not exist")

    @staticmethod
    def _from_json(info: dict) -> Node:
        node = Node()
        node._info = info
        return node

    def __repr__(self) -> str:
        return f"pyslurm.Node('{self.name}')"

    @property
    def state(self) -> str:
        """"IDLE", "MIXED", "ALLOCATED", "DOWN", ... with flags: "IDLE+DRAIN"."""
        flags = self._info.get("state_flags") or []
        return "+".join([str(self._info.get("state", "")).upper(), *flags])

    @property
    def configured_gres(self) -> dict[str, int]:
        return _backend.parse_gres(self._info.get("gres"))

    @property
    def allocated_gres(self) -> dict[str, int]:
        return _backend.parse_gres(self._info.get("gres_used"))

    @property
    def cpu_load(self) -> float:
        return (self._info.get("cpu_load") or 0) / 100


class Nodes(Collection):
    """Every node of this Slurm cluster, keyed by name."""

    @classmethod
    def load(cls, preload_passwd_info: bool = False) -> Nodes:
        return cls(Node._from_json(n) for n in _backend.run_json("sinfo")["nodes"])

    @property
    def total_cpus(self) -> int:
        return self._sum("total_cpus")

    @property
    def idle_cpus(self) -> int:
        return self._sum("idle_cpus")

    @property
    def allocated_cpus(self) -> int:
        return self._sum("allocated_cpus")
