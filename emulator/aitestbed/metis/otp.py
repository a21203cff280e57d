"""One-time passcodes as the login nodes check them: pam_oath's usersfiles, TOTP.

The device-code login (aitestbed.metis.device) is completed with the user's testbed
username and the passcode they type at ssh's `Password:` on a login node: the PIN first
for a CRYPTOCard token, then the 8-digit code of their MobilePASS+ (RFC 6238: HMAC-SHA-1,
30-second steps; aitestbed.host.passcode is the emulated app). The enrolments are the
ones the login nodes have, one pam_oath usersfile per user (`<user>.oath`, rendered from
roles/sshd/templates/oath-user.j2), a line of whitespace-separated fields:

    HOTP/T30/8	alice	-	3132...	(pam_oath may add: counter, last code, its time)

type (HOTP/T<step>[/<digits>]: time-based), user, PIN ("-": none) and the secret in hex.
A code is taken within `window` steps of now (pam_oath's window=1: one step either
side), and once: the last step taken is remembered per user and a code of that step or
an earlier one is refused, as pam_oath refuses a replay.

`read_enrolment`, `hotp` and `check` are pure (a file's text, a secret, the time); the
`Passcodes` class keeps the last steps taken, in memory and in a JSON file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from aitestbed.node.daemon import save_json

WINDOW = 1  # steps either side of now (pam_oath's window=1, roles/sshd: sshd_oath_window)
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")  # an account name, never a path
OK, WRONG, REPLAYED, NOT_ENROLLED = "ok", "wrong", "replayed", "not-enrolled"


@dataclass(frozen=True)
class Enrolment:
    user: str
    secret: bytes
    pin: str = ""  # typed before the code (CRYPTOCard); "" for none
    step: int = 30
    digits: int = 8


@dataclass(frozen=True)
class Check:
    """A passcode's verdict: ok, wrong, replayed or not-enrolled; the step it was of."""

    reason: str
    step: int | None = None

    @property
    def ok(self) -> bool:
        return self.reason == OK


def parse_type(kind: str) -> tuple[int, int] | None:
    """(step seconds, digits) of a time-based token type (HOTP/T30/8); None otherwise
    (counter-based HOTP, which the login nodes do not use, or nonsense)."""
    parts = kind.split("/")
    if parts[0] != "HOTP" or len(parts) not in (2, 3) or not re.fullmatch(r"T\d{1,4}",
                                                                              parts[1]):
        return None
    step = int(parts[1][1:])
    digits = int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 6
    if step < 1 or digits not in (6, 7, 8):
        return None
    return step, digits


def read_enrolment(text: str, user: str) -> Enrolment | None:
    """The user's line of a usersfile's text; None without one we can check (a PIN of
    "+", which leaves the password to another module, is none we can check)."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[0].startswith("#") or fields[1] != user:
            continue
        kind, pin, secret = parse_type(fields[0]), fields[2], fields[3]
        if kind is None or pin == "+":
            return None
        try:
            key = bytes.fromhex(secret)
        except ValueError:
            return None
        if not key:
            return None
        return Enrolment(user, key, "" if pin == "-" else pin, kind[0], kind[1])
    return None


def hotp(secret: bytes, counter: int, digits: int) -> str:
    """RFC 4226's code of `counter` (HMAC-SHA-1, dynamic truncation)."""
    mac = hmac.new(secret, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 10 ** digits:0{digits}d}"


def check(enrolment: Enrolment | None, typed: str, now: float, last_step: int | None,
          window: int = WINDOW) -> Check:
    """Whether `typed` (PIN then code) is the user's passcode now: a code within `window`
    steps of now, of a later step than the last one taken (`last_step`)."""
    if enrolment is None:
        return Check(NOT_ENROLLED)
    pin, digits = enrolment.pin, enrolment.digits
    if len(typed) != len(pin) + digits or not typed.isascii():
        return Check(WRONG)
    pin_ok = hmac.compare_digest(typed[:len(pin)].encode(), pin.encode())
    code = typed[len(pin):]
    if not code.isdigit():
        return Check(WRONG)
    current = int(now // enrolment.step)
    matched = [step for step in range(current - window, current + window + 1)
               if step >= 0 and hmac.compare_digest(hotp(enrolment.secret, step, digits), code)]
    if not (pin_ok and matched):
        return Check(WRONG)
    fresh = [step for step in matched if last_step is None or step > last_step]
    if not fresh:
        return Check(REPLAYED, max(matched))
    return Check(OK, max(fresh))


class Passcodes:
    """The users' enrolments (`directory`/<user>.oath, read at each check: an onboarding
    adds one, an offboarding takes it away) and the last step each user had taken,
    kept in `state` (JSON) when given, so a code stays used across restarts."""

    def __init__(self, directory: Path, state: Path | None = None, window: int = WINDOW):
        self.directory, self.state, self.window = Path(directory), state, window
        self._lock = threading.Lock()
        self._last: dict[str, int] | None = None

    def enrolment(self, user: str) -> Enrolment | None:
        if not USER_NAME.match(user):
            return None
        try:
            text = (self.directory / f"{user}.oath").read_text()
        except (OSError, UnicodeDecodeError):
            return None
        return read_enrolment(text, user)

    def _taken(self) -> dict[str, int]:
        if self._last is None:
            self._last = {}
            if self.state is not None:
                try:
                    data = json.loads(self.state.read_text())
                    self._last = {str(k): int(v) for k, v in data.get("last_step", {}).items()}
                except FileNotFoundError:
                    pass
                except (OSError, ValueError, AttributeError, TypeError) as err:
                    # unreadable: refuse every code until it is readable again, rather than
                    # forget which were taken (a replay)
                    self._last = None
                    raise OSError(f"cannot read the passcodes' state {self.state}: {err}") \
                        from None
        return self._last

    def verify(self, user: str, typed: str, now: float) -> Check:
        """Check `typed` for `user` now, and take its step when it is right."""
        enrolment = self.enrolment(user)
        with self._lock:
            last = self._taken()
            result = check(enrolment, typed, now, last.get(user), self.window)
            if result.ok:
                last[user] = result.step
                if self.state is not None:
                    try:
                        self.state.parent.mkdir(parents=True, exist_ok=True)
                        save_json(self.state, {"last_step": last}, sort_keys=True)
                    except OSError as err:  # still refused in memory until a restart
                        print(f"metis gateway: cannot save {self.state}: {err}",
                              file=sys.stderr, flush=True)
            return result
