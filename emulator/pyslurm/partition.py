"""pyslurm.Partition and pyslurm.Partitions, from `scontrol show partition -o`."""

from __future__ import annotations

from . import _backend
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


class Partition:
    def __init__(self, name: str | None = None):
        self._info: dict[str, str] = {"PartitionName": name or ""}

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

    @property
    def name(self) -> str:
        return self._info.get("PartitionName", "")

    @property
    def nodes(self) -> str | None:
        value = self._info.get("Nodes")
        return None if value in (None, "(null)") else value

    @property
    def state(self) -> str:
        return self._info.get("State", "")

    @property
    def is_default(self) -> bool:
        return self._info.get("Default") == "YES"

    @property
    def is_hidden(self) -> bool:
        return self._info.get("Hidden") == "YES"

    @property
    def is_root_only(self) -> bool:
        return self._info.get("RootOnly") == "YES"

    @property
    def total_nodes(self) -> int | str | None:
        return _number(self._info.get("TotalNodes"))

    @property
    def total_cpus(self) -> int | str | None:
        return _number(self._info.get("TotalCPUs"))

    @property
    def max_time(self) -> int | str | None:
        return _minutes(self._info.get("MaxTime"))

    @property
    def default_time(self) -> int | str | None:
        return _minutes(self._info.get("DefaultTime"))

    @property
    def max_nodes(self) -> int | str | None:
        return _number(self._info.get("MaxNodes"))

    @property
    def min_nodes(self) -> int | str | None:
        return _number(self._info.get("MinNodes"))

    @property
    def oversubscribe(self) -> str | None:
        return self._info.get("OverSubscribe")

    @property
    def priority_tier(self) -> int | str | None:
        return _number(self._info.get("PriorityTier"))

    def to_dict(self) -> dict:
        names = ["name", "nodes", "state", "is_default", "is_hidden", "is_root_only",
                 "total_nodes", "total_cpus", "max_time", "default_time", "max_nodes",
                 "min_nodes", "oversubscribe", "priority_tier"]
        return {n: getattr(self, n) for n in names}

    as_dict = to_dict


class Partitions(dict):
    """Every partition of this Slurm cluster, keyed by name."""

    def __init__(self, partitions: list[Partition] | dict | None = None):
        super().__init__()
        for partition in (partitions.values() if isinstance(partitions, dict)
                          else partitions or []):
            self[partition.name] = partition

    @staticmethod
    def load() -> Partitions:
        lines = _backend.run("scontrol", "show", "partition", "-o").splitlines()
        return Partitions([Partition._from_line(ln) for ln in lines if ln.strip()])

    def reload(self) -> Partitions:
        self.clear()
        self.update(Partitions.load())
        return self

    @property
    def total_cpus(self) -> int:
        return sum(p.total_cpus for p in self.values() if isinstance(p.total_cpus, int))

    @property
    def total_nodes(self) -> int:
        return sum(p.total_nodes for p in self.values() if isinstance(p.total_nodes, int))
