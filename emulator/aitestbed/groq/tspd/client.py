"""Talk to the node's tspd daemon (HTTP/JSON over its Unix socket)."""

from __future__ import annotations

import os

from aitestbed.node.daemon import call_unix_json

SOCKET_ENV = "AITESTBED_TSPD_SOCKET"
DEFAULT_SOCKET = "/run/tspd/tspd.sock"


class TspdError(RuntimeError):
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class TspdUnavailable(TspdError):
    """No tspd answers: this is not a GroqNode, or the daemon is down."""


class TspdClient:
    def __init__(self, socket_path: str | None = None, timeout: float = 10.0):
        self.socket_path = socket_path or os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None):
        try:
            status, data = call_unix_json(self.socket_path, method, path, body, self.timeout)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise TspdUnavailable(f"the GroqCard service (tspd) is not running on this host "
                                  f"({self.socket_path}: {err.strerror})") from None
        if status != 200:
            message = data.get("error") if isinstance(data, dict) else None
            raise TspdError(message or f"tspd answered {status}", status)
        return data

    def node(self) -> dict:
        return self._call("GET", "/node")

    def cards(self) -> list[dict]:
        """Every card of the node: locked or not, job, user, session PID, health."""
        return self._call("GET", "/cards")

    def visible(self) -> list[int]:
        """The cards of the caller's PBS job on this node ([] outside a job)."""
        return list(self._call("GET", "/visible")["cards"])

    def jobs(self) -> dict:
        return self._call("GET", "/jobs")

    def reserve(self, job_id: str, user: str, cards: int) -> dict:
        return self._call("PUT", f"/jobs/{job_id}", {"user": user, "cards": cards})

    def release(self, job_id: str) -> None:
        self._call("DELETE", f"/jobs/{job_id}")

    def open_session(self, cards: int) -> dict:
        """Lock `cards` unlocked cards of the caller's job: {"id", "cards", "job"}."""
        return self._call("POST", "/sessions", {"cards": cards})

    def close_session(self, session_id: str) -> None:
        self._call("DELETE", f"/sessions/{session_id}")

    def clear(self) -> dict:
        """Reset the caller's cards (root: every card): {"cleared": [...], "locked": [...]}."""
        return self._call("POST", "/clear", {})

    def set_health(self, card: int, status: str) -> None:
        """Root: mark a card's status (fault injection); "Up" is healthy."""
        self._call("PUT", f"/cards/{card}/health", {"status": status})
