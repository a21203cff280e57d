"""Rehearse a token's expiry on the gateway node: age, revoke or list a user's tokens.

    python -m aitestbed.metis.admin age --user NAME --seconds N [--session]
    python -m aitestbed.metis.admin revoke --user NAME
    python -m aitestbed.metis.admin list --user NAME
        (each: [--config FILE], default /etc/metis/gateway.yml)

Run as root on the gateway node (the host: `docker exec <cluster>-metis-gw-01
/opt/aitestbed/venv/bin/python -m aitestbed.metis.admin ...`). It edits the token store
the gateway's configuration names (`tokens`, aitestbed.metis.tokens) through the store
itself: under its lock file and saved atomically, so the running gateway reads the change
at its next request (the file's stamp changed) and neither loses the other's change. As
root it first becomes the owner of the store's directory (the gateway's user), so the
files stay theirs.

  age      moves the user's live access tokens' expiry N seconds earlier: the next call
           gets 401 "Access token expired" and `get_access_token` refreshes it. With
           --session, the session's end too (refresh tokens included): N = 7 days ends
           the session, and only `authenticate --force` gives tokens again.
  revoke   revokes every token of the user (access and refresh).
  list     each token's kind, expiry, session end, whether revoked and seconds left
           (JSON). Never a token: the store keeps only their SHA-256; `id` is the first
           12 hex digits of it.

Each command returns data and main() prints it as JSON; bad input is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from aitestbed.metis import config as config_module
from aitestbed.metis.tokens import ACCESS, JsonTokenStore

CONFIG = Path("/etc/metis/gateway.yml")  # roles/metis_gateway installs it
CLOCK = time.time  # the gateway's clock (the tests' own)
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class AdminError(Exception):
    """Bad input or a store that cannot be used: one line, exit 2."""


def store_of(config_path: Path) -> JsonTokenStore:
    """The gateway's token store, from its configuration."""
    try:
        cfg = config_module.load(config_path)
    except config_module.ConfigError as err:
        raise AdminError(str(err)) from None
    if cfg.tokens is None:
        raise AdminError(f"{config_path} names no token store (`tokens`)")
    return JsonTokenStore(cfg.tokens)


def _user(name: str) -> str:
    if not USER_NAME.match(name or ""):
        raise AdminError(f"--user must be an account name, not {name!r}")
    return name


def list_tokens(store: JsonTokenStore, user: str, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    tokens = []
    for sha, record in sorted(store.records_of(_user(user)), key=lambda item: (
            item[1].kind != ACCESS, item[1].expires_at)):
        entry = {"id": sha[:12], "kind": record.kind, "expires_at": record.expires_at,
                 "revoked": record.revoked,
                 "seconds_left": max(0, int(record.expires_at - now))}
        if record.session_ends is not None:
            entry["session_ends"] = record.session_ends
            entry["session_seconds_left"] = max(0, int(record.session_ends - now))
        entry["live"] = not record.revoked and record.expires_at > now
        tokens.append(entry)
    return {"user": user, "store": str(store.path), "tokens": tokens}


def age(store: JsonTokenStore, user: str, seconds: float, session: bool = False,
        now: float | None = None) -> dict:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0 \
            or seconds != seconds or seconds == float("inf"):
        raise AdminError(f"--seconds must be a positive number, not {seconds!r}")
    now = time.time() if now is None else now
    changed = store.age_user(_user(user), seconds, session, now)
    if not changed:
        raise AdminError(f"{user} has no live tokens in {store.path} (authenticate as "
                         f"{user} first)")
    return {"user": user, "aged": changed, "seconds": seconds, "session": session,
            "tokens": list_tokens(store, user, now)["tokens"]}


def revoke(store: JsonTokenStore, user: str) -> dict:
    changed = store.revoke_user(_user(user))
    if not changed and not store.records_of(user):
        raise AdminError(f"{user} has no tokens in {store.path}")
    return {"user": user, "revoked": changed}


def become_owner(directory: Path) -> tuple[int, int] | None:
    """(uid, gid) to run as so the store's files stay its owner's: the directory's owner
    when we are root and it is not; None otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        st = directory.stat()
    except OSError:
        return None
    return (st.st_uid, st.st_gid) if st.st_uid != 0 else None


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aitestbed.metis.admin",
        description="Age, revoke or list a user's Metis tokens (run on the gateway node).")
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help=f"the gateway's configuration (default {CONFIG})")
    commands = parser.add_subparsers(dest="command", required=True)
    aging = commands.add_parser("age", help="move the user's live tokens' expiry earlier")
    aging.add_argument("--user", required=True)
    aging.add_argument("--seconds", required=True, type=_seconds)
    aging.add_argument("--session", action="store_true",
                       help="age the session (7-day re-authentication) too")
    for name, text in (("revoke", "revoke the user's tokens"),
                       ("list", "the user's tokens (JSON; never a token)")):
        commands.add_parser(name, help=text).add_argument("--user", required=True)
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:
        return 0 if done.code == 0 else 2
    try:
        store = store_of(args.config)
        owner = become_owner(store.path.parent)
        if owner is not None:
            os.setgroups([])
            os.setgid(owner[1])
            os.setuid(owner[0])
        if args.command == "age":
            result = age(store, args.user, args.seconds, args.session, CLOCK())
        elif args.command == "revoke":
            result = revoke(store, args.user)
        else:
            result = list_tokens(store, args.user, CLOCK())
    except AdminError as err:
        print(f"metis admin: {err}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"metis admin: cannot use the token store: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
