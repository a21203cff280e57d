"""The daemons' shared base (aitestbed.node.daemon): the JSON handler and the atomic save,
alone and as the V-IPU server and snd use them."""

import http.client
import json
import socket
import threading
from http.server import ThreadingHTTPServer

import pytest
from aitestbed.graphcore.vipu.pod import Pod
from aitestbed.graphcore.vipu.server import VipuServer
from aitestbed.node.daemon import JsonHandler, save_json
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
