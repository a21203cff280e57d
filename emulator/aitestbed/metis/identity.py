"""Who asks the gateway for a token: a MUNGE credential, and the cluster's accounts.

The token helper (aitestbed.metis.auth) runs on a login node and sends a credential
that munged made for its process (`munge -n`) in the Metis MUNGE domain: the login
nodes and the gateway share that domain's key (a key of its own, not the Slurm
clusters', so a gateway or login node gains nothing over Slurm). The gateway has the
credential decoded by its own munged (`unmunge`): munged vouches for the uid, refuses a
replayed credential and one older than its time to live. The uid is then looked up in
the cluster's accounts (accounts.json, which `up` and the account playbooks publish to
every node): only a testbed account gets a token, and only while it is active, so an
offboarded user's tokens stop working at once (the token store asks `active`).

`Verifier` is what the gateway calls (a credential -> uid, or MungeError); the tests
give it another.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from aitestbed.metis.tokens import file_stamp
from aitestbed.node import munge

# The Metis MUNGE domain's munged (roles/metis_gateway: the metis-munge service).
SOCKET = "/run/munge-metis/munge.socket.2"
Verifier = Callable[[str], int]


def munge_verifier(socket: str | None = SOCKET) -> Verifier:
    """unmunge through the Metis domain's munged."""
    return lambda credential: munge.decode(credential, socket=socket)


class AccountsFile:
    """The cluster's accounts.json (groups, projects, users: name, uid, active), read
    again whenever it changes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._by_uid: dict[int, str] = {}
        self._active: dict[str, bool] = {}

    def _refresh(self) -> None:
        stamp = file_stamp(self.path)
        with self._lock:
            if stamp == self._stamp:
                return
            users = []
            if stamp is not None:
                try:
                    users = json.loads(self.path.read_text()).get("users", [])
                except (OSError, ValueError, AttributeError):
                    users = []  # unreadable: nobody, until it is written again
            self._by_uid = {int(u["uid"]): str(u["name"]) for u in users
                            if isinstance(u, dict) and "uid" in u and "name" in u}
            self._active = {str(u["name"]): bool(u.get("active", True)) for u in users
                            if isinstance(u, dict) and "name" in u}
            self._stamp = stamp

    def name_of(self, uid: int) -> str | None:
        self._refresh()
        return self._by_uid.get(uid)

    def uid_of(self, name: str) -> int | None:
        self._refresh()
        return next((uid for uid, n in self._by_uid.items() if n == name), None)

    def active(self, name: str) -> bool:
        self._refresh()
        return self._active.get(name, False)
