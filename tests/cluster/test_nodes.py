"""Every node: its name, its sshd, its shared trees, its accounts."""

import pytest

from .conftest import NODES, SAMBANOVA_NODES

pytestmark = pytest.mark.presubmit


def test_hostname_is_the_node_name(cluster, node):
    assert cluster.host(node).check_output("hostname") == node


def test_sshd_runs_and_listens(cluster, node):
    host = cluster.host(node)
    assert host.socket("tcp://0.0.0.0:22").is_listening
    assert host.process.filter(comm="sshd")


def test_shared_trees_are_mounted(cluster, node):
    host = cluster.host(node)
    for tree in ("/home", "/projects", "/software"):
        assert host.mount_point(tree).exists, tree
    assert host.mount_point("/data").exists == (node in SAMBANOVA_NODES)


def test_home_is_private_to_its_user(cluster, node):
    home = cluster.host(node).file(f"/home/{cluster.user}")
    assert home.is_directory
    assert (home.user, home.group, home.mode) == (cluster.user, cluster.user, 0o700)


def test_uid_and_gid_are_the_same_on_every_node(cluster):
    ids = {n: cluster.host(n).check_output(f"id {cluster.user}") for n in NODES}
    assert len(set(ids.values())) == 1, ids
    assert "uid=10001" in ids[NODES[0]]
    for group in ("cerebras", "graphcore", "sambanova"):
        assert group in ids[NODES[0]]


def test_a_file_written_on_one_node_is_seen_on_all(cluster):
    writer = cluster.host("gc-poplar-02")
    writer.check_output(f"su {cluster.user} -c 'echo shared > /home/{cluster.user}/shared.txt'")
    for n in NODES:
        assert cluster.host(n).file(f"/home/{cluster.user}/shared.txt").content_string == "shared\n"


@pytest.mark.parametrize("key", ["/etc/ssh/ssh_host_ed25519_key"])
def test_host_keys_differ_per_node(cluster, key):
    keys = {n: cluster.host(n).file(key).content_string for n in NODES}
    assert len(set(keys.values())) == len(NODES)
    assert all(cluster.host(n).file(key).mode == 0o600 for n in NODES[:2])
