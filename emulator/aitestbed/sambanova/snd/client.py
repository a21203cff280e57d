"""Talk to the node's snd daemon (HTTP/JSON over its Unix socket)."""

from __future__ import annotations

import os

from aitestbed.node.daemon import call_unix_json

SOCKET_ENV = "AITESTBED_SND_SOCKET"
DEFAULT_SOCKET = "/run/snd/snd.sock"


class SndError(RuntimeError):
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class SndUnavailable(SndError):
    """No snd answers: this is not an RDU node, or the daemon is down."""


class SndClient:
    def __init__(self, socket_path: str | None = None, timeout: float = 10.0):
        self.socket_path = socket_path or os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None):
        try:
            status, data = call_unix_json(self.socket_path, method, path, body, self.timeout)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise SndUnavailable(f"the SN Devices Service (snd) is not running on this host "
                                 f"({self.socket_path}: {err.strerror})") from None
        if status != 200:
            raise SndError(data.get("error", f"snd answered {status}"), status)
        return data

    def node(self) -> dict:
        return self._call("GET", "/node")

    def tiles(self) -> list[dict]:
        return self._call("GET", "/tiles")

    def jobs(self) -> dict:
        return self._call("GET", "/jobs")

    def reserve(self, job_id: str, user: str, rdus: int) -> dict:
        return self._call("PUT", f"/jobs/{job_id}", {"user": user, "rdus": rdus})

    def release(self, job_id: str) -> None:
        self._call("DELETE", f"/jobs/{job_id}")

    def open_session(self, tiles: int, job_id: str | None = None) -> dict:
        return self._call("POST", "/sessions", {"tiles": tiles, "job_id": job_id})

    def set_state(self, session_id: str, state: str) -> None:
        self._call("PUT", f"/sessions/{session_id}/state", {"state": state})

    def close_session(self, session_id: str) -> None:
        self._call("DELETE", f"/sessions/{session_id}")
