"""Newline-delimited JSON from an appliance worker to its client, over TCP.

The worker serves (ChannelServer) and the client connects (connect). The worker may
start sending before the client is there: messages wait in a queue and go out when
it connects. close() hands everything over, half-closes the connection and waits
until the client has read to the end, so a worker never exits with messages unread.

The stream is the job owner's: the client's first line is {"token": SECRET}, and
the worker serves only the connection whose secret hashes to the job's
ingressTokenSha256 (the spec holds the hash, the owner's client the secret). Any
other connection gets {"type": "refused", ...} and is closed; it neither takes
the stream nor stops the owner's client from connecting.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

SEND_TIMEOUT_SECONDS = 60.0
HELLO_TIMEOUT_SECONDS = 10.0
HELLO_LIMIT = 4096


class Refused(ConnectionError):
    """The worker refused this client: it did not present the job's secret."""


def _read_line(conn: socket.socket, limit: int) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < limit:
        chunk = conn.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


class ChannelServer:
    """Accepts the client that presents the secret hashing to `token_sha256` on `port`,
    and sends it messages, in order. Without a hash it serves nobody."""

    def __init__(self, port: int, token_sha256: str | None,
                 host: str = "0.0.0.0"):  # noqa: S104 - the client is remote
        self._listener = socket.create_server((host, port))
        self.port = self._listener.getsockname()[1]
        self._token_sha256 = (token_sha256 or "").lower()
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._conn: socket.socket | None = None
        self._connected = threading.Event()
        threading.Thread(target=self._accept, name="channel-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._connected.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed before the client connected
                return
            threading.Thread(target=self._hello, args=(conn,), name="channel-hello",
                             daemon=True).start()

    def _authentic(self, conn: socket.socket) -> bool:
        try:
            conn.settimeout(HELLO_TIMEOUT_SECONDS)
            token = json.loads(_read_line(conn, HELLO_LIMIT)).get("token")
        except (OSError, ValueError, AttributeError):
            return False
        if not isinstance(token, str) or not self._token_sha256:
            return False
        digest = hashlib.sha256(token.encode()).hexdigest()
        return hmac.compare_digest(digest, self._token_sha256)

    def _hello(self, conn: socket.socket) -> None:
        if not self._authentic(conn):
            try:
                conn.sendall((json.dumps({"type": "refused", "message": (
                    "this job's stream belongs to its owner's client: the secret it "
                    "presented does not match")}) + "\n").encode())
            except OSError:
                pass
            conn.close()
            return
        conn.settimeout(SEND_TIMEOUT_SECONDS)
        with self._lock:
            if self._connected.is_set():  # the client is already connected
                conn.close()
                return
            try:
                for data in self._pending:
                    conn.sendall(data)
                self._conn = conn
            except OSError:
                conn.close()
            self._pending.clear()
            self._connected.set()
        try:  # wake the accept loop so that it ends
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            pass

    def send(self, message: dict) -> None:
        """Send now if the client is connected, else queue; a vanished client is ignored."""
        data = (json.dumps(message) + "\n").encode()
        with self._lock:
            if not self._connected.is_set():
                self._pending.append(data)
                return
            if self._conn is None:
                return
            try:
                self._conn.sendall(data)
            except OSError:
                self._conn.close()
                self._conn = None

    def close(self, timeout: float = 60.0) -> bool:
        """Wait up to `timeout` s for the client to connect and read everything; True if it did."""
        deadline = time.monotonic() + timeout
        self._connected.wait(timeout)
        self._listener.close()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return False
        drained = False
        try:
            conn.shutdown(socket.SHUT_WR)
            while (remaining := deadline - time.monotonic()) > 0:
                conn.settimeout(remaining)
                if not conn.recv(4096):
                    drained = True
                    break
        except OSError:
            pass
        finally:
            conn.close()
        return drained


def connect(host: str, port: int, timeout: float, token: str, *,
            give_up: Callable[[], bool] | None = None) -> Iterator[dict]:
    """Yield the worker's messages until it closes the channel.

    Connecting is retried until `timeout` seconds have passed (or `give_up()` is
    true, e.g. the worker process has died), then ConnectionError; a worker that
    refuses `token` raises Refused. Runs lazily: the first next() connects.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=5)
            break
        except OSError as err:
            if time.monotonic() >= deadline or (give_up is not None and give_up()):
                raise ConnectionError(f"could not connect to the appliance job at "
                                      f"{host}:{port}: {err}") from err
            time.sleep(0.1)
    with sock, sock.makefile("rb") as stream:
        sock.sendall((json.dumps({"token": token}) + "\n").encode())
        sock.settimeout(None)
        for line in stream:
            if line.strip():
                message = json.loads(line)
                if message.get("type") == "refused":
                    raise Refused(f"the appliance job at {host}:{port} refused this client: "
                                  f"{message.get('message', '')}")
                yield message
