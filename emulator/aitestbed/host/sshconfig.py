"""The ssh_config users pass with `ssh -F`: one Host entry per login node.

Login nodes publish sshd on 127.0.0.1 only and ask for a one-time passcode
(`aitestbed passcode`); ControlMaster keeps one connection per login node, so
later ssh, scp and rsync there need no code. A round-robin name (`cerebras`)
goes through `aitestbed relay`, which picks one of its login nodes at random,
as the site's DNS does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from aitestbed.host import passcode
from aitestbed.host.inventory import Topology
from aitestbed.host.state import ClusterRecord, ClusterState

CONTROL_PERSIST = "30m"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with the final NUL
SOCKET_BIND_SUFFIX = 17  # ssh binds "<ControlPath>.<16 random characters>" first


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
        relay = [sys.executable, "-m", "aitestbed.host.relay", *map(str, ports)]
        lines += [
            f"Host {' '.join([alias, *fqdns])}",
            f"    ProxyCommand {shlex.join(relay)}",
            f"    HostKeyAlias {alias}",
            "",
        ]
    # Login nodes ask for a one-time passcode: one authenticated connection per
    # host and user is kept and reused, so the code is typed once per session.
    lines += [
        "Host *",
        f"    User {record.user}",
        "    PreferredAuthentications keyboard-interactive",
        "    PubkeyAuthentication no",
        f"    UserKnownHostsFile {state.login_dir / 'known_hosts'}",
        "    StrictHostKeyChecking yes",
        "    ControlMaster auto",
        f"    ControlPath {control_dir(state)}/cm-%C",
        f"    ControlPersist {CONTROL_PERSIST}",
        "    LogLevel ERROR",
        "",
    ]
    return "\n".join(lines)


def control_dir(state: ClusterState) -> Path:
    """Where the shared connections' sockets go: private, and short enough for a socket."""
    if len(str(state.login_dir)) + len("/cm-") + 40 + SOCKET_BIND_SUFFIX <= SOCKET_PATH_MAX:
        return state.login_dir
    return Path.home() / ".ssh"


def log_in(state: ClusterState, host: str, user: str, *options: str
           ) -> subprocess.CompletedProcess:
    """Open the shared connection to a login node, typing the user's passcode.

    pam_oath takes a code once across the login nodes (they share one store):
    when this step's code was used, type the next step's (pam_oath's window takes
    it); when that was used too, wait for the next step and do the same.
    """
    argv = ["ssh", "-F", str(state.ssh_config_path), "-o", "NumberOfPasswordPrompts=1",
            *options, "-l", user, host, "true"]
    for attempt in range(4):
        if attempt == 2:
            time.sleep(passcode.seconds_left() + 0.5)
        env = {**os.environ, "SSH_ASKPASS": str(state.askpass_path(user)),
               "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": os.environ.get("DISPLAY", ":0"),
               "AITESTBED_PASSCODE_AHEAD": str(attempt % 2)}
        result = subprocess.run(argv, capture_output=True, text=True, env=env,
                                stdin=subprocess.DEVNULL, timeout=120, check=False)
        if result.returncode == 0 or "Permission denied" not in result.stderr:
            return result
    return result


def write(state: ClusterState, record: ClusterRecord, topology: Topology) -> Path:
    path = state.ssh_config_path
    path.parent.mkdir(parents=True, exist_ok=True)
    control_dir(state).mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(render(state, record, topology))
    return path
