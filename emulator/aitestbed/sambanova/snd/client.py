"""Talk to the node's snd daemon (HTTP/JSON over its Unix socket).

The request/answer and its errors are every node daemon's client
(aitestbed.node.daemon.UnixJsonClient); this module names snd's socket and its own routes.
"""

from __future__ import annotations

from aitestbed.node.daemon import DaemonError, UnixJsonClient

SOCKET_ENV = "AITESTBED_SND_SOCKET"
DEFAULT_SOCKET = "/run/snd/snd.sock"


class SndError(DaemonError):
    """snd refused a request (`status`: its HTTP status, 0 when it did not answer)."""


class SndUnavailable(SndError):
    """No snd answers: this is not an RDU node, or the daemon is down."""


class SndClient(UnixJsonClient):
    socket_env = SOCKET_ENV
    default_socket = DEFAULT_SOCKET
    service = "the SN Devices Service (snd)"
    name = "snd"
    error = SndError
    unavailable = SndUnavailable

    def tiles(self) -> list[dict]:
        return self._call("GET", "/tiles")

    def reserve(self, job_id: str, user: str, rdus: int) -> dict:
        return self._call("PUT", f"/jobs/{job_id}", {"user": user, "rdus": rdus})

    def open_session(self, tiles: int, job_id: str | None = None) -> dict:
        return self._call("POST", "/sessions", {"tiles": tiles, "job_id": job_id})

    def set_state(self, session_id: str, state: str) -> None:
        self._call("PUT", f"/sessions/{session_id}/state", {"state": state})
