"""A uniquely named mini cluster for the whole session, destroyed at the end.

Set AITESTBED_TEST_CLUSTER to run against an existing cluster instead (it is
then left running).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import testinfra
from aitestbed.host.driver import AITESTBED as _AITESTBED
from aitestbed.host.driver import Driver, profile_node_names
from aitestbed.host.naming import container_name
from aitestbed.host.state import ClusterState

AITESTBED = list(_AITESTBED)
# The mini profile's nodes, from inventory/mini.yml (the cluster the session brings up).
_MINI = profile_node_names("mini")
NODES = list(_MINI.all)
SAMBANOVA_NODES = list(_MINI.of("sambanova"))
LOGIN_NODES = list(_MINI.login)


def published(cluster: str) -> dict[str, tuple[str, int]]:
    """{login node: (address, port)} as the cluster's gate publishes their ssh (the only
    container Docker publishes a port from; aitestbed.node.gate)."""
    import docker  # noqa: PLC0415

    gate = docker.from_env().containers.get(f"{cluster}-gate")
    targets = json.loads(gate.labels["aitestbed.gate"])
    bindings = gate.attrs["HostConfig"]["PortBindings"]
    return {node: (bindings[f"{port}/tcp"][0]["HostIp"],
                   int(bindings[f"{port}/tcp"][0]["HostPort"]))
            for node, port in targets.items()}


@dataclass
class Cluster:
    """The session's cluster, used as its practice user from here (aitestbed.host.driver)."""

    name: str
    user: str
    logins: tuple[str, ...] = tuple(LOGIN_NODES)  # its login nodes (a subset's fewer)
    driver: Driver = field(init=False, repr=False)

    def __post_init__(self):
        # The tests' connections stay until log_out (a user's close 30 min after use);
        # a login node restarted under a test is logged in to again.
        self.driver = Driver(self.name, login_options=("-o", "ControlPersist=yes"),
                             relogin=True)

    def cli(self, *args: str, check: bool = True, timeout: float = 600):
        result = self.driver.cli(*args, timeout=timeout)
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
        return self.driver.ssh(host, command, *extra, timeout=timeout)

    def log_in(self, host: str, user: str | None = None):
        """Log in with the current passcode as a user types it; later ssh and scp share
        the connection."""
        return self.driver.log_in(host, user or self.user)

    def log_in_everywhere(self) -> None:
        """A passcode login on each login node (after `up`, old connections are gone)."""
        for host in self.logins:
            result = self.log_in(host)
            assert result.returncode == 0, f"{host}: {result.stderr}"

    def log_out(self, host: str, user: str | None = None) -> None:
        """Close the shared connection to host."""
        self.driver.log_out(host, user or self.user)

    def host(self, node: str):
        return testinfra.get_host(f"docker://{container_name(self.name, node)}")

    def container(self, node: str) -> str:
        return container_name(self.name, node)

    def run(self, host: str, command: str, timeout: float = 120) -> tuple[int, str]:
        """Run a shell command as the practice user on a login node: (rc, stdout+stderr)."""
        return self.driver.run(host, command, timeout=timeout)

    def hop(self, login: str, node: str, script: str, timeout: float = 600) -> tuple[int, str]:
        """Run `script` in a login shell on `node`, reached from `login` as in the guide."""
        result = self.driver.hop(login, node, script, timeout=timeout)
        return result.returncode, result.stdout + result.stderr


@contextmanager
def mini_testbed(provider: str, *, name: str | None = None, kube: Kube | None = None,
                 systems: str | None = None, timeout: float = 300):
    """A mini testbed on `provider` (docker, or kubernetes on `kube`, the session's test
    cluster: the class images pushed to its registry), used as the practice user and
    logged in to with a passcode on each login node; destroyed after, unless `name` is
    an existing cluster's (then left running)."""
    ours = name is None
    name = name or f"{'ci' if provider == 'docker' else 'k8s'}-{uuid.uuid4().hex[:6]}"
    user = "learner"
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "AITESTBED_USER")}
    os.environ["AITESTBED_USER"] = user
    args = ["up", "--profile", "mini", "--timeout", str(timeout)]
    if systems:
        args += ["--systems", systems]
    if provider == "kubernetes":
        os.environ["KUBECONFIG"] = kube.info["kubeconfig"]
        args += ["--provider", "kubernetes", "--registry", f"{kube.info['registry']}/aitestbed"]
    c = Cluster(name, user, tuple(n for n in LOGIN_NODES if not systems or any(
        n in _MINI.of(s) for s in systems.split(","))))
    try:
        if ours:
            # On Kubernetes, the first `up` also pushes the images and the workers pull them.
            c.cli(*args, timeout=1800 + timeout)
        # Each login node asks for a passcode once; later ssh reuse the connection.
        c.log_in_everywhere()
        yield c
    finally:
        for host in c.logins:
            c.log_out(host)
        if ours:
            c.cli("destroy", check=False)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def cluster():
    """The session's mini testbed on Docker (AITESTBED_TEST_CLUSTER: an existing one)."""
    with mini_testbed("docker", name=os.environ.get("AITESTBED_TEST_CLUSTER")) as c:
        yield c


KUBE_TEST_SCRIPT = Path(__file__).resolve().parents[2] / \
    "scripts/kube-test-cluster/kube_test_cluster.py"


class Kube:
    """A Kubernetes test cluster (make kube-test-cluster) and a namespace on it."""

    def __init__(self, name: str, info: dict, namespace: str, ours: bool = False):
        self.name, self.info, self.ns, self.ours = name, info, namespace, ours

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 120) -> str:
        result = subprocess.run([self.info["kubectl"], "--kubeconfig", self.info["kubeconfig"],
                                 *args], input=stdin, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result.stdout

    def sh(self, pod: str, script: str) -> str:
        return self.kubectl("-n", self.ns, "exec", pod, "--", "bash", "-c", script)


def kube_test_script(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KUBE_TEST_SCRIPT), *args], capture_output=True,
                          text=True, timeout=timeout)


_KUBE_DOWN: list = []  # how to remove the session's Kubernetes test cluster, once


@pytest.fixture(scope="session")
def kube_test_cluster():
    """The session's Kubernetes test cluster, shared by the modules that need one
    (test_kube_provider, test_kube_test_cluster: adjacent, by name): uniquely named and
    removed after the last test that uses it (pytest_runtest_teardown below), not idle
    through the rest of the session; or AITESTBED_TEST_KUBE_CLUSTER's (left running)."""
    existing = os.environ.get("AITESTBED_TEST_KUBE_CLUSTER")
    name = existing or f"ktc-{uuid.uuid4().hex[:6]}"
    cache = Path(os.environ.get("AITESTBED_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "aitestbed"),
        "kubernetes", "v1.32.13")
    if not existing and not (cache / "kubelet").is_file() and not shutil.which("go"):
        pytest.skip("no cached Kubernetes binaries and no Go to build them")
    if not existing:
        _KUBE_DOWN.append(lambda: kube_test_script("--name", name, "down", timeout=300))
    try:
        if not existing:
            # Binaries and images are cached: about half a minute (the first time, ~15 min).
            up = kube_test_script("--name", name, "up", timeout=3600)
            assert up.returncode == 0, up.stderr
        info = json.loads(kube_test_script("--name", name, "info", "--json", timeout=60).stdout)
        yield Kube(name, info, "default", ours=not existing)
    finally:
        _kube_down()


_DOWN_LATER: list[threading.Thread] = []


def _kube_down() -> None:
    while True:
        try:
            down = _KUBE_DOWN.pop()
        except IndexError:
            return
        down()


def pytest_configure(config):
    config.addinivalue_line("markers", "kube: the module runs on the session's Kubernetes "
                                       "test cluster (kept up from its first test to its last)")


def _on_kube(item) -> bool:
    return item is not None and (item.get_closest_marker("kube") is not None or
                                 "kube_test_cluster" in getattr(item, "fixturenames", ()))


def pytest_runtest_teardown(item, nextitem):
    """The last test that uses the Kubernetes test cluster has run: it is removed at the
    next test's setup (pytest_runtest_setup), once the module fixtures that run on it
    (a testbed on it) have been torn down."""
    if _on_kube(item) and not _on_kube(nextitem):
        item.config._aitestbed_kube_done = True


def pytest_runtest_setup(item):
    if getattr(item.config, "_aitestbed_kube_done", False) and not _on_kube(item):
        item.config._aitestbed_kube_done = False
        # Removing it goes on beside the next tests (a few seconds: the images the
        # workers unpacked stay in the image cache); the session waits for it at its end.
        later = threading.Thread(target=_kube_down, daemon=True)
        later.start()
        _DOWN_LATER.append(later)


def pytest_sessionfinish(session, exitstatus):
    for later in _DOWN_LATER:
        later.join(600)


@pytest.fixture(params=NODES)
def node(request, cluster):
    return request.param
