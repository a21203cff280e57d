"""up is idempotent, repairs what was stopped behind its back, and keeps user data."""

import json
import socket

import docker
import pytest

from .conftest import LOGIN_NODES, NODES

pytestmark = pytest.mark.presubmit


def _started_at(cluster):
    client = docker.from_env()
    return {n: client.containers.get(cluster.container(n)).attrs["State"]["StartedAt"]
            for n in NODES}


def test_status_and_wait_report_every_node_ready(cluster):
    status = cluster.cli("status")
    for node in NODES:
        assert any(line.split()[:1] == [node] and " ready " in line
                   for line in status.stdout.splitlines()), status.stdout
    assert f"{len(NODES)}/{len(NODES)} nodes ready" in status.stderr
    assert "ready" in cluster.cli("wait", "--timeout", "30").stderr


def test_up_on_a_running_cluster_changes_nothing(cluster):
    before = _started_at(cluster)
    cluster.cli("up")
    assert _started_at(cluster) == before


@pytest.mark.slow("stops a node behind the CLI's back, up repairs it (fault)")
def test_a_node_stopped_behind_the_clis_back_is_repaired_by_up(cluster):
    docker.from_env().containers.get(cluster.container("gc-poplar-02")).stop()
    status = cluster.cli("status")
    assert f"{len(NODES) - 1}/{len(NODES)} nodes ready" in status.stderr
    cluster.cli("up")
    assert f"{len(NODES)}/{len(NODES)} nodes ready" in cluster.cli("status").stderr


def test_down_then_up_keeps_home_and_projects_and_a_taken_port_is_a_clear_error(cluster):
    """`down`; an `up` that finds sambanova's ssh port taken fails with that, and no
    traceback; once the port is free, `up` brings every node back on its own port with
    /home and /projects as they were. (One down/up cycle for both: each costs a minute.)"""
    user = cluster.user
    port = cluster.record["ports"]["sambanova"]
    login = cluster.host("gc-login-01")
    login.check_output(f"su {user} -c 'echo kept > /home/{user}/kept.txt'")
    login.check_output("mkdir -p /projects/demo && echo kept > /projects/demo/kept.txt")
    cluster.cli("down")
    states = {docker.from_env().containers.get(cluster.container(n)).status for n in NODES}
    assert states == {"exited"}
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        result = cluster.cli("up", check=False)
        assert result.returncode == 1
        assert f"port 127.0.0.1:{port} for sambanova's ssh is already in use" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        squatter.close()
    cluster.cli("up")
    assert json.loads(cluster.state.record_path.read_text())["ports"]["sambanova"] == port
    for node in ("sambanova", "gc-poplar-02"):
        host = cluster.host(node)
        assert host.file(f"/home/{user}/kept.txt").content_string == "kept\n"
        assert host.file("/projects/demo/kept.txt").content_string == "kept\n"
    cluster.log_in_everywhere()
    for login_node in LOGIN_NODES:
        assert cluster.ssh(login_node, "true").returncode == 0
    assert cluster.ssh("sambanova", "cat kept.txt").stdout == "kept\n"


@pytest.mark.slow("brings up a second cluster of its own (about 3 min)")
def test_a_second_cluster_lives_beside_the_first(cluster, tmp_path):
    from .conftest import Cluster

    other = Cluster(cluster.name + "-b", cluster.user)
    try:
        other.cli("up", "--profile", "mini", "--systems", "graphcore")
        assert other.log_in("gc-login-01").returncode == 0
        assert other.ssh("gc-login-01", "hostname").stdout.strip() == "gc-login-01"
        assert set(other.record["ports"].values()).isdisjoint(cluster.record["ports"].values())
        assert cluster.ssh("gc-login-01", "true").returncode == 0
    finally:
        other.cli("destroy", check=False)
    assert f"{len(NODES)}/{len(NODES)} nodes ready" in cluster.cli("status").stderr


@pytest.mark.slow("removes a node's container, up recreates it (fault)")
def test_a_node_removed_behind_the_clis_back_is_recreated_with_its_identity(cluster):
    docker.from_env().containers.get(cluster.container("sn30-r1-h1")).remove(force=True)
    assert "missing" in cluster.cli("status").stdout
    cluster.cli("up")
    # Same host key (known hosts still match), same account, same shared home.
    result = cluster.ssh("sambanova", "ssh -o BatchMode=yes sn30-r1-h1 'hostname; id -u'")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sn30-r1-h1", "10001"]


@pytest.mark.slow("recreates the Slurm and SambaNova containers twice (up --recreate)")
def test_nodes_on_older_images_are_reported_and_replaced_keeping_data_and_queued_jobs(
        cluster, monkeypatch):
    """A checkout with new code: `up` names the nodes left on older images, and
    `up --recreate` replaces them; /home and the queued jobs stay."""
    from aitestbed.host import images, lifecycle

    client = docker.from_env()
    current = images.ensure_class_images(client, {"rdu_node": ("sambanova",), "slurmctld": ()})
    older = {c: f"{tag.split(':')[0]}:older-{cluster.name}" for c, tag in current.items()}
    for node_class, tag in older.items():
        client.images.get(current[node_class]).tag(tag)
    real = images.ensure_class_images

    def on_older_images(client, classes):
        return {**real(client, classes), **older}

    sambanova = cluster.host("sambanova")
    sambanova.check_output(f"su {cluster.user} -c 'echo kept > /home/{cluster.user}/older.txt'")
    queued = sambanova.check_output(
        f"cd /tmp && runuser -u {cluster.user} -- sbatch --parsable --begin=now+1hour "
        "--gres=rdu:1 --wrap true").strip()
    try:
        monkeypatch.setattr(images, "ensure_class_images", on_older_images)
        lifecycle.up(cluster.name, None, None, cluster.user, recreate=True)
        monkeypatch.undo()
        replaced = {"sn30-slurmctld", "sn10-slurmctld", "gc-slurmctld", "sn30-r1-h1",
                    "sm-01", "sm-02"} & set(NODES)
        result = cluster.cli("up")
        assert "nodes run images older than this checkout's" in result.stderr
        assert all(n in result.stderr for n in replaced)
        assert "up --recreate" in result.stderr
        result = cluster.cli("up", "--recreate")
        assert f"replaced {len(replaced)} containers" in result.stderr
        for node in replaced:
            image = client.containers.get(cluster.container(node)).attrs["Config"]["Image"]
            assert image in current.values()
        assert "older" not in cluster.cli("up").stderr
        assert cluster.host("sm-01").file(f"/home/{cluster.user}/older.txt").content_string \
            == "kept\n"
        assert sambanova.check_output(f"squeue -h -j {queued} -o %T") == "PENDING"
    finally:
        sambanova.run(f"scancel {queued}")
        for tag in older.values():
            client.images.remove(tag)
