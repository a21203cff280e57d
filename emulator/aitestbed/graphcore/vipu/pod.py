"""A POD's IPUs and its partitions: the model the V-IPU server keeps.

The POD's IPUs are numbered in host order (gc-poplar-01 has IPUs 0-15, -02 has
16-31, ...), from the `ipu` lines of Slurm's gres.conf, so Slurm's count of a
host's IPUs and the V-IPU server's always agree. A partition holds specific
IPUs; Slurm's count-only GRES guarantees the counts, the POD picks the IPUs.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aitestbed.node.daemon import StateError

_GRES_LINE = re.compile(r"^\s*NodeName=(\S+)\s+Name=ipu\s+Count=(\d+)", re.MULTILINE)


class PodError(StateError):
    """A request the POD cannot satisfy; `status` is the HTTP status to answer with (409
    unless given), as for every node daemon's StateError."""


@dataclass
class Partition:
    name: str
    ipus: list[int]
    hosts: dict[str, list[int]]
    job_id: str = ""
    user: str = ""
    state: str = "PS_ACTIVE"


@dataclass
class Pod:
    hosts: dict[str, list[int]]  # host -> its IPU ids
    partitions: dict[str, Partition] = field(default_factory=dict)

    @classmethod
    def from_gres_conf(cls, text: str) -> Pod:
        hosts: dict[str, list[int]] = {}
        next_id = 0
        for host, count in sorted(_GRES_LINE.findall(text)):
            hosts[host] = list(range(next_id, next_id + int(count)))
            next_id += int(count)
        return cls(hosts=hosts)

    @classmethod
    def from_files(cls, gres_conf: Path) -> Pod:
        return cls.from_gres_conf(gres_conf.read_text())

    @property
    def size(self) -> int:
        return sum(len(ids) for ids in self.hosts.values())

    def in_use(self) -> set[int]:
        return {i for p in self.partitions.values() for i in p.ipus}

    def create(self, name: str, counts: dict[str, int], job_id: str = "",
               user: str = "") -> Partition:
        if name in self.partitions:
            existing = self.partitions[name]
            if {h: len(ids) for h, ids in existing.hosts.items()} == counts:
                return existing  # a retried prolog
            raise PodError(f"partition {name} already exists")
        used = self.in_use()
        chosen: dict[str, list[int]] = {}
        for host, count in sorted(counts.items()):
            if host not in self.hosts:
                raise PodError(f"host {host} has no IPUs in this POD", 400)
            free = [i for i in self.hosts[host] if i not in used]
            if count < 1 or count > len(free):
                raise PodError(f"cannot allocate {count} IPUs on {host}: {len(free)} free")
            chosen[host] = free[:count]
        partition = Partition(name=name, ipus=sorted(i for ids in chosen.values() for i in ids),
                              hosts=chosen, job_id=job_id, user=user)
        self.partitions[name] = partition
        return partition

    def remove(self, name: str) -> None:
        if self.partitions.pop(name, None) is None:
            raise PodError(f"partition {name} not found", 404)

    def to_dict(self) -> dict:
        return {"partitions": [asdict(p) for p in self.partitions.values()]}

    def load_partitions(self, data: dict) -> None:
        self.partitions = {p["name"]: Partition(**p) for p in data.get("partitions", [])}
