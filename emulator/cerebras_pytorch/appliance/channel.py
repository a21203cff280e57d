"""Newline-delimited JSON from an appliance worker to its client, over TCP.

The worker serves (ChannelServer) and the client connects (connect). The worker may
start sending before the client is there: messages wait in a queue and go out when
it connects. close() hands everything over, half-closes the connection and waits
until the client has read to the end, so a worker never exits with messages unread.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

SEND_TIMEOUT_SECONDS = 60.0


class ChannelServer:
    """Accepts one client on `port` and sends it messages, in order."""

    def __init__(self, port: int, host: str = "0.0.0.0"):  # noqa: S104 - the client is remote
        self._listener = socket.create_server((host, port))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._conn: socket.socket | None = None
        self._connected = threading.Event()
        threading.Thread(target=self._accept, name="channel-accept", daemon=True).start()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:  # closed before anyone connected
            return
        conn.settimeout(SEND_TIMEOUT_SECONDS)
        with self._lock:
            try:
                for data in self._pending:
                    conn.sendall(data)
                self._conn = conn
            except OSError:
                conn.close()
            self._pending.clear()
        self._connected.set()

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


def connect(host: str, port: int, timeout: float, *,
            give_up: Callable[[], bool] | None = None) -> Iterator[dict]:
    """Yield the worker's messages until it closes the channel.

    Connecting is retried until `timeout` seconds have passed (or `give_up()` is
    true, e.g. the worker process has died), then ConnectionError. Runs lazily: the
    first next() connects.
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
    sock.settimeout(None)
    with sock, sock.makefile("rb") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)
