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
