"""The appliance's cluster record: what `up` writes (aitestbed.host.systems.cerebras) into
the state directory's kubernetes/cluster.json and every Cerebras node reads at start
(node_setup), installing all of it but the API server's address as
/etc/cerebras/cluster.json for csctl, the scheduler and the agents.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ApplianceCluster:
    server: str  # https://<management node>:6443
    management_node: str
    systems: list[str]  # the CS-2/CS-3 nodes
    # What the inventory says of it (cs3.inventory_settings): the release csctl follows,
    # the system model, the support servers and how many execute jobs run at once.
    release: str = "2.1.1"
    system_model: str = "CS-2"
    support: dict = field(default_factory=dict)
    max_execute: int = 1

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def load(cls, path: Path) -> ApplianceCluster:
        data = json.loads(path.read_text())
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def settings(self) -> dict:
        """/etc/cerebras/cluster.json: the record without the API server's address."""
        return {k: v for k, v in asdict(self).items() if k != "server"}
