"""The provider interface (aitestbed.host.provider) on the Docker provider: what `up`,
health, the checks, `shell` and `run` ask of it, on the session's cluster."""

import subprocess

import pytest
from aitestbed.host import provider as providers
from aitestbed.host.provider import NodeGone

from .conftest import NODES

pytestmark = pytest.mark.presubmit


@pytest.fixture(scope="module")
def where(cluster):
    found = providers.for_cluster(cluster.name)
    assert found.name == "docker"
    return found


def test_every_node_is_there_and_running_from_its_class_image(cluster, where):
    nodes = where.nodes(cluster.name)
    assert set(NODES) <= set(nodes)
    for name in NODES:
        assert nodes[name].running, name
        assert nodes[name].image.startswith("aitestbed/"), nodes[name]
    logins = [n for n in NODES if n in cluster.record["ports"]]
    assert logins and all(nodes[n].listen == "127.0.0.1" for n in logins)
    assert all(nodes[n].listen is None for n in NODES if n not in logins)


def test_exec_as_root_and_as_a_user_in_their_home(cluster, where):
    node = NODES[0]
    assert where.exec(cluster.name, node, ["id", "-un"]).output.strip() == "root"
    result = where.exec(cluster.name, node, ["sh", "-c", "id -un; pwd; echo oops >&2; exit 3"],
                        user=cluster.user, workdir=f"/home/{cluster.user}", separate=True)
    assert result.exit_code == 3
    assert result.stdout.decode().split() == [cluster.user, f"/home/{cluster.user}"]
    assert result.stderr == b"oops\n"


def test_a_node_that_does_not_exist_is_node_gone(cluster, where):
    with pytest.raises(NodeGone):
        where.exec(cluster.name, "no-such-node", ["true"])


def test_the_terminal_command_line_runs_on_the_node(cluster, where):
    argv = where.terminal_argv(cluster.name, NODES[0], ["hostname"], tty=False)
    assert subprocess.run(argv, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip() == NODES[0]
    as_user = where.terminal_argv(cluster.name, NODES[0], ["id", "-un"], tty=False,
                                  user=cluster.user)
    assert subprocess.run(as_user, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip() == cluster.user


def test_ansible_reaches_the_node_through_the_provider(cluster, where):
    assert where.ansible_vars(cluster.name, NODES[0]) == {
        "ansible_connection": "docker", "ansible_host": cluster.container(NODES[0])}
    assert cluster.container(NODES[0]) in cluster.state.inventory_path.read_text()
