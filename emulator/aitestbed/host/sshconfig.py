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
from collections.abc import Callable
from pathlib import Path

from aitestbed.host import passcode
from aitestbed.host.inventory import Topology
from aitestbed.host.state import ClusterRecord, ClusterState

CONTROL_PERSIST = "30m"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with the final NUL
SOCKET_BIND_SUFFIX = 17  # ssh binds "<ControlPath>.<16 random characters>" first


def render(state: ClusterState, record: ClusterRecord, topology: Topology) -> str:
    login = [n for n in topology.nodes if n.name in record.ports]
    address = connect_address(record.listen)
    config = shlex.quote(str(state.ssh_config_path))
    lines = [
        f"# aitestbed cluster {state.name!r} (profile {record.profile}).",
        f"# Use: ssh -F {state.ssh_config_path} <host>",
        "",
        # First, so that the round-robin names' checks below know the user (%r).
        "Host *",
        f"    User {record.user}",
        "",
    ]
    for node in login:
        names = [node.name, node.fqdn]
        lines += [
            f"Host {' '.join(names)}",
            *_endpoint(node.name, record.ports[node.name], address),
            "",
        ]
    round_robin: dict[str, list[str]] = {}
    for node in login:
        for alias in node.dns_aliases:
            round_robin.setdefault(alias, []).append(node.name)
    short = {a: nodes for a, nodes in round_robin.items() if "." not in a}
    for alias, nodes in short.items():
        names = [alias, *(a for a in round_robin if a.startswith(alias + "."))]
        # A member whose shared connection is open takes the name (no new passcode):
        # the first one `ssh -O check` finds alive, with that node's port and key.
        for node in nodes:
            check = f"ssh -F {config} -l %r -O check {node} 2>/dev/null"
            lines += [
                f"Match originalhost {','.join(names)} exec {_quote_exec(check)}",
                *_endpoint(node, record.ports[node], address),
                "    ProxyCommand none",
                "",
            ]
        ports = [str(record.ports[node]) for node in nodes]
        relay = [sys.executable, "-m", "aitestbed.host.relay",
                 *(["--address", address] if address != "127.0.0.1" else []), *ports]
        lines += [
            f"Host {' '.join(names)}",
            f"    ProxyCommand {shlex.join(relay)}",
            f"    HostKeyAlias {alias}",
            "",
        ]
    # Login nodes ask for a one-time passcode: one authenticated connection per
    # host and user is kept and reused, so the code is typed once per session.
    lines += [
        "Host *",
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


def connect_address(listen: str) -> str:
    """Where this machine reaches ports published on `listen` (a wildcard: 127.0.0.1)."""
    return "127.0.0.1" if listen in ("0.0.0.0", "::", "") else listen


def _endpoint(node: str, port: int, address: str = "127.0.0.1") -> list[str]:
    return [f"    HostName {address}", f"    Port {port}", f"    HostKeyAlias {node}"]


def _quote_exec(command: str) -> str:
    """ssh_config's quoting: one double-quoted argument (no double quote inside)."""
    if '"' in command:
        raise ValueError(f"cannot quote {command!r} for ssh_config")
    return f'"{command}"'


def control_dir(state: ClusterState) -> Path:
    """Where the shared connections' sockets go: private, and short enough for a socket."""
    if len(str(state.login_dir)) + len("/cm-") + 40 + SOCKET_BIND_SUFFIX <= SOCKET_PATH_MAX:
        return state.login_dir
    return Path.home() / ".ssh"


def log_in(state: ClusterState, host: str, user: str, *options: str,
           wait: float = 3 * passcode.STEP,
           on_wait: Callable[[float], None] | None = None) -> subprocess.CompletedProcess:
    """Open the shared connection to a login node, typing the user's passcode.

    pam_oath takes each code once across the login nodes (they share one store)
    and refuses any code older than the last one used; its window takes the next
    step's code too. So this types the current code, or the next one when the
    current one was used, and when both were used waits for a new step, for up to
    `wait` seconds (telling `on_wait` how long each pause is): logging in to every
    login node takes about one step per node.
    """
    argv = ["ssh", "-F", str(state.ssh_config_path), "-o", "NumberOfPasswordPrompts=1",
            *options, "-l", user, host, "true"]
    deadline = time.monotonic() + wait
    refused = -1  # the newest step whose code was refused: older ones are refused too
    result = None
    while True:
        now = time.time()
        step = int(now) // passcode.STEP
        ahead = next((a for a in (0, 1) if step + a > refused), None)
        if ahead is None:  # both codes of this window were used: wait for the next step
            pause = passcode.seconds_left(now) + 0.5
            if result is not None and time.monotonic() + pause > deadline:
                return result
            if on_wait:
                on_wait(pause)
            time.sleep(pause)
            continue
        env = {**os.environ, "SSH_ASKPASS": str(state.askpass_path(user)),
               "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": os.environ.get("DISPLAY", ":0"),
               "AITESTBED_PASSCODE_AHEAD": str(ahead)}
        result = subprocess.run(argv, capture_output=True, text=True, env=env,
                                stdin=subprocess.DEVNULL, timeout=120, check=False)
        if result.returncode == 0 or "Permission denied" not in result.stderr:
            return result
        refused = max(refused, step + ahead)


def write(state: ClusterState, record: ClusterRecord, topology: Topology) -> Path:
    path = state.ssh_config_path
    path.parent.mkdir(parents=True, exist_ok=True)
    control_dir(state).mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(render(state, record, topology))
    return path
