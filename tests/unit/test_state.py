import json
import stat

import pytest
from aitestbed.host import inventory, state
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider.docker import DockerProvider


def test_practice_user_is_the_host_user_unless_root(monkeypatch):
    monkeypatch.setattr(state.getpass, "getuser", lambda: "root")
    assert state.practice_user_name() == "trainee"
    monkeypatch.setattr(state.getpass, "getuser", lambda: "alice")
    assert state.practice_user_name() == "alice"
    monkeypatch.setenv("AITESTBED_USER", "bob")
    assert state.practice_user_name() == "bob"
    monkeypatch.setenv("AITESTBED_USER", "Bad Name")
    with pytest.raises(AitestbedError, match="AITESTBED_USER"):
        state.practice_user_name()


def _prepared(name="c1", user="alice", profile="mini"):
    topology = inventory.load(profile)
    cluster = state.ClusterState(name)
    record = state.ClusterRecord(name=name, profile=profile, inventory="", systems=None,
                                 user=user, ports={"gc-login-01": 22001, "cer-login-01": 22002})
    cluster.save(record)
    cluster.prepare(topology, record, {n.name: DockerProvider().ansible_vars(name, n.name)
                                       for n in topology.nodes})
    return cluster, topology


def test_secrets_are_generated_per_cluster_and_private(isolated_state):
    one, topology = _prepared("one")
    two, _ = _prepared("two")
    for node in topology.nodes:
        key_one = (one.node_dir(node.name) / "ssh_host_ed25519_key").read_text()
        key_two = (two.node_dir(node.name) / "ssh_host_ed25519_key").read_text()
        assert "PRIVATE KEY" in key_one and key_one != key_two
    assert stat.S_IMODE(one.root.stat().st_mode) == 0o700
    token_one = one.registry().token("alice")
    assert token_one != two.registry().token("alice") and len(token_one["secret"]) == 40
    assert stat.S_IMODE((one.root / "accounts" / "tokens" / "alice.json").stat().st_mode) == 0o600


def test_passcode_tokens_go_to_login_nodes_only(isolated_state):
    cluster, topology = _prepared()
    secret = cluster.registry().token("alice")["secret"]
    for node in topology.nodes:
        mfa = cluster.node_dir(node.name) / "mfa.json"
        assert mfa.is_file() == (node.node_class == "login"), node.name
        if mfa.is_file():
            assert json.loads(mfa.read_text())["users"]["alice"]["secret"] == secret
    assert secret not in "".join(p.read_text() for p in cluster.common_dir.rglob("*.json"))
    askpass = cluster.askpass_path("alice")
    assert "passcode --typed alice" in askpass.read_text()
    assert stat.S_IMODE(askpass.stat().st_mode) == 0o700


def test_prepare_is_stable_on_a_second_run(isolated_state):
    cluster, topology = _prepared()
    before = {p: p.read_bytes() for p in cluster.root.rglob("*") if p.is_file()}
    _prepared()
    after = {p: p.read_bytes() for p in cluster.root.rglob("*") if p.is_file()}
    assert before == after


def test_accounts_give_the_practice_user_fixed_ids_and_system_groups(isolated_state):
    cluster, _ = _prepared()
    accounts = json.loads((cluster.common_dir / "accounts.json").read_text())
    assert {g["name"]: g["gid"] for g in accounts["groups"]} == {
        "cerebras": 3001, "graphcore": 3002, "sambanova": 3003, "groq": 3004}
    (user,) = accounts["users"]
    assert (user["name"], user["uid"], user["gid"]) == ("alice", 10001, 10001)
    assert user["groups"] == ["cerebras", "graphcore", "groq", "sambanova"]
    assert len(user["authorized_keys"]) == 1
    assert user["active"] and user["quota"] == {"bytes": 2**40, "files": 1_000_000}
    assert all(k.startswith("ssh-ed25519 ") for k in user["authorized_keys"])


def test_known_hosts_cover_every_name_a_node_answers_to(isolated_state):
    cluster, topology = _prepared()
    internal = (cluster.common_dir / "ssh_known_hosts").read_text()
    assert "gc-poplar-02,gc-poplar-02.ai.alcf.anl.gov ssh-ed25519 " in internal
    assert "cer-login-01,cer-login-01.ai.alcf.anl.gov,cerebras,cerebras.ai.alcf.anl.gov" in internal
    host_side = (cluster.login_dir / "known_hosts").read_text().splitlines()
    assert sorted(line.split()[0] for line in host_side) == ["cer-login-01", "cerebras",
                                                             "gc-login-01"]


def test_rendered_inventory_points_ansible_at_this_clusters_containers(isolated_state):
    cluster, topology = _prepared("ci-7")
    text = cluster.inventory_path.read_text()
    assert "ansible_host: ci-7-gc-poplar-02" in text
    assert "ansible_connection: docker" in text
    assert "PRIVATE KEY" not in text


def test_free_port_skips_ports_other_clusters_recorded(isolated_state):
    _prepared("one")
    taken = state.recorded_ports()
    assert taken == {22001, 22002}
    port = state.free_port(taken)
    assert port not in taken and port in state.PORT_RANGE


def test_an_existing_cluster_keeps_its_profile_and_systems(isolated_state):
    from aitestbed.host.cluster import record_for_up

    cluster, _ = _prepared("kept", profile="mini")
    assert record_for_up(cluster, None, None, "other").user == "alice"
    assert record_for_up(cluster, "mini", None, "alice").profile == "mini"
    with pytest.raises(AitestbedError, match="created with profile 'mini'"):
        record_for_up(cluster, "alcf", None, "alice")
    with pytest.raises(AitestbedError, match="created with systems all"):
        record_for_up(cluster, None, ["graphcore"], "alice")


def test_users_on_the_nodes_may_read_the_accounts_but_not_the_secrets(isolated_state):
    cluster, _ = _prepared()
    assert stat.S_IMODE(cluster.common_dir.stat().st_mode) == 0o711
    assert stat.S_IMODE((cluster.common_dir / "accounts.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((cluster.common_dir / "munge.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((cluster.common_dir / "users" / "alice").stat().st_mode) == 0o700


def test_a_cluster_keeps_its_provider_and_another_is_refused(tmp_path, monkeypatch):
    from aitestbed.host import lifecycle
    from aitestbed.host.errors import AitestbedError
    from aitestbed.host.state import ClusterRecord, ClusterState

    state = ClusterState("prov")
    state.save(ClusterRecord("prov", "mini", "", None, "alice", storage="volume"))
    assert state.load().provider == "docker"  # a record from before providers
    with pytest.raises(AitestbedError, match="runs on the docker provider: destroy it first"):
        lifecycle.up("prov", None, None, "alice", provider="kubernetes")
    with pytest.raises(AitestbedError, match="unknown provider 'nosuch'"):
        lifecycle.up("fresh", "mini", None, "alice", provider="nosuch")
