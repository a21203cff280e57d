"""The appliance client's side of a wsjob: the ingress is the owner's (security review
B23), the logs are the owner's (B11), and a brief API outage is survived (A3c)."""

import base64
import json
import pathlib
import socket
import threading

import pytest
import yaml
from aitestbed.cerebras import csctl, kubeapi, wsjob
from aitestbed.cerebras.kubeapi import ApiError, Unreachable
from cerebras_pytorch.appliance import channel, errors, kubernetes_runner

pytestmark = pytest.mark.unit


# B23: the first client to connect no longer gets the stream ------------------------------
def serve(token: str = "owners-secret"):
    server = channel.ChannelServer(0, wsjob.token_hash(token), host="127.0.0.1")
    for i in range(3):
        server.send({"type": "log", "message": f"line {i}"})
    server.send({"type": "file", "path": "/home/owner/model_dir/checkpoint_1000.mdl",
                 "data": base64.b64encode(b"weights").decode()})
    return server


def read_raw(port: int, hello: bytes | None) -> bytes:
    """What a client that sends `hello` (or nothing) receives before the worker hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        if hello is not None:
            sock.sendall(hello)
        sock.settimeout(15)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def owner_reads(server, token="owners-secret") -> list[dict]:
    received = []
    reader = threading.Thread(target=lambda: received.extend(
        channel.connect("127.0.0.1", server.port, 10, token)))
    reader.start()
    server.send({"type": "done", "samples": 4000})
    assert server.close(timeout=15)
    reader.join(15)
    return received


@pytest.mark.parametrize("hello", [None, b"\n", b'{"token": "guess"}\n', b"GET / HTTP/1.0\r\n\r\n",
                                   json.dumps({"token": wsjob.token_hash("owners-secret")}
                                              ).encode() + b"\n"])
def test_a_client_without_the_owners_secret_gets_nothing_and_the_owner_everything(hello):
    server = serve()
    stolen = read_raw(server.port, hello) if hello is not None else b""
    if hello is None:  # connects first and says nothing: must not block the owner
        silent = socket.create_connection(("127.0.0.1", server.port))
    try:
        assert b"line 0" not in stolen and b"weights" not in stolen
        if hello is not None:
            assert json.loads(stolen)["type"] == "refused"
        received = owner_reads(server)
    finally:
        if hello is None:
            silent.close()
    assert [m["type"] for m in received] == ["log", "log", "log", "file", "done"]


def test_the_client_library_reports_a_refusal_clearly():
    server = serve()
    with pytest.raises(channel.Refused, match="refused this client"):
        list(channel.connect("127.0.0.1", server.port, 10, "mallorys-guess"))
    assert [m["type"] for m in owner_reads(server)][-1] == "done"


def test_a_worker_without_a_token_hash_serves_nobody():
    server = channel.ChannelServer(0, None, host="127.0.0.1")
    server.send({"type": "log", "message": "secret"})
    with pytest.raises(channel.Refused):
        list(channel.connect("127.0.0.1", server.port, 10, ""))
    assert not server.close(timeout=0.5)


def test_the_spec_carries_the_hash_of_the_secret_never_the_secret():
    token = wsjob.new_token()
    made = wsjob.build("execute", {"release": "2.1.1"}, "owner", 1, 1, token=token)
    assert made["spec"][wsjob.TOKEN_FIELD] == wsjob.token_hash(token)
    assert token not in json.dumps(made)


# A3c: the API server restarting while the client follows its job -----------------------
class FlakyApi:
    """get_job raises Unreachable `down` times (forever with None), then returns `job`."""

    def __init__(self, job, down):
        self.job, self.down, self.calls = job, down, 0

    def get_job(self, name, namespace):
        self.calls += 1
        if self.down is None or self.calls <= self.down:
            raise Unreachable("cannot reach the cluster server cer-mgmt-01:6443: "
                              "[Errno 111] Connection refused")
        return self.job


def runner_with(api, monkeypatch, retry=3.0):
    monkeypatch.setattr(kubernetes_runner, "API_RETRY_SECONDS", retry)
    monkeypatch.setattr(kubernetes_runner.time, "sleep", lambda s: None)
    made = kubernetes_runner.KubernetesJobRunner.__new__(kubernetes_runner.KubernetesJobRunner)
    made.errors, made.namespace, made.api = errors, "job-operator", api
    return made


def ended(phase, message):
    return {"metadata": {"name": "wsjob-a3c"}, "status": {"phase": phase, "message": message}}


def test_a_brief_outage_is_retried(monkeypatch):
    api = FlakyApi(ended("FAILED", "the workload ended without a result"), down=5)
    runner = runner_with(api, monkeypatch)
    assert runner._final_status("wsjob-a3c")["phase"] == "FAILED"
    assert api.calls == 6


def test_a_long_outage_is_one_clear_appliance_error(monkeypatch):
    clock = iter(range(0, 10_000, 1))
    monkeypatch.setattr(kubernetes_runner.time, "monotonic", lambda: next(clock))
    runner = runner_with(FlakyApi(None, down=None), monkeypatch)
    with pytest.raises(errors.ApplianceUnknownError,
                       match=r"lost contact with the cluster server for 3 s .*Connection "
                             r"refused.*csctl get jobs wsjob-a3c"):
        runner._final_status("wsjob-a3c")


def test_a_lost_stream_of_a_succeeded_job_is_not_reported_as_its_success(monkeypatch):
    runner = runner_with(FlakyApi(ended("SUCCEEDED", "execute job succeeded"), 0), monkeypatch)
    monkeypatch.setattr(kubernetes_runner.channel, "connect",
                        lambda *a, **k: iter(()))  # the stream ends with no result
    with pytest.raises(errors.ApplianceUnknownError) as raised:
        runner._relay("wsjob-a3c", "cer-cs2-01", 1, "secret", lambda m: None)
    assert "execute job succeeded" not in str(raised.value)
    assert "broke before its result arrived" in str(raised.value)


# F7: a restarted API server refuses (403) what RBAC allows until it is ready -------------
class RestartingApi:
    """get_job answers 403 Forbidden `refusals` times, /readyz saying `ready` meanwhile."""

    def __init__(self, job, refusals, ready):
        self.job, self.refusals, self._ready = job, refusals, ready
        self.calls = self.readyz = 0

    def get_job(self, name, namespace):
        self.calls += 1
        if self.calls <= self.refusals:
            raise ApiError(403, "Forbidden", f'wsjobs.cerebras.com "{name}" is forbidden: '
                           'User "bob" cannot get resource "wsjobs"')
        return self.job

    def ready(self):
        self.readyz += 1
        return self._ready


def test_a_refusal_from_a_server_that_is_not_ready_is_retried(monkeypatch):
    api = RestartingApi(ended("FAILED", "the workload failed"), refusals=4, ready=False)
    runner = runner_with(api, monkeypatch)
    assert runner._final_status("wsjob-a3c")["phase"] == "FAILED"
    assert api.calls == 5 and api.readyz == 4


def test_a_refusal_from_a_ready_server_is_final_at_once(monkeypatch):
    api = RestartingApi(ended("FAILED", "x"), refusals=10, ready=True)
    runner = runner_with(api, monkeypatch)
    with pytest.raises(errors.ApplianceUnknownError, match=r"the cluster server answered: "
                                                           r".*cannot get resource"):
        runner._final_status("wsjob-a3c")
    assert api.calls == 1


# B11: another user's logs -----------------------------------------------------------------
class LogsApi:
    def __init__(self, owner):
        self.owner, self.config_map_reads = owner, 0

    def get_job(self, name, namespace):
        return {"metadata": {"name": name}, "spec": {"user": {"username": self.owner}},
                "status": {"phase": "SUCCEEDED"}}

    def get_config_map(self, name, namespace):
        self.config_map_reads += 1
        return {"binaryData": {"wsjob-bobjob1.tar.gz": base64.b64encode(b"logs").decode()}}


@pytest.fixture
def as_user(monkeypatch):
    def login(user, api):
        monkeypatch.setattr(csctl.config, "load_usernode_config", lambda path=None: {})
        monkeypatch.setattr(csctl.config, "default_namespace", lambda cfg: "job-operator")
        monkeypatch.setattr(csctl.config, "user_credentials", lambda cfg: None)
        monkeypatch.setattr(csctl.config, "current_user", lambda: user)
        monkeypatch.setattr(csctl, "KubeApi", lambda credentials: api)
    return login


def test_log_export_of_another_users_job_is_refused(as_user, capsys, tmp_path):
    api = LogsApi("bob")
    as_user("mallory", api)
    assert csctl.main(["log-export", "wsjob-bobjob1", "-p", str(tmp_path)]) == 1
    assert ("Error: job wsjob-bobjob1 belongs to bob: only its owner may export its logs"
            in capsys.readouterr().err)
    assert api.config_map_reads == 0 and not list(tmp_path.iterdir())


def test_log_export_of_ones_own_job(as_user, capsys, tmp_path):
    as_user("bob", LogsApi("bob"))
    assert csctl.main(["log-export", "wsjob-bobjob1", "-p", str(tmp_path)]) == 0
    assert (tmp_path / "wsjob-bobjob1.tar.gz").read_bytes() == b"logs"


def test_the_grant_names_one_config_map_and_one_user():
    sent = []
    api = kubeapi.KubeApi.__new__(kubeapi.KubeApi)
    api.request = lambda method, path, body=None, *a: sent.append((method, path, body))
    api.grant_read("wsjob-x-logs", "bob", {"wsjob": "wsjob-x"})
    (_, role_path, role), (_, binding_path, binding) = sent
    assert role_path.endswith("/namespaces/job-operator/roles")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                              "resourceNames": ["wsjob-x-logs"]}]
    assert binding_path.endswith("/rolebindings")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "bob"}]


def test_no_manifest_lets_every_user_read_configmaps():
    """RBAC gave cerebras-users `get` on every configmap (B11): no longer."""
    root = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "wsjob" / "base"
    documents = [d for f in root.glob("*.yaml") for d in yaml.safe_load_all(f.read_text()) if d]
    roles = {d["metadata"]["name"]: d for d in documents if d["kind"] in ("Role", "ClusterRole")}
    for binding in (d for d in documents if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if any(s["name"] == "cerebras-users" for s in binding["subjects"]):
            rules = roles[binding["roleRef"]["name"]]["rules"]
            assert not any("configmaps" in r["resources"] or "secrets" in r["resources"]
                           for r in rules), binding["metadata"]["name"]


def test_a_forbidden_logs_read_is_retried_while_the_grant_propagates(as_user, monkeypatch,
                                                                     tmp_path):
    api = LogsApi("bob")
    real = api.get_config_map

    def not_yet(name, namespace):
        if api.config_map_reads < 2:
            api.config_map_reads += 1
            raise ApiError(403, "Forbidden", "configmaps is forbidden")
        return real(name, namespace)

    api.get_config_map = not_yet
    monkeypatch.setattr(csctl.time, "sleep", lambda s: None)
    as_user("bob", api)
    assert csctl.main(["log-export", "wsjob-bobjob1", "-p", str(tmp_path)]) == 0


def test_a3c_a_compile_whose_management_node_restarts_ends_with_the_jobs_own_message(
        monkeypatch):
    """The stream is reset and the API refuses connections for a few calls: the client
    waits for the server and reports the job's end, not a traceback of Unreachable."""
    api = FlakyApi(ended("FAILED", "the workload ended without a result (see the job's "
                                   "logs)"), down=4)
    runner = runner_with(api, monkeypatch)

    def reset(*args, **kwargs):
        raise ConnectionResetError(104, "Connection reset by peer")
        yield  # a generator, as channel.connect is

    monkeypatch.setattr(kubernetes_runner.channel, "connect", reset)
    with pytest.raises(errors.ApplianceUnknownError,
                       match="failed due to: the workload ended without a result"):
        runner._relay("wsjob-a3c", "cer-mgmt-01", 1, "secret", lambda m: None)
    assert api.calls == 5
