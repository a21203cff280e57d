"""The testbed is offline by design: nothing in a cluster has a way out of the machine.

No packet is sent anywhere to prove it (the tests must not send traffic outside): the
firewall rules are read instead, and ssh through the published port is
what every other test does.
"""

from __future__ import annotations

import subprocess

import docker
import pytest
from aitestbed.host import egress
from aitestbed.host.naming import front_network_name, network_name

from .conftest import LOGIN_NODES

pytestmark = pytest.mark.presubmit

COMPUTE = "gc-poplar-01"


def test_the_cluster_network_is_internal_and_the_host_drops_what_leaves_it(cluster):
    network = docker.from_env().networks.get(network_name(cluster.name))
    assert network.attrs["Internal"] is True
    # Docker gives the nodes a gateway even so, and drops in the host's FORWARD chain
    # whatever would go through it to an address outside the network.
    bridge = f"br-{network.id[:12]}"
    subnet = network.attrs["IPAM"]["Config"][0]["Subnet"]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert f"! -d {subnet} -i {bridge} -j DROP" in rules, rules
    assert not any("MASQUERADE" in r and subnet in r for r in rules.splitlines())
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True)
    assert not any("MASQUERADE" in r and subnet in r for r in nat.stdout.splitlines())


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
