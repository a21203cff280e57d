"""Talk to the node's tspd daemon (HTTP/JSON over its Unix socket).

The request/answer and its errors are every node daemon's client
(aitestbed.node.daemon.UnixJsonClient); this module names tspd's socket and its own routes.
"""

from __future__ import annotations

from aitestbed.node.daemon import DaemonError, UnixJsonClient

SOCKET_ENV = "AITESTBED_TSPD_SOCKET"
DEFAULT_SOCKET = "/run/tspd/tspd.sock"


class TspdError(DaemonError):
    """tspd refused a request (`status`: its HTTP status, 0 when it did not answer)."""


class TspdUnavailable(TspdError):
    """No tspd answers: this is not a GroqNode, or the daemon is down."""


class TspdClient(UnixJsonClient):
    socket_env = SOCKET_ENV
    default_socket = DEFAULT_SOCKET
    service = "the GroqCard service (tspd)"
    name = "tspd"
    error = TspdError
    unavailable = TspdUnavailable

    def cards(self) -> list[dict]:
        """Every card of the node: locked or not, job, user, session PID, health."""
        return self._call("GET", "/cards")

    def visible(self) -> list[int]:
        """The cards of the caller's PBS job on this node ([] outside a job)."""
        return list(self._call("GET", "/visible")["cards"])

    def reserve(self, job_id: str, user: str, cards: int) -> dict:
        return self._call("PUT", f"/jobs/{job_id}", {"user": user, "cards": cards})

    def open_session(self, cards: int) -> dict:
        """Lock `cards` unlocked cards of the caller's job: {"id", "cards", "job"}."""
        return self._call("POST", "/sessions", {"cards": cards})

    def clear(self) -> dict:
        """Reset the caller's cards (root: every card): {"cleared": [...], "locked": [...]}."""
        return self._call("POST", "/clear", {})

    def set_health(self, card: int, status: str) -> None:
        """Root: mark a card's status (fault injection); "Up" is healthy."""
        self._call("PUT", f"/cards/{card}/health", {"status": status})
