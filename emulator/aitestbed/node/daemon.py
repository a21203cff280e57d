"""What every node daemon shares: a JSON-over-HTTP request handler and an atomic save.

A daemon is state / wire / client (moto's models / responses split): its room holds
the model, a handler derived from `JsonHandler` routes requests to it, and the
server writes the model with `save_json` on every change, so a restart of the
daemon (or of its node) finds the state a crash cannot have half-written.
Standard library only: this runs on every node, inside the daemons' own Python.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import socket
import socketserver
import struct
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any


def save_json(path: Path, data: Any, *, sort_keys: bool = False) -> None:
    """Write `data` as indented JSON to `path`: a temporary file beside it, then a rename.

    The rename is atomic, so a reader (or the daemon after a crash) sees the old
    file or the new one, never a half-written one, and no temporary file is left.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")
    tmp.replace(path)


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads and answers JSON, on a TCP or a Unix socket.

    `read_json()` raises ValueError (json.JSONDecodeError) on a body that is not
    JSON; each daemon turns that into its own 400 reply.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base's name
        pass  # one line per request would drown the service log

    def reply(self, status: int, body: dict | list | None = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self) -> Any:
        """The request's JSON body; {} when it has none."""
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}


def append_journal(path: Path, event: str, **fields) -> None:
    """One JSON line per event in a root-only journal (created 0600)."""
    entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, **fields}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as journal:
        journal.write(json.dumps(entry, sort_keys=True) + "\n")


class UnixJsonServer(socketserver.ThreadingUnixStreamServer):
    """A daemon's Unix socket, open to every user (mode 0666): who calls is known from the
    socket itself (UnixJsonHandler.peer), never from the request."""

    daemon_threads = True

    def __init__(self, socket_path: str | Path, handler: type[BaseHTTPRequestHandler]):
        self.socket_path = Path(socket_path)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        super().__init__(str(self.socket_path), handler)
        self.socket_path.chmod(0o666)

    def server_close(self) -> None:
        super().server_close()
        self.socket_path.unlink(missing_ok=True)


class UnixJsonHandler(JsonHandler):
    """JsonHandler on a UnixJsonServer: the caller's credentials and the path's parts."""

    def address_string(self) -> str:
        return "unix"

    def peer(self) -> tuple[int, int, str]:
        """The caller's (pid, uid, user name) from the kernel (SO_PEERCRED)."""
        pid, uid, _ = struct.unpack("3i", self.request.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
        return pid, uid, user

    def path_parts(self) -> list[str]:
        return [p for p in self.path.split("?")[0].split("/") if p]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def call_unix_json(socket_path: str, method: str, path: str, body: dict | None = None,
                   timeout: float = 10.0) -> tuple[int, Any]:
    """One request to a UnixJsonServer: (HTTP status, decoded JSON reply). Raises
    FileNotFoundError or ConnectionRefusedError when no daemon listens there."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload else {}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()
