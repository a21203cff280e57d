"""inference_auth_token.py for the emulated ALCF Inference Service (aitestbed's own).

The docs fetch ALCF's helper and run it with the user's Python; this one has the same
commands, so the docs' lines run as written (copy it from /software/metis/):

    python inference_auth_token.py authenticate [--force]
    python inference_auth_token.py get_access_token
    python inference_auth_token.py get_time_until_token_expiration [--units seconds]

and, as ALCF's, `from inference_auth_token import get_access_token` gives the token.

ALCF's helper logs in through Globus in a browser. Here the login is the cluster's own
proof of who runs the command: a MUNGE credential of the calling process (`munge -n`
in the Metis MUNGE domain of the login nodes), sent over TLS to the gateway's
POST /auth/token, which asks its munged who made it and issues a session to that
testbed account (aitestbed.metis.identity): a refresh token for 7 days and an access
token of 48 hours. `get_access_token` refreshes the access token when it has expired
(or will within a minute); after 7 days `authenticate --force` is needed, as the docs
say. The tokens are kept in ~/.globus/app/aitestbed-metis/inference_app/tokens.json
(the user's only, mode 0600).

Settings (environment): AITESTBED_METIS_URL (default https://inference-api.alcf.anl.gov),
AITESTBED_METIS_CA (a CA file; default: the system's, where the nodes install the
cluster's CA), AITESTBED_METIS_TOKENS (the tokens file), AITESTBED_METIS_MUNGE_SOCKET.

Standard library only and no aitestbed import: a user copies this one file and runs it
with any Python 3.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

URL = "https://inference-api.alcf.anl.gov"
MUNGE_SOCKET = "/run/munge-metis/munge.socket.2"
TOKENS = Path("~/.globus/app/aitestbed-metis/inference_app/tokens.json")
REFRESH_MARGIN = 60  # seconds: an access token this close to its end is refreshed first
UNITS = {"seconds": 1, "minutes": 60, "hours": 3600}
TIMEOUT = 30


class AuthError(Exception):
    """What went wrong, in one line for the user."""


def _settings(env=None) -> dict:
    env = os.environ if env is None else env
    return {"url": env.get("AITESTBED_METIS_URL", URL).rstrip("/"),
            "ca": env.get("AITESTBED_METIS_CA") or None,
            "tokens": Path(env.get("AITESTBED_METIS_TOKENS") or TOKENS).expanduser(),
            "socket": env.get("AITESTBED_METIS_MUNGE_SOCKET", MUNGE_SOCKET)}


def _post(settings: dict, body: dict, headers: dict | None = None) -> dict:
    context = ssl.create_default_context(cafile=settings["ca"])
    request = urllib.request.Request(
        settings["url"] + "/auth/token", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {err.code}"
        raise AuthError(message) from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise AuthError(f"the certificate of {settings['url']} is not trusted here "
                            f"({reason.verify_message}): install the cluster's CA or set "
                            "AITESTBED_METIS_CA") from None
        raise AuthError(f"cannot reach {settings['url']}: {reason}") from None
    except (OSError, ValueError) as err:
        raise AuthError(f"cannot reach {settings['url']}: {err}") from None


def _credential(socket: str) -> str:
    argv = ["munge", "-n"] + ([f"--socket={socket}"] if socket else [])
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except FileNotFoundError:
        raise AuthError("munge is not installed here: authenticate on a login node of the "
                        "cluster") from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise AuthError(f"munge could not be run: {err}") from None
    if result.returncode:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise AuthError(f"munge: {last.removeprefix('munge: ').removeprefix('Error: ')} "
                        "(authenticate on a login node of the cluster)")
    return result.stdout.strip()


def _load(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise AuthError(f"cannot read {path}: {err}: run `authenticate --force`") from None
    return data if isinstance(data, dict) and data.get("access_token") else None


def _save(path: Path, tokens: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        json.dump(tokens, out, indent=2)
    tmp.replace(path)


def authenticate(force: bool = False, env=None, now: float | None = None) -> str:
    """Start a session (unless one is still open and not `force`); a line to print."""
    settings = _settings(env)
    now = time.time() if now is None else now
    tokens = _load(settings["tokens"])
    if tokens and not force and tokens.get("session_ends_at_seconds", 0) > now:
        return (f"Already authenticated as {tokens.get('user')}; the session ends in "
                f"{(tokens['session_ends_at_seconds'] - now) / 86400:.1f} days "
                "(`authenticate --force` starts a new one).")
    answer = _post(settings, {"grant_type": "munge"},
                   {"Authorization": f"MUNGE {_credential(settings['socket'])}"})
    _save(settings["tokens"], answer)
    return f"Authenticated as {answer['user']}; tokens stored in {settings['tokens']}"


def get_access_token(env=None, now: float | None = None) -> str:
    """A valid access token, refreshed first when it has expired or is about to."""
    settings = _settings(env)
    now = time.time() if now is None else now
    tokens = _load(settings["tokens"])
    if tokens is None:
        raise AuthError("no tokens: run `python inference_auth_token.py authenticate` first")
    if tokens.get("expires_at_seconds", 0) - REFRESH_MARGIN > now:
        return tokens["access_token"]
    if not tokens.get("refresh_token"):
        raise AuthError("the access token has expired and there is no refresh token: run "
                        "`python inference_auth_token.py authenticate --force`")
    answer = _post(settings, {"grant_type": "refresh_token",
                              "refresh_token": tokens["refresh_token"]})
    tokens.update({k: answer[k] for k in ("access_token", "expires_in", "expires_at_seconds",
                                           "session_ends_at_seconds") if k in answer})
    _save(settings["tokens"], tokens)
    return tokens["access_token"]


def get_time_until_token_expiration(units: str = "seconds", env=None,
                                    now: float | None = None) -> float:
    """Time until the stored access token expires (negative: it has)."""
    if units not in UNITS:
        raise AuthError(f"--units must be one of {', '.join(UNITS)}, not {units!r}")
    tokens = _load(_settings(env)["tokens"])
    if tokens is None:
        raise AuthError("no tokens: run `python inference_auth_token.py authenticate` first")
    now = time.time() if now is None else now
    return (tokens.get("expires_at_seconds", 0) - now) / UNITS[units]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inference_auth_token.py",
        description="Access tokens for the ALCF Inference Service (emulated by aitestbed).")
    commands = parser.add_subparsers(dest="command", required=True)
    auth = commands.add_parser("authenticate", help="start a session (7 days)")
    auth.add_argument("--force", action="store_true", help="start a new one even if a "
                      "session is open")
    commands.add_parser("get_access_token", help="print a valid access token")
    expiry = commands.add_parser("get_time_until_token_expiration",
                                 help="print the time until the access token expires")
    expiry.add_argument("--units", choices=sorted(UNITS), default="seconds")
    args = parser.parse_args(argv)
    try:
        if args.command == "authenticate":
            print(authenticate(args.force))
        elif args.command == "get_access_token":
            print(get_access_token())
        else:
            left = get_time_until_token_expiration(args.units)
            print(int(left) if args.units == "seconds" else round(left, 2))
    except AuthError as err:
        print(f"inference_auth_token.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
