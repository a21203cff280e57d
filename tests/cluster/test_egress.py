"""The testbed is offline by design: nothing in a cluster has a way out of the machine.

No packet is sent anywhere to prove it (the tests must not send traffic outside): the
networks and firewall rules are read instead, and ssh through the published port is what
every other test does. Nothing of it needs root: every node is on the internal network
alone (Docker itself drops what would leave it), and the cluster's gate is the one
container Docker publishes ports from.
"""

from __future__ import annotations

import subprocess

import docker
import pytest
from aitestbed.host import egress
from aitestbed.host.naming import front_network_name, network_name

from .conftest import LOGIN_NODES, published

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


def test_login_nodes_have_no_route_out_and_the_gate_alone_publishes_their_ssh(cluster):
    client = docker.from_env()
    internal = network_name(cluster.name)
    for login in LOGIN_NODES:
        container = client.containers.get(cluster.container(login))
        assert list(container.attrs["NetworkSettings"]["Networks"]) == [internal], login
        assert not container.attrs["HostConfig"]["PortBindings"], login
    gate = client.containers.get(f"{cluster.name}-gate")
    assert sorted(gate.attrs["NetworkSettings"]["Networks"]) == sorted(
        [front_network_name(cluster.name), internal])
    assert {address for address, _ in published(cluster.name).values()} == {"127.0.0.1"}
    # It runs the forwarder alone: as nobody, without capabilities, on a read-only root.
    config, host = gate.attrs["Config"], gate.attrs["HostConfig"]
    assert config["User"] == "65534:65534"
    assert config["Entrypoint"][-2:] == ["-m", "aitestbed.node.gate"]
    assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert "no-new-privileges" in host["SecurityOpt"]
    top = gate.top(ps_args="-o pid,user,args")["Processes"]
    assert [p[1] for p in top] == ["nobody"] and "aitestbed.node.gate" in top[0][2], top
    # Docker's own rule for an internal network drops what would leave it (the first
    # test); no rule of ours is needed (clusters made before the gate lose theirs)
    listed = subprocess.run(["iptables", "-S", egress.CHAIN], capture_output=True, text=True)
    assert f"aitestbed {cluster.name}:" not in listed.stdout


def test_the_compute_nodes_still_reach_each_other_and_the_login_nodes(cluster):
    rc, out = cluster.run(LOGIN_NODES[0], f"getent hosts {COMPUTE} && "
                                          "sinfo -h -N -o '%N %t' | head -3")
    assert rc == 0 and COMPUTE in out, out
