"""The GroqRack's PBS complex: the record `up` writes (aitestbed.host.systems.groq) into
the state directory's pbs/pbs.json and each PBS host reads at start (pbs_setup): the
server, the execution hosts (GroqNodes) and the client hosts (the login nodes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Complex:
    server: str
    moms: list[str]
    clients: list[str]
    domain: str = "ai.alcf.anl.gov"

    @classmethod
    def load(cls, path: Path, domain: str = "ai.alcf.anl.gov") -> Complex:
        data = json.loads(path.read_text())
        return cls(data["server"], list(data["moms"]), list(data["clients"]), domain)

    def to_json(self) -> str:
        """pbs.json (the domain is each node's own: node.json's FQDN)."""
        return json.dumps({"server": self.server, "moms": self.moms, "clients": self.clients},
                          indent=2) + "\n"

    def role(self, node: str) -> str:
        if node == self.server:
            return "server"
        return "mom" if node in self.moms else "client"

    @property
    def hosts(self) -> list[str]:
        return [self.server, *self.moms, *self.clients]
