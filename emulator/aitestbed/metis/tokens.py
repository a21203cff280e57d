"""The gateway's bearer tokens: a small store interface and a JSON file behind it.

The gateway asks a `TokenStore` two things: who a token belongs to (its user, expiry,
whether it was revoked) and whether a user may use the service at all (an offboarded
user's tokens stop working). The emulated Globus Auth (issue 45's token helper) will
be another store; here a JSON file is enough, re-read when it changes, so a token can
be aged or revoked by rewriting the file:

    {"users": {"alice": {"active": true}},
     "tokens": [{"sha256": "<hex of the token>", "user": "alice",
                 "expires_at": 1767225600.0, "revoked": false}]}

Only tokens' SHA-256 digests are kept: the file does not hand out tokens.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aitestbed.node.daemon import load_json, save_json

ACCESS_TOKEN_SECONDS = 48 * 3600  # the docs: access tokens last 48 hours


@dataclass(frozen=True)
class TokenRecord:
    user: str
    expires_at: float
    revoked: bool = False


class TokenStore(Protocol):
    def lookup(self, token: str) -> TokenRecord | None: ...

    def user_active(self, user: str) -> bool: ...


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class JsonTokenStore:
    """Tokens in a JSON file (above), read again whenever its modification time changes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._tokens: dict[str, TokenRecord] = {}
        self._users: dict[str, bool] = {}

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._stamp and (stamp is not None or not self._tokens):
                return
            data = (load_json(self.path) if stamp else None) or {}
            self._tokens = {
                t["sha256"]: TokenRecord(str(t["user"]), float(t["expires_at"]),
                                         bool(t.get("revoked", False)))
                for t in data.get("tokens", [])}
            self._users = {name: bool(u.get("active", True))
                           for name, u in data.get("users", {}).items()}
            self._stamp = stamp

    def lookup(self, token: str) -> TokenRecord | None:
        self._refresh()
        return self._tokens.get(digest(token))

    def user_active(self, user: str) -> bool:
        self._refresh()
        return self._users.get(user, False)

    # --- what the token helper (and the tests) do to the file -------------------------------
    def _edit(self, change) -> None:
        data = load_json(self.path) or {"users": {}, "tokens": []}
        change(data)
        save_json(self.path, data)

    def add_user(self, user: str, active: bool = True) -> None:
        self._edit(lambda d: d.setdefault("users", {}).__setitem__(user, {"active": active}))

    def issue(self, user: str, lifetime: float = ACCESS_TOKEN_SECONDS,
              now: float | None = None) -> str:
        """A new access token for `user`, valid `lifetime` seconds from `now`."""
        token = "Agm" + secrets.token_urlsafe(48)
        expires = (time.time() if now is None else now) + lifetime
        self._edit(lambda d: d.setdefault("tokens", []).append(
            {"sha256": digest(token), "user": user, "expires_at": expires, "revoked": False}))
        return token

    def revoke(self, token: str) -> None:
        def change(data: dict) -> None:
            for t in data.get("tokens", []):
                if t["sha256"] == digest(token):
                    t["revoked"] = True
        self._edit(change)

    def age(self, token: str, seconds: float) -> None:
        """Move a token's expiry `seconds` earlier (to rehearse expiry)."""
        def change(data: dict) -> None:
            for t in data.get("tokens", []):
                if t["sha256"] == digest(token):
                    t["expires_at"] -= seconds
        self._edit(change)

