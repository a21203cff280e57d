"""The daemons' shared base (aitestbed.node.daemon): the JSON handler and the atomic save,
alone and as the V-IPU server and snd use them; the daemon skeleton and its client, on a toy
daemon through its real client."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from http.server import ThreadingHTTPServer

import pytest
from aitestbed.graphcore.vipu.pod import Pod
from aitestbed.graphcore.vipu.server import VipuServer
from aitestbed.node.daemon import (
    DaemonError,
    DaemonHandler,
    JsonHandler,
    Peer,
    PlacementError,
    ProcessSessions,
    Route,
    UnixJsonClient,
    UnixJsonDaemon,
    save_json,
)
from aitestbed.node.processes import process_start_ticks
from aitestbed.sambanova.snd.server import SndServer


def test_save_json_replaces_the_file_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old")
    save_json(target, {"b": 1, "a": [1, 2]}, sort_keys=True)
    assert target.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    save_json(target, {"b": 1, "a": 2})
    assert list(json.loads(target.read_text())) == ["b", "a"]  # order kept unless sorted
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_failed_save_keeps_the_old_file(tmp_path):
    target = tmp_path / "state.json"
    target.write_text('{"kept": true}\n')
    with pytest.raises(TypeError):
        save_json(target, {"unserialisable": object()})
    assert json.loads(target.read_text()) == {"kept": True}


class _Echo(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        try:
            body = self.read_json()
        except ValueError as err:
            return self.reply(400, {"error": f"bad request: {err}"})
        self.reply(200, {"got": body})

    def do_GET(self) -> None:  # noqa: N802
        self.reply(204 if self.path == "/empty" else 200)


@pytest.fixture
def http_server():
    servers = []

    def start(server):
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _request(port: int, method: str, path: str, body: bytes | None = None,
             headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={
            **({"Content-Type": "application/json"} if body is not None else {}),
            **(headers or {})})
        response = conn.getresponse()
        data = response.read()
        return response.status, response.getheader("Content-Type"), data
    finally:
        conn.close()


def test_the_handler_reads_and_answers_json(http_server):
    port = http_server(ThreadingHTTPServer(("127.0.0.1", 0), _Echo)).server_address[1]
    assert _request(port, "POST", "/", b'{"a": 1}') == (
        200, "application/json", b'{"got": {"a": 1}}')
    assert _request(port, "POST", "/", b"") == (200, "application/json", b'{"got": {}}')
    assert _request(port, "GET", "/") == (200, "application/json", b"{}")


def test_a_body_that_is_not_json_gets_a_400_with_the_reason(http_server):
    port = http_server(ThreadingHTTPServer(("127.0.0.1", 0), _Echo)).server_address[1]
    status, kind, data = _request(port, "POST", "/", b"{not json")
    assert (status, kind) == (400, "application/json")
    assert json.loads(data)["error"].startswith("bad request: Expecting property name")


def test_the_vipu_server_answers_a_bad_body_as_before(http_server, tmp_path):
    gres = tmp_path / "gres.conf"
    gres.write_text("NodeName=gc-poplar-01 Name=ipu Count=16\n")
    server = http_server(VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path))
    admin = {"Authorization": f"Bearer {server.token}"}
    status, _, data = _request(server.server_address[1], "PUT", "/api/v1/partitions/p", b"{x",
                               admin)
    assert status == 400
    assert json.loads(data) == {"error": 'expected {"hosts": {host: count}}'}
    status, _, _ = _request(server.server_address[1], "PUT", "/api/v1/partitions/p",
                            b'{"hosts": {"gc-poplar-01": 2}}', admin)
    assert status == 201
    assert sorted(p.name for p in tmp_path.iterdir()) == ["admin.token", "gres.conf",
                                                         "partitions.json"]


def test_snd_answers_a_bad_body_as_before(http_server, tmp_path):
    socket_path = tmp_path / "snd.sock"
    http_server(SndServer(socket_path, tmp_path / "state", node="sn30-r1-h1", tiles_per_rdu=8))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(socket_path))
        sock.sendall(b"POST /sessions HTTP/1.1\r\nHost: snd\r\nContent-Length: 4\r\n"
                     b"Connection: close\r\n\r\n{bad")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["error"].startswith("bad request: Expecting property name")


# --- the daemon skeleton (UnixJsonDaemon, DaemonHandler, UnixJsonClient) through a real client,
# on a toy daemon whose model is a few lines: what snd and tspd share is tested once here.
@dataclass
class _Held:
    id: str
    pid: int
    start_ticks: int


@dataclass
class _Pool(ProcessSessions[_Held]):
    """A toy model: `size` units, jobs holding some, sessions held by processes."""

    size: int
    jobs: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, _Held] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=itertools.count, repr=False)

    def reserve(self, job_id: str, units: int) -> dict:
        if units > self.size - sum(self.jobs.values()):
            raise PlacementError(f"job {job_id} needs {units}, {self.size} in all")
        self.jobs[job_id] = units
        return {"units": units}

    def to_dict(self) -> dict:
        return {"size": self.size, "jobs": self.jobs,
                "sessions": [asdict(s) for s in self.sessions.values()]}

    @classmethod
    def from_dict(cls, data: dict) -> _Pool:
        pool = cls(size=data["size"], jobs=dict(data["jobs"]))
        pool.restore_sessions(_Held(**raw) for raw in data["sessions"])
        return pool


class _PoolHandler(DaemonHandler):
    not_found = "no such pool session"

    def route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        pool = self.server.model
        match method, path:
            case "GET", ["jobs"]:
                return 200, pool.jobs, False
            case "PUT", ["jobs", job_id]:
                return 200, pool.reserve(job_id, int(body["units"])), True
            case "DELETE", ["jobs", job_id]:
                pool.jobs.pop(job_id, None)
                return 200, {}, True
            case "POST", ["sessions"]:
                held = _Held(pool.new_session_id(peer.pid), peer.pid,
                             process_start_ticks(peer.pid) or 0)
                pool.sessions[held.id] = held
                return 200, {"id": held.id, "root": peer.root}, True
            case "PUT", ["sessions", session_id, "close"]:  # as another PID: a stranger
                pool.close_session(session_id, int(body.get("as_pid", peer.pid)))
                return 200, {}, True
        return self.no_route(method)


class _PoolDaemon(UnixJsonDaemon[_Pool]):
    def __init__(self, socket_path, state_dir):
        super().__init__(socket_path, state_dir, _PoolHandler,
                         lambda saved: _Pool(size=4) if saved is None else _Pool.from_dict(saved))


class _PoolError(DaemonError):
    pass


class _PoolDown(_PoolError):
    pass


class _PoolClient(UnixJsonClient):
    socket_env = "AITESTBED_TEST_POOL_SOCKET"
    default_socket = "/nonexistent/pool.sock"
    service = "the pool service (poold)"
    name = "poold"
    error = _PoolError
    unavailable = _PoolDown

    def call(self, method: str, path: str, body: dict | None = None):
        return self._call(method, path, body)


@pytest.fixture
def pool(tmp_path, monkeypatch):
    socket_path = tmp_path / "pool.sock"
    monkeypatch.setenv("AITESTBED_TEST_POOL_SOCKET", str(socket_path))
    started = []

    def start():
        server = _PoolDaemon(socket_path, tmp_path / "state")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def test_the_daemon_saves_after_a_change_only_and_a_restart_finds_its_state(pool, tmp_path):
    server = pool()
    client = _PoolClient()
    state = tmp_path / "state" / "state.json"
    assert client.call("GET", "/jobs") == {} and not state.exists()  # nothing changed
    assert client.call("PUT", "/jobs/7", {"units": 3}) == {"units": 3}
    session = client.call("POST", "/sessions")
    assert session == {"id": f"{os.getpid()}-0", "root": os.getuid() == 0}
    assert state.read_text() == json.dumps(server.model.to_dict(), indent=2, sort_keys=True) + "\n"
    mtime = state.stat().st_mtime_ns
    client.call("GET", "/jobs")
    assert state.stat().st_mtime_ns == mtime
    server.shutdown()
    server.server_close()
    assert not (tmp_path / "pool.sock").exists()
    again = pool()
    assert again.model.jobs == {"7": 3} and list(again.model.sessions) == [session["id"]]
    assert client.call("POST", "/sessions")["id"] == f"{os.getpid()}-1"  # ids go on


def test_the_daemon_maps_refusals_to_statuses_the_client_raises(pool):
    pool()
    client = _PoolClient()
    client.call("PUT", "/jobs/1", {"units": 3})
    with pytest.raises(_PoolError, match="^job 2 needs 2, 4 in all$") as err:
        client.call("PUT", "/jobs/2", {"units": 2})
    assert err.value.status == 409
    with pytest.raises(_PoolError, match="^no such pool session: 9-9$") as err:
        client.call("PUT", "/sessions/9-9/close", {})
    assert err.value.status == 404
    held = client.call("POST", "/sessions")["id"]
    with pytest.raises(_PoolError, match=f"^session {held} belongs to PID {os.getpid()}$") as err:
        client.call("PUT", f"/sessions/{held}/close", {"as_pid": 1})
    assert err.value.status == 403
    with pytest.raises(_PoolError, match="^bad request: 'units'$") as err:
        client.call("PUT", "/jobs/3", {})
    assert err.value.status == 400
    with pytest.raises(_PoolError, match="^bad request: the body must be a JSON object$"):
        client.call("PUT", "/jobs/3", [1])  # type: ignore[arg-type]
    with pytest.raises(_PoolError, match="^no such resource: GET /nowhere$") as err:
        client.call("GET", "/nowhere")
    assert err.value.status == 404


def test_the_daemon_reaps_the_sessions_of_processes_that_are_gone(pool):
    server = pool()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(gone.stdout)
    server.model.sessions[f"{pid}-5"] = _Held(f"{pid}-5", pid, 12345)
    _PoolClient().call("GET", "/jobs")  # any request reaps first
    assert server.model.sessions == {}


def test_the_client_says_the_daemon_is_not_running_and_waits_for_it(pool, tmp_path):
    with pytest.raises(_PoolDown, match=r"^the pool service \(poold\) is not running on this "
                                        r"host \(.*pool.sock: No such file or directory\)$"):
        _PoolClient().call("GET", "/jobs")
    starter = threading.Timer(0.5, pool)
    starter.start()
    try:
        assert _PoolClient.when_up(lambda c: c.call("GET", "/jobs"), 10.0) == {}
    finally:
        starter.join()
    with pytest.raises(_PoolDown):
        _PoolClient("/nonexistent/other.sock").call("GET", "/jobs")


def test_a_prologue_reservation_frees_stale_jobs_once_when_too_few_are_free(pool):
    pool()
    client = _PoolClient()
    client.call("PUT", "/jobs/old", {"units": 3})
    released = []

    def release_stale(c):
        released.append(sorted(c.call("GET", "/jobs")))
        c.call("DELETE", "/jobs/old")

    def reserve(c):
        return c.call("PUT", "/jobs/new", {"units": 2})

    assert _PoolClient.reserve_for_job(reserve, release_stale, 5.0) == {"units": 2}
    assert released == [["old"]]
    with pytest.raises(_PoolError, match="needs 9") as err:  # still too few: the 409 is raised
        _PoolClient.reserve_for_job(lambda c: c.call("PUT", "/jobs/big", {"units": 9}),
                                    lambda c: None, 5.0)
    assert err.value.status == 409
