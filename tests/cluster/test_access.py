"""Logging in as the docs do: host -> login node -> compute node."""

import docker
import pytest

from .conftest import LOGIN_NODES, NODES, published

pytestmark = pytest.mark.presubmit


@pytest.mark.parametrize("login", LOGIN_NODES)
def test_practice_user_logs_in_with_the_generated_ssh_config(cluster, login):
    result = cluster.ssh(login, "hostname; whoami")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [login, cluster.user]


def test_round_robin_name_reaches_a_cerebras_login_node(cluster):
    login = cluster.log_in("cerebras")
    assert login.returncode == 0, login.stderr
    result = cluster.ssh("cerebras", "hostname")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("cer-login-0")


@pytest.mark.parametrize(("login", "compute"), [
    ("gc-login-01", "gc-poplar-02"),
    ("gc-login-01", "gc-poplar-02.ai.alcf.anl.gov"),
    ("sambanova", "sn30-r1-h1"),
    ("sambanova", "sm-01"),
])
def test_hop_from_login_to_compute_needs_no_prompt(cluster, login, compute):
    result = cluster.ssh(login, f"ssh -o BatchMode=yes {compute} hostname")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == compute.split(".")[0]


def test_gc_poplar_01_is_not_accessible_to_users(cluster):
    result = cluster.ssh("gc-login-01", "ssh -o BatchMode=yes gc-poplar-01 hostname")
    assert result.returncode == 255
    assert "Permission denied" in result.stderr


def test_root_cannot_log_in(cluster):
    result = cluster.ssh("gc-login-01", "true", "-l", "root")
    assert result.returncode == 255
    assert "Permission denied" in result.stderr


def test_ssh_is_published_on_loopback_only_and_by_the_gate_alone(cluster):
    client = docker.from_env()
    for node in NODES:
        container = client.containers.get(cluster.container(node))
        assert not container.attrs["HostConfig"]["PortBindings"], node
    gate = published(cluster.name)
    assert set(gate) == set(LOGIN_NODES)
    assert {address for address, _ in gate.values()} == {"127.0.0.1"}
    assert {port for _, port in gate.values()} == set(cluster.record["ports"].values())
