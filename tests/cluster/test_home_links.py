"""A user's links in their home, and a node start (security review A9, A10, B22):
root never follows them, a home keeps the mode its user gave it, and the node starts."""

import docker
import pytest
from aitestbed.host.driver import wait_for

pytestmark = pytest.mark.presubmit

NODE = "sm-02"  # the review's node; a compute node the test user does not log in to here


def restart(cluster, node: str) -> None:
    docker.from_env().containers.get(cluster.container(node)).restart(timeout=10)
    cluster.cli("wait", "--timeout", "120")


@pytest.fixture
def ssh_dir_moved_aside(cluster):
    """The user's ~/.ssh moved aside for the attack, and put back afterwards."""
    rc, out = cluster.run("gc-login-01", "mv ~/.ssh ~/.ssh.aside && chmod a+xr ~")
    assert rc == 0, out
    yield
    rc, out = cluster.run("gc-login-01", "rm -f ~/.ssh && mv ~/.ssh.aside ~/.ssh && chmod 700 ~")
    assert rc == 0, out


@pytest.mark.parametrize("target", ["/etc", "/nonexistent/aitestbed-canary"])
def test_a_linked_ssh_directory_gives_nothing_and_the_node_starts(cluster, ssh_dir_moved_aside,
                                                                  target):
    rc, out = cluster.run("gc-login-01", f"ln -s {target} ~/.ssh")
    assert rc == 0, out
    restart(cluster, NODE)
    host = cluster.host(NODE)
    etc = host.file("/etc")
    assert (etc.user, etc.group, etc.mode) == ("root", "root", 0o755)
    assert not host.file("/etc/id_ed25519").exists
    assert not host.file("/etc/authorized_keys").exists
    assert host.check_output(f"readlink /home/{cluster.user}/.ssh") == target
    # the guide's `chmod a+xr ~/` survived the node start (A10)
    assert host.file(f"/home/{cluster.user}").mode == 0o755
    wait_for(lambda: host.run("/usr/local/sbin/aitestbed-node-health").rc == 0, 60, 1,
             f"{NODE} to be ready")
