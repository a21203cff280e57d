"""The testbed is offline by design: nothing in a cluster has a way out of the machine.

No packet is sent anywhere to prove it (the tests must not send traffic outside): the
routes and the firewall rule are read instead, and ssh through the published port is
what every other test does.
"""

from __future__ import annotations

import subprocess

import docker
from aitestbed.host import egress
from aitestbed.host.naming import front_network_name, network_name

from .conftest import LOGIN_NODES

COMPUTE = "gc-poplar-01"


def default_routes(cluster, node: str) -> list[str]:
    """The node's default routes, read from /proc/net/route (destination 0.0.0.0)."""
    out = docker.from_env().containers.get(cluster.container(node)).exec_run(
        ["cat", "/proc/net/route"]).output.decode()
    return [line.split()[0] for line in out.splitlines()[1:] if line.split()[1] == "00000000"]


def test_the_cluster_network_is_internal_and_a_compute_node_has_no_route_out(cluster):
    network = docker.from_env().networks.get(network_name(cluster.name))
    assert network.attrs["Internal"] is True
    assert default_routes(cluster, COMPUTE) == []


def test_login_nodes_publish_on_127_0_0_1_only_and_their_network_forwards_nothing(cluster):
    client = docker.from_env()
    front = client.networks.get(front_network_name(cluster.name))
    assert front.attrs["Options"]["com.docker.network.bridge.name"] == \
        egress.front_bridge(cluster.name)
    for login in LOGIN_NODES:
        container = client.containers.get(cluster.container(login))
        bindings = container.attrs["HostConfig"]["PortBindings"]["22/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        assert front.name in container.attrs["NetworkSettings"]["Networks"]
    # The login nodes' way out (their default route) is the front bridge, and the host
    # drops whatever that bridge would forward.
    check = subprocess.run(["iptables", "-C", egress.CHAIN, *egress.rule(cluster.name)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    listed = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
    assert f"-A FORWARD -j {egress.CHAIN}" in listed.stdout  # consulted first, by Docker


def test_the_compute_nodes_still_reach_each_other_and_the_login_nodes(cluster):
    rc, out = cluster.run(LOGIN_NODES[0], f"getent hosts {COMPUTE} && "
                                          "sinfo -h -N -o '%N %t' | head -3")
    assert rc == 0 and COMPUTE in out, out
