"""A uniquely named mini cluster for the whole session, destroyed at the end.

Set AITESTBED_TEST_CLUSTER to run against an existing cluster instead (it is
then left running).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
from aitestbed.host import sshconfig
from aitestbed.host.naming import container_name
from aitestbed.host.state import ClusterState

AITESTBED = [sys.executable, "-m", "aitestbed.cli"]
NODES = ["cer-cs2-01", "cer-cs2-02", "cer-login-01", "cer-mgmt-01", "gc-login-01",
         "gc-poplar-01", "gc-poplar-02", "gc-slurmctld", "sambanova", "sm-01", "sm-02",
         "sn10-slurmctld", "sn30-r1-h1", "sn30-slurmctld"]
SAMBANOVA_NODES = ["sambanova", "sm-01", "sm-02", "sn10-slurmctld", "sn30-r1-h1", "sn30-slurmctld"]
LOGIN_NODES = ["cer-login-01", "gc-login-01", "sambanova"]


@dataclass
class Cluster:
    name: str
    user: str

    def cli(self, *args: str, check: bool = True, timeout: float = 600):
        result = subprocess.run([*AITESTBED, "--name", self.name, *args], capture_output=True,
                                text=True, timeout=timeout, check=False)
        if check and result.returncode:
            raise AssertionError(f"aitestbed {' '.join(args)} failed:\n{result.stderr}")
        return result

    @property
    def state(self) -> ClusterState:
        return ClusterState(self.name)

    @property
    def record(self) -> dict:
        return json.loads(self.state.record_path.read_text())

    @property
    def ssh_config(self) -> Path:
        return self.state.ssh_config_path

    def ssh(self, host: str, command: str, *extra: str, timeout: float = 60):
        """ssh from the host, as a user does with the generated config (over the shared
        connection `log_in` opened, so no passcode is asked)."""
        argv = ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", *extra, host, command]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                check=False)
        if (result.returncode == 255 and not extra
                and "Permission denied (keyboard-interactive)" in result.stderr):
            # The shared connection is gone (a login node restarted): log in again.
            assert self.log_in(host).returncode == 0
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                    check=False)
        return result

    def log_in(self, host: str, user: str | None = None):
        """Log in with the current passcode as a user types it (SSH_ASKPASS answers the
        `Password:` prompt); the config keeps the connection for later ssh and scp.
        The tests' connections stay until log_out (a user's close 30 min after use)."""
        return sshconfig.log_in(self.state, host, user or self.user,
                                "-o", "ControlPersist=yes")

    def log_in_everywhere(self) -> None:
        """A passcode login on each login node (after `up`, old connections are gone)."""
        for host in LOGIN_NODES:
            result = self.log_in(host)
            assert result.returncode == 0, f"{host}: {result.stderr}"

    def log_out(self, host: str, user: str | None = None) -> None:
        """Close the shared connection to host."""
        subprocess.run(["ssh", "-F", str(self.ssh_config), "-l", user or self.user,
                        "-O", "exit", host], capture_output=True, check=False, timeout=30)

    def host(self, node: str):
        return testinfra.get_host(f"docker://{container_name(self.name, node)}")

    def container(self, node: str) -> str:
        return container_name(self.name, node)

    def run(self, host: str, command: str, timeout: float = 120) -> tuple[int, str]:
        """Run a shell command as the practice user on a login node: (rc, stdout+stderr)."""
        result = self.ssh(host, command, timeout=timeout)
        return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="session")
def cluster():
    existing = os.environ.get("AITESTBED_TEST_CLUSTER")
    name = existing or f"ci-{uuid.uuid4().hex[:6]}"
    user = "learner"
    os.environ["AITESTBED_USER"] = user
    c = Cluster(name, user)
    if not existing:
        c.cli("up", "--profile", "mini", timeout=1800)
    try:
        # Each login node asks for a passcode once; later ssh reuse the connection.
        c.log_in_everywhere()
        yield c
    finally:
        for host in LOGIN_NODES:
            c.log_out(host)
        if not existing:
            c.cli("destroy", check=False)


@pytest.fixture(params=NODES)
def node(request, cluster):
    return request.param
