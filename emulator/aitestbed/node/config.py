"""What the host hands each node: where its files are mounted, and node.json's record.

`aitestbed up` writes the cluster's state directory on the host (aitestbed.host.state);
every container mounts two parts of it read-only:
  NODE_DIR     /etc/aitestbed/node/     this host's own files (nodes/<node>/ on the host):
                 node.json             NodeConfig below
                 ssh_host_ed25519_key  the host key (and .pub)
                 access.conf           who may log in over ssh (ACCESS_CONF)
                 oath/<user>.oath      login nodes: each user's passcode enrolment
                                       (OATH_USERS); mfa.json, the tokens, is for the roles
                 kubernetes/           Cerebras nodes: their certificates
  CLUSTER_DIR  /etc/aitestbed/cluster/  what every node shares (common/ on the host):
                 accounts.json         groups, projects and users (ACCOUNTS)
                 ssh_known_hosts, users/<user>/, munge.key, slurm/<slurm cluster>/,
                 kubernetes/
Standard library only: the node side has nothing else but PyYAML.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

NODE_DIR = Path("/etc/aitestbed/node")
CLUSTER_DIR = Path("/etc/aitestbed/cluster")
NODE_JSON = "node.json"
# Rendered at `up` from roles/sshd's templates (aitestbed.host.sshdconf):
ACCESS_CONF = "access.conf"  # access.conf.j2
OATH_USERS = "oath"  # a directory: oath-user.j2 for each user with a token
ACCOUNTS = CLUSTER_DIR / "accounts.json"


class ConfigError(ValueError):
    """A file from the host that does not hold what this version reads."""


@dataclass(frozen=True)
class NodeConfig:
    """node.json: what this host is and runs, from the inventory (aitestbed.host.inventory.Node)."""

    name: str
    system: str
    node_class: str
    fqdn: str
    ssh_allow_groups: list[str]
    ssh_mfa: bool  # logins take a one-time passcode: oath/ holds the enrolments
    mounts: list[str]  # the shared trees mounted here (/home, /projects, ...)
    services: list[str]  # runit services to enable
    slurm_cluster: str  # "" when the host is in no Slurm cluster

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = NODE_JSON) -> NodeConfig:
        """The record, or ConfigError naming every missing and unknown key in one line."""
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"{source} is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{source} holds no JSON object")
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        unknown = sorted(k for k in data if k not in names)
        if missing or unknown:
            problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
                [f"unknown {', '.join(unknown)}"] if unknown else [])
            raise ConfigError(f"{source} was written by another version of aitestbed than "
                              f"this image's ({'; '.join(problems)}): `aitestbed up --recreate`")
        return cls(**data)

    @classmethod
    def load(cls, directory: Path = NODE_DIR) -> NodeConfig:
        path = directory / NODE_JSON
        return cls.from_json(path.read_text(), str(path))
