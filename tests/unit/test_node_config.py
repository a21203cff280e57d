"""node.json crosses from the host to every node as one typed record (aitestbed.node.config)."""

import ast
import json
import sys

import pytest
from aitestbed.host import inventory, state
from aitestbed.node import config
from aitestbed.node.config import ConfigError, NodeConfig

LOGIN = NodeConfig(name="gc-login-01", system="graphcore", node_class="login",
                   fqdn="gc-login-01.ai.alcf.anl.gov", ssh_allow_groups=["graphcore"],
                   ssh_mfa=True, mounts=["/home", "/projects"], services=["sshd"],
                   slurm_cluster="graphcore")


def test_node_config_round_trips_through_json():
    assert NodeConfig.from_json(LOGIN.to_json()) == LOGIN


def test_a_missing_or_unknown_key_is_one_clear_line():
    data = json.loads(LOGIN.to_json())
    del data["ssh_mfa"], data["mounts"]
    data["colour"] = "blue"
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_json(json.dumps(data), "/etc/aitestbed/node/node.json")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("/etc/aitestbed/node/node.json ")
    assert "missing ssh_mfa, mounts; unknown colour" in message
    assert isinstance(err.value, ValueError)  # node-init prints it as one line and exits 1
    with pytest.raises(ConfigError, match="not valid JSON"):
        NodeConfig.from_json("{")
    with pytest.raises(ConfigError, match="no JSON object"):
        NodeConfig.from_json("[]")


def test_prepare_writes_each_nodes_record_and_the_node_reads_it(isolated_state):
    topology = inventory.load("mini")
    cluster = state.ClusterState("c1")
    record = state.ClusterRecord(name="c1", profile="mini", inventory="", systems=None,
                                 user="alice", ports={})
    cluster.save(record)
    cluster.prepare(topology, record)
    for node in topology.nodes:
        loaded = NodeConfig.load(cluster.node_dir(node.name))
        assert loaded == state.node_config(node)
        assert (loaded.name, loaded.fqdn, loaded.ssh_mfa) == (node.name, node.fqdn, node.ssh_mfa)
        assert loaded.mounts == list(node.mounts) and loaded.services == list(node.services)
    # The file's text is what the dict literal it replaced wrote (nodes keep reading it).
    login = topology.node("gc-login-01")
    assert (cluster.node_dir(login.name) / "node.json").read_text() == json.dumps({
        "name": login.name, "system": login.system, "node_class": login.node_class,
        "fqdn": login.fqdn, "ssh_allow_groups": list(login.ssh_allow_groups),
        "ssh_mfa": login.ssh_mfa, "mounts": list(login.mounts),
        "services": list(login.services), "slurm_cluster": login.slurm_cluster,
    }, indent=2) + "\n"


def test_the_containers_mount_the_state_where_the_nodes_read_it():
    from aitestbed.host.provider import docker
    assert docker.NODE_DIR == config.NODE_DIR
    assert docker.CLUSTER_DIR == config.CLUSTER_DIR
    assert config.ACCOUNTS.parent == config.CLUSTER_DIR


def test_the_record_needs_only_the_standard_library():
    """The node side has only the standard library and PyYAML."""
    tree = ast.parse(open(config.__file__).read())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in names} <= set(sys.stdlib_module_names)
