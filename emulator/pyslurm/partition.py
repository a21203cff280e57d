"""pyslurm.Partition and pyslurm.Partitions, from `scontrol show partition -o`."""

from __future__ import annotations

from . import _backend
from ._record import Collection, Record
from .error import RPCError

UNLIMITED = "UNLIMITED"


def _minutes(value: str | None) -> int | str | None:
    """Slurm's [days-]hours:minutes:seconds (or UNLIMITED) -> minutes."""
    if not value or value == "NONE":
        return None
    if value in ("UNLIMITED", "INFINITE"):
        return UNLIMITED
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return (int(days or 0) * 24 + hours) * 60 + minutes + (1 if seconds else 0)


def _number(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def _text(value: str | None) -> str:
    return value or ""


def _yes(value: str | None) -> bool:
    return value == "YES"


def _node_list(value: str | None) -> str | None:
    return None if value in (None, "(null)") else value


class Partition(Record):
    # pyslurm name -> `scontrol show partition -o` key, and its conversion.
    _FIELDS = {
        "name": ("PartitionName", _text), "nodes": ("Nodes", _node_list),
        "state": ("State", _text), "is_default": ("Default", _yes),
        "is_hidden": ("Hidden", _yes), "is_root_only": ("RootOnly", _yes),
        "total_nodes": ("TotalNodes", _number), "total_cpus": ("TotalCPUs", _number),
        "max_time": ("MaxTime", _minutes), "default_time": ("DefaultTime", _minutes),
        "max_nodes": ("MaxNodes", _number), "min_nodes": ("MinNodes", _number),
        "oversubscribe": "OverSubscribe", "priority_tier": ("PriorityTier", _number),
    }

    def __init__(self, name: str | None = None):
        super().__init__({"PartitionName": name or ""})

    @staticmethod
    def load(name: str) -> Partition:
        partitions = Partitions.load()
        if name not in partitions:
            raise RPCError(msg=f"Partition '{name}' doesn't exist")
        return partitions[name]

    @staticmethod
    def _from_line(line: str) -> Partition:
        partition = Partition()
        partition._info = _backend.key_values(line)
        return partition

    def __repr__(self) -> str:
        return f"pyslurm.Partition('{self.name}')"


class Partitions(Collection):
    """Every partition of this Slurm cluster, keyed by name."""

    @classmethod
    def load(cls) -> Partitions:
        lines = _backend.run("scontrol", "show", "partition", "-o").splitlines()
        return cls(Partition._from_line(ln) for ln in lines if ln.strip())

    @property
    def total_cpus(self) -> int:
        return self._sum("total_cpus")

    @property
    def total_nodes(self) -> int:
        return self._sum("total_nodes")
