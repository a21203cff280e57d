"""The gateway's bearer tokens: a small store interface and a JSON file behind it.

The gateway asks a `TokenStore` two things: who a token belongs to (its user, expiry,
whether it was revoked) and whether a user may use the service at all (an offboarded
user's tokens stop working). A JSON file is enough, re-read when it changes, so a token
can be aged or revoked by rewriting the file:

    {"users": {"alice": {"active": true}},
     "tokens": [{"sha256": "<hex of the token>", "user": "alice",
                 "expires_at": 1767225600.0, "revoked": false,
                 "kind": "access", "session_ends": 1767744000.0}]}

Only tokens' SHA-256 digests are kept: the file does not hand out tokens. Every change
is made under a lock file beside it (`<name>.lock`, flock), so the gateway and an admin
command (aitestbed.metis.admin) that ages or revokes tokens do not lose each other's
change, and saved atomically (a new file renamed over the old one).

Sessions (the token helper's `authenticate`, aitestbed.metis.auth): one refresh token and
one access token. The refresh token lives until the session ends, 7 days after the
authentication (the docs: "re-authentication is required every 7 days"); each access
token 48 hours, never past its session's end. A refresh token is never a bearer token.
In the cluster, whether a user is active comes from the cluster's accounts
(`user_active`: aitestbed.metis.identity), not from this file's "users".
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aitestbed.node.daemon import load_json, save_json

ACCESS_TOKEN_SECONDS = 48 * 3600  # the docs: access tokens last 48 hours
SESSION_SECONDS = 7 * 24 * 3600  # the docs: re-authentication every 7 days
ACCESS, REFRESH = "access", "refresh"


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size) of a file a service reads again when it changes; None if absent."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclass(frozen=True)
class TokenRecord:
    user: str
    expires_at: float
    revoked: bool = False
    kind: str = ACCESS
    session_ends: float | None = None  # when its session ends (re-authentication)


class TokenStore(Protocol):
    def lookup(self, token: str) -> TokenRecord | None: ...

    def user_active(self, user: str) -> bool: ...


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class JsonTokenStore:
    """Tokens in a JSON file (above), read again whenever its modification time changes.
    `user_active`: who may use the service (default: the file's "users")."""

    def __init__(self, path: Path, user_active: Callable[[str], bool] | None = None):
        self.path = Path(path)
        self._active = user_active
        self._lock = threading.Lock()
        self._edit_lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._tokens: dict[str, TokenRecord] = {}
        self._users: dict[str, bool] = {}

    def _refresh(self) -> None:
        stamp = file_stamp(self.path)
        with self._lock:
            if stamp == self._stamp and (stamp is not None or not self._tokens):
                return
            data = (load_json(self.path) if stamp else None) or {}
            self._tokens = {
                t["sha256"]: TokenRecord(
                    str(t["user"]), float(t["expires_at"]), bool(t.get("revoked", False)),
                    str(t.get("kind", ACCESS)),
                    float(t["session_ends"]) if t.get("session_ends") is not None else None)
                for t in data.get("tokens", [])}
            self._users = {name: bool(u.get("active", True))
                           for name, u in data.get("users", {}).items()}
            self._stamp = stamp

    def _record(self, token: str, kind: str) -> TokenRecord | None:
        self._refresh()
        record = self._tokens.get(digest(token))
        return record if record is not None and record.kind == kind else None

    def lookup(self, token: str) -> TokenRecord | None:
        """An access token's record (a refresh token is no bearer token: None)."""
        return self._record(token, ACCESS)

    def lookup_refresh(self, token: str) -> TokenRecord | None:
        return self._record(token, REFRESH)

    def user_active(self, user: str) -> bool:
        if self._active is not None:
            return self._active(user)
        self._refresh()
        return self._users.get(user, False)

    # --- what the token helper (and the tests) do to the file -------------------------------
    def _edit(self, change):
        """Apply `change` to the file's data under the lock (threads and processes);
        its result is returned."""
        with self._edit_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = self.path.with_name(self.path.name + ".lock")
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                data = load_json(self.path) or {"users": {}, "tokens": []}
                result = change(data)
                save_json(self.path, data)
            finally:
                os.close(fd)  # releases the lock
        return result

    def _add(self, user: str, kind: str, expires: float, session_ends: float | None,
             now: float) -> str:
        token = ("Agm" if kind == ACCESS else "Agr") + secrets.token_urlsafe(48)

        def change(data: dict) -> None:
            # what can no longer be used is forgotten (the file stays small)
            data["tokens"] = [t for t in data.get("tokens", []) if t["expires_at"] > now]
            data["tokens"].append({"sha256": digest(token), "user": user, "kind": kind,
                                   "expires_at": expires, "revoked": False,
                                   "session_ends": session_ends})
        self._edit(change)
        return token

    def start_session(self, user: str, now: float | None = None) -> tuple[str, str, float, float]:
        """(access token, refresh token, the access token's expiry, the session's end) of a
        new session of `user`, who has just proved who they are."""
        now = time.time() if now is None else now
        ends = now + SESSION_SECONDS
        expires = min(now + ACCESS_TOKEN_SECONDS, ends)
        refresh = self._add(user, REFRESH, ends, ends, now)
        return self._add(user, ACCESS, expires, ends, now), refresh, expires, ends

    def refresh_access(self, record: TokenRecord, now: float | None = None) -> tuple[str, float]:
        """A new access token of the refresh token's session (its checks: the caller's)."""
        now = time.time() if now is None else now
        ends = record.session_ends if record.session_ends is not None else record.expires_at
        expires = min(now + ACCESS_TOKEN_SECONDS, ends)
        return self._add(record.user, ACCESS, expires, ends, now), expires

    def add_user(self, user: str, active: bool = True) -> None:
        self._edit(lambda d: d.setdefault("users", {}).__setitem__(user, {"active": active}))

    def issue(self, user: str, lifetime: float = ACCESS_TOKEN_SECONDS,
              now: float | None = None) -> str:
        """A new access token for `user`, valid `lifetime` seconds from `now`."""
        token = "Agm" + secrets.token_urlsafe(48)
        expires = (time.time() if now is None else now) + lifetime
        self._edit(lambda d: d.setdefault("tokens", []).append(
            {"sha256": digest(token), "user": user, "expires_at": expires, "revoked": False,
             "kind": ACCESS}))
        return token

    def revoke(self, token: str) -> None:
        def change(data: dict) -> None:
            for t in data.get("tokens", []):
                if t["sha256"] == digest(token):
                    t["revoked"] = True
        self._edit(change)

    # --- what an administrator does to a user's tokens (aitestbed.metis.admin) -------------
    def records_of(self, user: str) -> list[tuple[str, TokenRecord]]:
        """(digest, record) of each of the user's tokens (access and refresh), as the
        file has them now."""
        self._refresh()
        return [(d, r) for d, r in self._tokens.items() if r.user == user]

    def age_user(self, user: str, seconds: float, session: bool = False,
                 now: float | None = None) -> int:
        """Move the expiry of `user`'s live access tokens `seconds` earlier; with
        `session`, their session's end too, and the refresh tokens' (so the 7-day
        re-authentication comes that much sooner). The number of tokens changed."""
        now = time.time() if now is None else now

        def change(data: dict) -> int:
            changed = 0
            for t in data.get("tokens", []):
                if t["user"] != user or t.get("revoked") or t["expires_at"] <= now:
                    continue
                kind = t.get("kind", ACCESS)
                if kind == REFRESH and not session:
                    continue
                t["expires_at"] -= seconds
                if session and t.get("session_ends") is not None:
                    t["session_ends"] -= seconds
                changed += 1
            return changed
        return self._edit(change)

    def revoke_user(self, user: str) -> int:
        """Revoke every token of `user`; the number newly revoked."""
        def change(data: dict) -> int:
            changed = 0
            for t in data.get("tokens", []):
                if t["user"] == user and not t.get("revoked"):
                    t["revoked"] = True
                    changed += 1
            return changed
        return self._edit(change)

    def age(self, token: str, seconds: float) -> None:
        """Move a token's expiry (and its session's end) `seconds` earlier (to rehearse
        expiry)."""
        def change(data: dict) -> None:
            for t in data.get("tokens", []):
                if t["sha256"] == digest(token):
                    t["expires_at"] -= seconds
                    if t.get("session_ends") is not None:
                        t["session_ends"] -= seconds
        self._edit(change)

