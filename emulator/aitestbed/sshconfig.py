"""The ssh_config users pass with `ssh -F`: one Host entry per login node.

Login nodes publish sshd on 127.0.0.1 only. A round-robin name (`cerebras`)
goes through `aitestbed relay`, which picks one of its login nodes at random,
as the site's DNS does.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .inventory import Topology
from .state import ClusterRecord, ClusterState


def render(state: ClusterState, record: ClusterRecord, topology: Topology) -> str:
    login = [n for n in topology.nodes if n.name in record.ports]
    lines = [
        f"# aitestbed cluster {state.name!r} (profile {record.profile}).",
        f"# Use: ssh -F {state.ssh_config_path} <host>",
        "",
    ]
    for node in login:
        names = [node.name, node.fqdn]
        lines += [
            f"Host {' '.join(names)}",
            "    HostName 127.0.0.1",
            f"    Port {record.ports[node.name]}",
            f"    HostKeyAlias {node.name}",
            "",
        ]
    round_robin: dict[str, list[int]] = {}
    for node in login:
        for alias in node.dns_aliases:
            round_robin.setdefault(alias, []).append(record.ports[node.name])
    short = {a: ports for a, ports in round_robin.items() if "." not in a}
    for alias, ports in short.items():
        fqdns = [a for a in round_robin if a.startswith(alias + ".")]
        relay = [sys.executable, "-m", "aitestbed.relay", *map(str, ports)]
        lines += [
            f"Host {' '.join([alias, *fqdns])}",
            f"    ProxyCommand {shlex.join(relay)}",
            f"    HostKeyAlias {alias}",
            "",
        ]
    lines += [
        "Host *",
        f"    User {record.user}",
        f"    IdentityFile {state.user_key(record.user)}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {state.login_dir / 'known_hosts'}",
        "    StrictHostKeyChecking yes",
        "    LogLevel ERROR",
        "",
    ]
    return "\n".join(lines)


def write(state: ClusterState, record: ClusterRecord, topology: Topology) -> Path:
    path = state.ssh_config_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(state, record, topology))
    return path
