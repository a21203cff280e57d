"""inference_auth_token.py for the emulated ALCF Inference Service (aitestbed's own).

The docs fetch ALCF's helper and run it with the user's Python; this one has the same
commands, so the docs' lines run as written (copy it from /software/metis/):

    python inference_auth_token.py authenticate [--force]
    python inference_auth_token.py get_access_token
    python inference_auth_token.py get_time_until_token_expiration [--units seconds]

and, as ALCF's, `from inference_auth_token import get_access_token` gives the token.

ALCF's helper logs in through Globus: it shows a URL and a code, and the user signs in
there. This one logs in two ways, both over TLS to the gateway's emulated Globus Auth:
  - on a login node (where the Metis MUNGE domain's socket is): a MUNGE credential of
    the calling process (`munge -n`), which the gateway's munged vouches for
    (aitestbed.metis.identity): nothing to type;
  - elsewhere (the host), or with `authenticate --device`: a device-code login (RFC
    8628). The helper prints "Please go to <URL> and enter the code WDJB-MJHT"; the user
    enters the code there with their testbed username and passcode (the one ssh asks:
    PIN, if any, then the token's code). At a terminal the helper asks for both itself
    (an empty username: enter them at the URL instead); otherwise it waits, polling
    every few seconds, until the code is entered or expires (10 minutes).
Either way the gateway issues a session to that testbed account: a refresh token for 7
days and an access token of 48 hours. `get_access_token` refreshes the access token when
it has expired (or will within a minute) or the gateway says it is no longer active
(POST /auth/introspect); after 7 days `authenticate --force` is needed, as the docs say.
The tokens are kept in ~/.globus/app/aitestbed-metis/inference_app/tokens.json (the
user's only, mode 0600).

Settings (environment): AITESTBED_METIS_URL (default https://inference-api.alcf.anl.gov),
AITESTBED_METIS_CA (a CA file; default: the system's, where the nodes install the
cluster's CA), AITESTBED_METIS_TOKENS (the tokens file), AITESTBED_METIS_MUNGE_SOCKET
(absent socket: the device-code login).

Standard library only and no aitestbed import: a user copies this one file and runs it
with any Python 3.
"""

from __future__ import annotations

import argparse
import getpass
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
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
AGAIN = "run `python inference_auth_token.py authenticate` again"


class AuthError(Exception):
    """What went wrong, in one line for the user; `code`: the service's error code."""

    def __init__(self, message: str, code: str | None = None, status: int = 0):
        super().__init__(message)
        self.code, self.status = code, status


def _settings(env=None) -> dict:
    env = os.environ if env is None else env
    return {"url": env.get("AITESTBED_METIS_URL", URL).rstrip("/"),
            "ca": env.get("AITESTBED_METIS_CA") or None,
            "tokens": Path(env.get("AITESTBED_METIS_TOKENS") or TOKENS).expanduser(),
            "socket": env.get("AITESTBED_METIS_MUNGE_SOCKET", MUNGE_SOCKET)}


def _post(settings: dict, body: dict, headers: dict | None = None,
          path: str = "/auth/token") -> dict:
    context = ssl.create_default_context(cafile=settings["ca"])
    request = urllib.request.Request(
        settings["url"] + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as err:
        message, code = f"HTTP {err.code}", None
        try:
            error = json.loads(err.read())
            if isinstance(error.get("error"), dict):  # the service's own errors
                message, code = error["error"]["message"], error["error"].get("code")
            else:  # OAuth's (RFC 6749 5.2): {"error": code, "error_description": ...}
                code = str(error["error"])
                message = str(error.get("error_description") or code)
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        raise AuthError(message, code, err.code) from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise AuthError(f"the certificate of {settings['url']} is not trusted here "
                            f"({reason.verify_message}): install the cluster's CA or set "
                            "AITESTBED_METIS_CA") from None
        raise AuthError(f"cannot reach {settings['url']}: {reason}") from None
    except (OSError, ValueError) as err:
        raise AuthError(f"cannot reach {settings['url']}: {err}") from None
    if not isinstance(answer, dict):
        raise AuthError(f"{settings['url']}{path} answered something that is not a JSON object")
    return answer


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


class Terminal:
    """Whom the device-code login talks to: the person at this terminal (the tests give
    another). `interactive`: whether to ask for the username and passcode here."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty()

    def say(self, line: str) -> None:
        print(line, flush=True)

    def ask(self, prompt: str) -> str:
        return input(prompt)

    def secret(self, prompt: str) -> str:
        return getpass.getpass(prompt)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def clock(self) -> float:
        return time.time()


def _enter_passcode(settings: dict, user_code: str, terminal: Terminal) -> bool:
    """Ask for the username and passcode here and complete the code with them; False
    when the user leaves it to the URL (an empty username)."""
    while True:
        try:
            username = terminal.ask("Username: ").strip()
            if not username:
                return False
            passcode = terminal.secret("Passcode: ").strip()
        except EOFError:
            return False
        try:
            _post(settings, {"user_code": user_code, "username": username,
                             "passcode": passcode}, path="/auth/device/verify")
            return True
        except AuthError as err:
            if err.code not in ("invalid_passcode", "passcode_replayed", "invalid_request"):
                raise
            terminal.say(str(err))


def device_login(settings: dict, terminal: Terminal) -> dict:
    """The device-code login (RFC 8628): the session's tokens, or AuthError."""
    offer = _post(settings, {"client_id": "inference_auth_token.py"}, path="/auth/device")
    try:
        device_code, user_code = str(offer["device_code"]), str(offer["user_code"])
        uri, lifetime = str(offer["verification_uri"]), float(offer["expires_in"])
        interval = max(1.0, float(offer.get("interval", 5)))
    except (KeyError, TypeError, ValueError):
        raise AuthError(f"{settings['url']}/auth/device did not answer with a device code") \
            from None
    terminal.say(f"Please go to {uri} and enter the code {user_code}")
    complete = offer.get("verification_uri_complete")
    expiry = f"the code expires in {int(lifetime // 60)} minutes."
    terminal.say(f"(or open {complete}); {expiry}" if complete else expiry.capitalize())
    deadline = terminal.clock() + lifetime
    entered = terminal.interactive and _enter_passcode(settings, user_code, terminal)
    if not entered:
        terminal.say("Waiting for the code to be entered...")
    while True:
        if not entered:
            terminal.sleep(interval)
        try:
            return _post(settings, {"grant_type": DEVICE_GRANT, "device_code": device_code})
        except AuthError as err:
            if err.code == "slow_down":
                interval += 5
            elif err.code != "authorization_pending":
                raise  # expired_token, access_denied, invalid_grant: the service's words
        entered = False
        if terminal.clock() > deadline + 2 * interval:  # the service should have said so
            raise AuthError(f"the code expired before it was entered: {AGAIN}")


def _munge_present(socket: str) -> bool:
    """Whether this node is in the Metis MUNGE domain ("": munge's default socket)."""
    return not socket or os.path.exists(socket)


def authenticate(force: bool = False, env=None, now: float | None = None,
                 device: bool = False, terminal: Terminal | None = None) -> str:
    """Start a session (unless one is still open and not `force`); a line to print.
    MUNGE where the Metis domain's socket is, else (or with `device`) a device-code
    login."""
    settings = _settings(env)
    now = time.time() if now is None else now
    tokens = _load(settings["tokens"])
    if tokens and not force and tokens.get("session_ends_at_seconds", 0) > now:
        return (f"Already authenticated as {tokens.get('user')}; the session ends in "
                f"{(tokens['session_ends_at_seconds'] - now) / 86400:.1f} days "
                "(`authenticate --force` starts a new one).")
    if device or not _munge_present(settings["socket"]):
        answer = device_login(settings, terminal or Terminal())
    else:
        answer = _post(settings, {"grant_type": "munge"},
                       {"Authorization": f"MUNGE {_credential(settings['socket'])}"})
    if not isinstance(answer.get("access_token"), str) or "user" not in answer:
        raise AuthError(f"{settings['url']}/auth/token answered without tokens")
    _save(settings["tokens"], answer)
    return f"Authenticated as {answer['user']}; tokens stored in {settings['tokens']}"


def _introspect(settings: dict, token: str) -> dict | None:
    """What the gateway says of the access token now; None when it cannot say (it is
    not reached, or is older): the stored expiry stands."""
    try:
        info = _post(settings, {"token": token}, path="/auth/introspect")
    except AuthError:
        return None
    exp = info.get("exp", 0)
    if not isinstance(info.get("active"), bool) or isinstance(exp, bool) \
            or not isinstance(exp, int | float):
        return None
    return info


def get_access_token(env=None, now: float | None = None) -> str:
    """A valid access token, refreshed first when it has expired or is about to, or the
    gateway says it no longer is (aged or revoked there)."""
    settings = _settings(env)
    now = time.time() if now is None else now
    tokens = _load(settings["tokens"])
    if tokens is None:
        raise AuthError("no tokens: run `python inference_auth_token.py authenticate` first")
    if tokens.get("expires_at_seconds", 0) - REFRESH_MARGIN > now:
        info = _introspect(settings, tokens["access_token"])
        if info is None:
            return tokens["access_token"]
        if info["active"] and info.get("exp", 0) - REFRESH_MARGIN > now:
            if info.get("exp") != tokens.get("expires_at_seconds"):
                tokens["expires_at_seconds"] = info["exp"]
                _save(settings["tokens"], tokens)
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
    settings = _settings(env)
    tokens = _load(settings["tokens"])
    if tokens is None:
        raise AuthError("no tokens: run `python inference_auth_token.py authenticate` first")
    now = time.time() if now is None else now
    expires = tokens.get("expires_at_seconds", 0)
    if expires > now:  # the gateway's word, where it has one (an aged or revoked token)
        info = _introspect(settings, tokens["access_token"])
        if info is not None:
            expires = info["exp"] if "exp" in info else min(expires, now)
    return (expires - now) / UNITS[units]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inference_auth_token.py",
        description="Access tokens for the ALCF Inference Service (emulated by aitestbed).")
    commands = parser.add_subparsers(dest="command", required=True)
    auth = commands.add_parser("authenticate", help="start a session (7 days)")
    auth.add_argument("--force", action="store_true", help="start a new one even if a "
                      "session is open")
    auth.add_argument("--device", action="store_true", help="log in with a code and your "
                      "passcode (the default where this node has no Metis MUNGE socket)")
    commands.add_parser("get_access_token", help="print a valid access token")
    expiry = commands.add_parser("get_time_until_token_expiration",
                                 help="print the time until the access token expires")
    expiry.add_argument("--units", choices=sorted(UNITS), default="seconds")
    args = parser.parse_args(argv)
    try:
        if args.command == "authenticate":
            print(authenticate(args.force, device=args.device))
        elif args.command == "get_access_token":
            print(get_access_token())
        else:
            left = get_time_until_token_expiration(args.units)
            print(int(left) if args.units == "seconds" else round(left, 2))
    except AuthError as err:
        print(f"inference_auth_token.py: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninference_auth_token.py: interrupted", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
