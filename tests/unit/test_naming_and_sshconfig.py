import subprocess

import pytest
from aitestbed.host import inventory, naming, sshconfig, state
from aitestbed.host.errors import AitestbedError


def test_every_engine_object_is_prefixed_with_the_cluster_name():
    assert naming.container_name("ci-1", "gc-poplar-02") == "ci-1-gc-poplar-02"
    assert naming.network_name("ci-1") == "ci-1-net"
    assert naming.volume_name("ci-1", "/home") == "ci-1-home"


@pytest.mark.parametrize("bad", ["", "Upper", "under_score", "-lead", "x" * 41])
def test_bad_cluster_names_are_refused(bad):
    with pytest.raises(AitestbedError, match="invalid cluster name"):
        naming.check_cluster_name(bad)


def test_ssh_config_has_a_host_entry_per_login_node_on_loopback():
    topology = inventory.load("alcf")
    cluster = state.ClusterState("p")
    ports = {"cer-login-01": 22001, "cer-login-02": 22002, "cer-login-03": 22003,
             "gc-login-01": 22004, "gc-login-02": 22005, "sambanova": 22006}
    record = state.ClusterRecord("p", "alcf", "", None, "alice", ports)
    text = sshconfig.render(cluster, record, topology)
    for node, port in ports.items():
        block = text.split(f"Host {node} ")[1].split("\n\n")[0]
        assert "HostName 127.0.0.1" in block and f"Port {port}" in block
    assert "Host sambanova sambanova.alcf.anl.gov" in text
    rr = text.split("Host cerebras cerebras.ai.alcf.anl.gov")[1].split("\n\n")[0]
    assert "aitestbed.host.relay 22001 22002 22003" in rr
    assert "User alice" in text and "StrictHostKeyChecking yes" in text
    assert "gc-poplar" not in text


def test_ssh_config_asks_the_passcode_once_per_login_node(isolated_state):
    topology = inventory.load("mini")
    cluster = state.ClusterState("p")
    record = state.ClusterRecord("p", "mini", "", None, "alice", {"gc-login-01": 22001})
    text = sshconfig.render(cluster, record, topology)
    assert "PreferredAuthentications keyboard-interactive" in text
    assert "ControlMaster auto" in text and "ControlPersist 30m" in text
    socket_dir = text.split("ControlPath ")[1].split("/cm-%C")[0]
    assert len(socket_dir) + len("/cm-") + 40 + 17 < 108  # ssh's temporary socket name fits
    assert "IdentityFile" not in text


@pytest.mark.parametrize("name", ["ci-abc123", "rehearse-81f078", "x" * 40])
def test_the_shared_connections_socket_path_always_fits(name, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", "/root/.local/state")
    cluster = state.ClusterState(name)
    binding = f"{sshconfig.control_dir(cluster)}/cm-{'0' * 40}.{'x' * 16}"
    assert len(binding) <= 107
    if name.startswith("ci-"):
        assert sshconfig.control_dir(cluster) == cluster.login_dir


class FakeLoginNodes:
    """pam_oath's rule across login nodes sharing one store: a code is taken once, and
    never one older than the last taken; the window takes the next step's code too.
    The clock is fake: sleeping moves it."""

    def __init__(self, now: float, last_taken: int):
        self.now, self.last_taken, self.tries = now, last_taken, []

    def run(self, argv, env, **kwargs):
        step = int(self.now) // 30 + int(env["AITESTBED_PASSCODE_AHEAD"])
        self.tries.append(step)
        self.now += 0.5
        if step > self.last_taken and step <= int(self.now) // 30 + 1:
            self.last_taken = step
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.CompletedProcess(argv, 255, "", "user@host: Permission denied "
                                           "(keyboard-interactive).\n")


@pytest.fixture
def login_nodes(monkeypatch):
    nodes = FakeLoginNodes(now=30 * 1000 + 3, last_taken=1000)  # this step's code was used
    monkeypatch.setattr(sshconfig.subprocess, "run", nodes.run)
    monkeypatch.setattr(sshconfig.time, "time", lambda: nodes.now)
    monkeypatch.setattr(sshconfig.time, "monotonic", lambda: nodes.now)

    def sleep(seconds):
        nodes.now += seconds
    monkeypatch.setattr(sshconfig.time, "sleep", sleep)
    return nodes


def test_logging_in_to_every_login_node_waits_for_new_codes(login_nodes):
    cluster = state.ClusterState("p")
    for host in ["cer-login-01", "cer-login-02", "cer-login-03", "gc-login-01"]:
        assert sshconfig.log_in(cluster, host, "alice").returncode == 0
    # one code per node, each newer than the last: the next step's, then a wait each time
    assert sorted(set(login_nodes.tries)) == list(range(1000, 1005))
    assert login_nodes.last_taken == 1004
    assert login_nodes.now < 30 * 1000 + 3 * 30 + 10


def test_logging_in_gives_up_with_ssh_s_answer_after_the_wait(login_nodes):
    login_nodes.last_taken = 10**9  # every code refused (say, a wrong token)
    result = sshconfig.log_in(state.ClusterState("p"), "gc-login-01", "alice", wait=60)
    assert result.returncode == 255 and "Permission denied" in result.stderr
    assert len(login_nodes.tries) <= 5


def test_a_round_robin_name_rides_an_open_connection_to_one_of_its_nodes(isolated_state):
    topology = inventory.load("alcf")
    cluster = state.ClusterState("p")
    ports = {"cer-login-01": 22001, "cer-login-02": 22002, "cer-login-03": 22003,
             "gc-login-01": 22004, "sambanova": 22006}
    record = state.ClusterRecord("p", "alcf", "", None, "alice", ports)
    text = sshconfig.render(cluster, record, topology)
    # the user is known before the checks run (%r), and each member is checked in turn
    assert text.index("User alice") < text.index("Match ")
    for node, port in list(ports.items())[:3]:
        match = (f"Match originalhost cerebras,cerebras.ai.alcf.anl.gov exec \"ssh -F "
                 f"{cluster.ssh_config_path} -l %r -O check {node} 2>/dev/null\"")
        block = text.split(match)[1].split("\n\n")[0]
        assert block.split() == ["HostName", "127.0.0.1", "Port", str(port), "HostKeyAlias",
                                 node, "ProxyCommand", "none"]
    # with no connection open, ssh resolves the name to the relay (as the site's DNS)
    cluster.ssh_config_path.parent.mkdir(parents=True, exist_ok=True)
    cluster.ssh_config_path.write_text(text)
    resolved = subprocess.run(["ssh", "-F", str(cluster.ssh_config_path), "-G", "cerebras"],
                              capture_output=True, text=True, check=True).stdout
    assert "user alice" in resolved
    assert "aitestbed.host.relay 22001 22002 22003" in resolved
