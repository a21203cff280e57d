"""The V-IPU server's POD model and its HTTP API."""

import threading

import pytest
from aitestbed.graphcore.vipu.client import VipuClient, VipuError
from aitestbed.graphcore.vipu.pod import Pod, PodError
from aitestbed.graphcore.vipu.server import VipuServer

GRES = "".join(f"NodeName=gc-poplar-0{i} Name=ipu Count=16\n" for i in range(1, 5))


def test_the_pod_numbers_ipus_in_host_order():
    pod = Pod.from_gres_conf(GRES + "NodeName=sm-01 Name=rdu Count=8\n")
    assert pod.size == 64
    assert pod.hosts["gc-poplar-01"] == list(range(16))
    assert pod.hosts["gc-poplar-04"] == list(range(48, 64))


def test_a_partition_holds_exactly_the_requested_ipus_of_its_hosts():
    pod = Pod.from_gres_conf(GRES)
    first = pod.create("slurm_1", {"gc-poplar-02": 4})
    second = pod.create("slurm_2", {"gc-poplar-02": 12, "gc-poplar-03": 1})
    assert first.ipus == [16, 17, 18, 19]
    assert len(second.ipus) == 13 and not set(first.ipus) & set(second.ipus)
    with pytest.raises(PodError, match="cannot allocate 1 IPUs on gc-poplar-02: 0 free"):
        pod.create("slurm_3", {"gc-poplar-02": 1})
    assert pod.create("slurm_1", {"gc-poplar-02": 4}) is first  # a retried prolog
    pod.remove("slurm_1")
    assert pod.create("slurm_3", {"gc-poplar-02": 4}).ipus == [16, 17, 18, 19]
    with pytest.raises(PodError) as err:
        pod.remove("slurm_1")
    assert err.value.status == 404


@pytest.fixture
def server(tmp_path):
    gres = tmp_path / "gres.conf"
    gres.write_text(GRES)
    servers = []

    def start():
        srv = VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return VipuClient(host="127.0.0.1", port=srv.server_address[1], token=srv.token)

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_the_http_api_creates_reads_and_removes_partitions(server):
    client = server()
    assert client.ping() == {"status": "ok"}
    made = client.create_partition("slurm_7", {"gc-poplar-03": 2}, job_id="7", user="learner")
    assert made["ipus"] == [32, 33] and made["state"] == "PS_ACTIVE"
    assert client.partition("slurm_7")["user"] == "learner"
    with pytest.raises(VipuError) as err:
        client.create_partition("slurm_8", {"gc-poplar-03": 15})
    assert err.value.status == 409
    client.remove_partition("slurm_7")
    with pytest.raises(VipuError) as err:
        client.partition("slurm_7")
    assert err.value.status == 404


def test_partitions_survive_a_server_restart(server):
    server().create_partition("slurm_9", {"gc-poplar-01": 3})
    assert [p["name"] for p in server().partitions()] == ["slurm_9"]


def test_an_unreachable_server_is_a_clear_error():
    with pytest.raises(VipuError, match="V-IPU server 127.0.0.1:1 does not answer"):
        VipuClient(host="127.0.0.1", port=1, timeout=2).ping()


def test_only_the_administrator_changes_partitions(server, tmp_path):
    """B12/B13: a user on a login node (no token, or a wrong one) can neither remove a
    job's partition nor take the POD's IPUs; the token is readable by root only here."""
    admin = server()
    admin.create_partition("slurm_23", {"gc-poplar-02": 4}, job_id="23", user="bob")
    for token in (None, "0" * 64, ""):
        user = VipuClient(host=admin.host, port=admin.port, token=token)
        with pytest.raises(VipuError, match="only Slurm's prolog and epilog") as err:
            user.remove_partition("slurm_23")
        assert err.value.status == 403
        with pytest.raises(VipuError) as err:
            user.create_partition("hog", {"gc-poplar-01": 16, "gc-poplar-02": 12})
        assert err.value.status == 403
        assert user.partition("slurm_23")["user"] == "bob"  # reading is open, as before
    assert [p["name"] for p in admin.partitions()] == ["slurm_23"]
    token_file = tmp_path / "admin.token"
    assert token_file.stat().st_mode & 0o777 == 0o640
    assert VipuClient.admin(admin.host, str(token_file)).token == admin.token
