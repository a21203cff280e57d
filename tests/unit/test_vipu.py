"""The V-IPU server's POD model and its HTTP API."""

import io
import socket
import threading

import pytest
from aitestbed.graphcore import gc_info, gc_monitor, ipu, poprun
from aitestbed.graphcore.vipu import client as client_module
from aitestbed.graphcore.vipu import server as vipu_server
from aitestbed.graphcore.vipu.client import VipuClient, VipuError
from aitestbed.graphcore.vipu.pod import Pod, PodError
from aitestbed.graphcore.vipu.server import VipuServer
from aitestbed.node.munge import MungeError

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

    def start(**options):
        srv = VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path, **options)
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
    assert [p["name"] for p in admin.partitions()] == ["slurm_23"]
    token_file = tmp_path / "admin.token"
    assert token_file.stat().st_mode & 0o777 == 0o640
    assert VipuClient.admin(admin.host, str(token_file)).token == admin.token


# --- who reads (security review B12/B13: reads are owner-bound) ---------------------------------

# What munged would vouch for: each user's credential names their uid.
UIDS = {"bob": 21002, "mallory": 21101, "root": 0}
CREDENTIALS = {f"MUNGE:{name}AAAAAAAAAAAAAAAAAAAA=:": uid for name, uid in UIDS.items()}


def fake_unmunge(credential: str) -> int:
    if credential not in CREDENTIALS:
        raise MungeError("Invalid credential")
    return CREDENTIALS[credential]


def no_munged() -> str:
    raise MungeError("munged is not running")


@pytest.fixture
def pod_of_two_users(server, monkeypatch):
    """A server reached as from another node (not its own loopback), with bob's job 23
    and mallory's job 24 running; (the administrator's client, a client for a user)."""
    monkeypatch.setattr(vipu_server, "user_name", {u: n for n, u in UIDS.items()}.get)
    admin = server(identify=fake_unmunge, local_reads_all=False)
    admin.create_partition("slurm_23", {"gc-poplar-02": 4}, job_id="23", user="bob")
    admin.create_partition("slurm_24", {"gc-poplar-03": 1}, job_id="24", user="mallory")

    def as_user(name: str | None) -> VipuClient:
        def credential() -> str:
            if name is None:
                raise MungeError("munge is not installed here (Debian's munge package)")
            return f"MUNGE:{name}AAAAAAAAAAAAAAAAAAAA=:"
        return VipuClient(host=admin.host, port=admin.port, credential=credential)

    return admin, as_user


def test_a_user_reads_only_the_partitions_of_their_own_jobs(pod_of_two_users):
    _, as_user = pod_of_two_users
    bob = as_user("bob")
    assert bob.partition("slurm_23")["ipus"] == [16, 17, 18, 19]
    assert [p["name"] for p in bob.partitions()] == ["slurm_23"]
    with pytest.raises(VipuError) as err:
        as_user("mallory").partition("slurm_23")
    assert err.value.status == 403
    assert str(err.value) == ("partition slurm_23 belongs to another user's job: a V-IPU "
                              "partition is read by the owner of its job only")
    assert [p["name"] for p in as_user("mallory").partitions()] == ["slurm_24"]
    with pytest.raises(VipuError) as err:
        as_user("bob").partition("slurm_99")
    assert err.value.status == 404


def test_the_administrator_and_root_read_every_partition(pod_of_two_users):
    admin, as_user = pod_of_two_users
    assert [p["name"] for p in admin.partitions()] == ["slurm_23", "slurm_24"]
    assert admin.partition("slurm_24")["user"] == "mallory"
    assert len(as_user("root").partitions()) == 2  # root on a node of the cluster


@pytest.mark.parametrize("who, token, message", [
    (None, None, "this request carries no MUNGE credential (the Poplar SDK's tools send one; "
                 "run them on a node of the Graphcore cluster) (munge -n: munge is not "
                 "installed here (Debian's munge package))"),
    ("forged", None, "the MUNGE credential was refused: Invalid credential"),
    (None, "0" * 64, "the token given is not the V-IPU server's"),
])
def test_a_reader_without_a_valid_credential_is_refused(pod_of_two_users, who, token, message):
    admin, as_user = pod_of_two_users
    client = as_user(who)
    client.token = token
    for read in (lambda: client.partition("slurm_23"), client.partitions):
        with pytest.raises(VipuError) as err:
            read()
        assert err.value.status == 401
        assert str(err.value).endswith(message)
    assert client.ping() == {"status": "ok"}  # the health check and the POD stay open
    assert client.pod()["size"] == 64


def test_the_server_s_own_host_reads_every_partition(server):
    """On the controller (loopback) only root and Slurm's daemons run: they read all."""
    admin = server()
    admin.create_partition("slurm_23", {"gc-poplar-02": 4}, job_id="23", user="bob")
    local = VipuClient(host=admin.host, port=admin.port, credential=no_munged)
    assert [p["name"] for p in local.partitions()] == ["slurm_23"]


def test_a_user_s_user_name_unknown_to_the_server_reads_nothing(pod_of_two_users, monkeypatch):
    _, as_user = pod_of_two_users
    monkeypatch.setattr(vipu_server, "user_name", lambda uid: None)
    assert as_user("bob").partitions() == []
    with pytest.raises(VipuError) as err:
        as_user("bob").partition("slurm_23")
    assert err.value.status == 403


# --- the guide's address: `export IPUOF_VIPU_API_HOST=10.1.3.101` --------------------------

def test_the_guides_address_is_an_alias_of_the_pods_own_server():
    assert client_module.server_host("10.1.3.101", 8090) == "vipu"
    assert client_module.server_host("vipu", 8090) == "vipu"
    assert client_module.server_host("127.0.0.1", 1) == "127.0.0.1"
    assert client_module.server_host("10.1.3.101", 9000) is None  # nothing answers there
    assert VipuClient(host="10.1.3.101", port=8090).connect_to == "vipu"
    assert client_module.shown_address("vipu", "172.20.0.9") == "10.1.3.101"
    assert client_module.shown_address("10.1.3.101", "10.1.3.101") == "10.1.3.101"
    assert client_module.shown_address("127.0.0.1", "127.0.0.1") == "127.0.0.1"


@pytest.fixture
def guide_address(server, monkeypatch):
    """IPUOF_VIPU_API_HOST=10.1.3.101 as in the guide, on a host where `vipu` is the test's
    server. Every connection is checked: one to 10.1.3.101, or through a proxy, fails."""
    admin = server()
    admin.create_partition("slurm_2616", {"gc-poplar-02": 1}, job_id="2616", user="learner")
    connected: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address, *args, **kwargs):
        connected.append(address)
        if address[0] != "vipu":
            raise AssertionError(f"a connection to {address} was attempted")
        return real(("127.0.0.1", admin.port), *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setenv("IPUOF_VIPU_API_HOST", "10.1.3.101")
    monkeypatch.delenv("IPUOF_VIPU_API_PORT", raising=False)
    monkeypatch.delenv("IPUOF_VIPU_API_PARTITION_ID", raising=False)
    monkeypatch.setenv("http_proxy", "http://10.1.3.101:3128")  # a user's: never used
    return connected


def test_gc_monitor_with_the_guides_address_shows_the_pods_partitions(guide_address, capsys):
    assert gc_monitor.main(["--no-card-info", "--all-partitions"]) == 0
    out = capsys.readouterr().out
    assert "IPUs in slurm_2616 attached from other namespaces" in out
    assert "gc-poplar-02" in out
    assert guide_address and {host for host, _ in guide_address} == {"vipu"}


def test_the_sdk_finds_the_jobs_ipus_through_the_guides_address(guide_address, monkeypatch):
    """PopTorch's and the TensorFlow facade's allocation, and gc-info, in the job."""
    monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", "slurm_2616")
    allocation = ipu.allocation_from_environment()
    assert allocation is not None and allocation.chip_ids == (16,)
    assert gc_info.main(["-l"]) == 0
    assert {host for host, _ in guide_address} == {"vipu"}


def test_the_guides_address_on_another_port_answers_nothing_and_is_not_tried(
        guide_address, monkeypatch, capsys):
    monkeypatch.setenv("IPUOF_VIPU_API_PORT", "9000")
    assert gc_monitor.main(["--no-card-info", "--all-partitions"]) == 1
    err = capsys.readouterr().err
    assert err == ("gc-monitor: V-IPU server 10.1.3.101:9000 does not answer: the POD's V-IPU "
                   "server (10.1.3.101 in ALCF's guide) listens on port 8090 only\n")
    assert guide_address == []


def test_poprun_shows_the_pods_server_by_the_guides_address(guide_address, monkeypatch):
    """The guide: "V-IPU server address picked up from 'vipu': 10.1.3.101:8090"."""
    monkeypatch.setattr(socket, "gethostbyname",
                        lambda name: {"vipu": "172.20.0.9"}.get(name) or _unknown(name))
    monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", "slurm_2616")
    for exported in ("10.1.3.101", "vipu", None):
        if exported:
            monkeypatch.setenv("IPUOF_VIPU_API_HOST", exported)
        else:
            monkeypatch.delenv("IPUOF_VIPU_API_HOST")
        args, _ = poprun.parse_args(["-vv", "true"])
        err = io.BytesIO()
        client, name, _ = poprun.connect(args, poprun.Output(io.BytesIO(), err, verbosity=2))
        log = err.getvalue().decode()
        assert "POPRUN [I] V-IPU server address picked up from 'vipu': 10.1.3.101:8090" in log
        assert "POPRUN [D] Connecting to 10.1.3.101:8090" in log
        assert client.partition(name)["ipus"] == [16]
    assert {host for host, _ in guide_address} == {"vipu"}


def _unknown(name: str) -> str:
    raise socket.gaierror(f"unknown host {name}")
