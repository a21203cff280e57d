"""The device-code login (RFC 8628) as the gateway decides it: pure functions of a grant,
what happened and the time; and the verification page.

ALCF's helper logs in through Globus Auth: it shows a URL and a code, the user signs in
there (with their ALCF passcode) and the helper collects the tokens. Here:

  POST /auth/device          -> {device_code, user_code "WDJB-MJHT", verification_uri,
                                 verification_uri_complete, expires_in 600, interval 5}
  POST /auth/device/verify   the user: {user_code, username, passcode} (JSON, or the
                             form that GET /auth/device/verify serves); the passcode is
                             the one ssh asks on a login node (aitestbed.metis.otp)
  POST /auth/token           the helper, every `interval` seconds: {grant_type:
                             urn:ietf:params:oauth:grant-type:device_code, device_code}
                             -> 400 authorization_pending / slow_down / expired_token /
                             access_denied, then once the session's tokens

A grant lives `EXPIRES_IN` seconds; its tokens are issued once (then the device code is
invalid_grant); `MAX_TRIES` wrong passcodes for one user code deny it. A user code is
8 letters of RFC 8628's 20 consonants (about 34 bits), as Globus shows them.
"""

from __future__ import annotations

import html
import re
import secrets
from dataclasses import dataclass, replace

from aitestbed.metis.state import ApiError

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
EXPIRES_IN = 600
INTERVAL = 5
SLOW_DOWN = 5  # seconds added to the interval at each slow_down (RFC 8628 §3.5)
POLL_TOLERANCE = 1.0  # a poll this much early is not too early (the network's jitter)
MAX_TRIES = 5
MAX_PENDING = 10000  # grants kept at once (each is a few hundred bytes)
ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # RFC 8628 §6.1: no vowels, no look-alikes
CODE_LENGTH = 8
PENDING, APPROVED, DENIED, ISSUED = "pending", "approved", "denied", "issued"
_USER_CODE = re.compile(rf"^[{ALPHABET}]{{{CODE_LENGTH}}}$")


class OAuthError(ApiError):
    """A token endpoint's refusal as OAuth words it (RFC 6749 §5.2, RFC 8628 §3.5):
    {"error": code, "error_description": message}."""

    def body(self) -> dict:
        return {"error": self.code, "error_description": self.message}


def new_user_code() -> str:
    letters = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return f"{letters[:4]}-{letters[4:]}"


def new_device_code() -> str:
    return secrets.token_urlsafe(32)


def user_code_of(text) -> str | None:
    """The user code a person typed ("wdjb mjht", "WDJB-MJHT"), as issued; None if it
    cannot be one."""
    if not isinstance(text, str) or len(text) > 32:
        return None
    letters = re.sub(r"[\s-]", "", text).upper()
    return f"{letters[:4]}-{letters[4:]}" if _USER_CODE.match(letters) else None


@dataclass(frozen=True)
class Grant:
    user_code: str
    device_digest: str  # sha256 of the device code (the code itself is the client's)
    created: float
    expires_at: float
    interval: float = INTERVAL
    last_poll: float | None = None
    status: str = PENDING
    user: str | None = None
    tries: int = 0  # wrong passcodes so far


def new_grant(user_code: str, device_digest: str, now: float,
              lifetime: float = EXPIRES_IN, interval: float = INTERVAL) -> Grant:
    return Grant(user_code, device_digest, now, now + lifetime, interval)


def offer(grant: Grant, verification_uri: str, device_code: str, now: float) -> dict:
    """The device authorization response (RFC 8628 §3.2)."""
    return {"device_code": device_code, "user_code": grant.user_code,
            "verification_uri": verification_uri,
            "verification_uri_complete": f"{verification_uri}?user_code={grant.user_code}",
            "expires_in": max(0, int(grant.expires_at - now)),
            "interval": int(grant.interval)}


# --- the helper polls -----------------------------------------------------------------------
AGAIN = "`python inference_auth_token.py authenticate`"


def poll(grant: Grant | None, now: float) -> tuple[Grant | None, OAuthError | None]:
    """The grant after one poll of the token endpoint, and the refusal (None: issue its
    tokens now, once)."""
    if grant is None or grant.status == ISSUED:
        return grant, OAuthError(400, "The device code is not valid (unknown, or its tokens "
                                      f"were already issued): run {AGAIN} again.",
                                 "invalid_grant")
    if grant.status == DENIED:
        return grant, OAuthError(400, "The login was denied: too many wrong passcodes for "
                                      f"this code. Run {AGAIN} again.", "access_denied")
    if now >= grant.expires_at:
        return grant, OAuthError(400, "The code expired before it was entered: run "
                                      f"{AGAIN} again.", "expired_token")
    if grant.status == APPROVED:
        return replace(grant, status=ISSUED, last_poll=now), None
    if grant.last_poll is not None and now - grant.last_poll < grant.interval - POLL_TOLERANCE:
        slower = replace(grant, interval=grant.interval + SLOW_DOWN, last_poll=now)
        return slower, OAuthError(400, f"Polling too fast: wait {int(slower.interval)} s "
                                       "between requests.", "slow_down")
    return replace(grant, last_poll=now), OAuthError(
        400, f"Waiting for the code {grant.user_code} to be entered.", "authorization_pending")


# --- the user enters the code -----------------------------------------------------------------
def may_verify(grant: Grant | None, now: float) -> ApiError | None:
    """Why the user code cannot be completed (None: it can)."""
    if grant is None:
        return ApiError(400, f"That code is not valid: check it, or run {AGAIN} again for a "
                             "new one.", "invalid_user_code", "user_code")
    if grant.status == DENIED:
        return ApiError(403, "That code was denied after too many wrong passcodes: run "
                             f"{AGAIN} again for a new one.", "access_denied", "user_code")
    if grant.status in (APPROVED, ISSUED):
        return ApiError(400, "That code was already used.", "invalid_user_code", "user_code")
    if now >= grant.expires_at:
        return ApiError(400, f"That code has expired: run {AGAIN} again for a new one.",
                        "expired_user_code", "user_code")
    return None


def after_passcode(grant: Grant, user: str, verdict: str,
                   max_tries: int = MAX_TRIES) -> tuple[Grant, ApiError | None]:
    """The grant once `user` gave a passcode whose verdict is `verdict` ("ok": the
    account is active and the passcode right; "replayed"; anything else: refused)."""
    if verdict == "ok":
        return replace(grant, status=APPROVED, user=user), None
    tries = grant.tries + 1
    left = max_tries - tries
    if left <= 0:
        return replace(grant, tries=tries, status=DENIED), ApiError(
            403, "Too many wrong passcodes: that code is denied. Run "
                 f"{AGAIN} again for a new one.", "access_denied", "passcode")
    if verdict == "replayed":
        message = ("That passcode was already used: wait for the next one (each code "
                   f"works once). {left} tries left for this code.")
        return replace(grant, tries=tries), ApiError(401, message, "passcode_replayed",
                                                     "passcode")
    return replace(grant, tries=tries), ApiError(
        401, f"The username or passcode is not right. {left} tries left for this code.",
        "invalid_passcode", "passcode")


def login_refusal(name: str, uid: int | None, active: bool) -> str | None:
    """Why `name` may not log in with a passcode (None: it may): only an active testbed
    account (accounts.json), never root or a service's uid."""
    if uid is None:
        return "not a testbed account"
    if uid < 1000:  # accounts.json's uids are 1000..59999: a system's is no user's
        return "a system uid"
    if not active:
        return "no active account"
    return None


def forget_old(grants: dict[str, Grant], now: float, keep: float = EXPIRES_IN) -> None:
    """Drop grants expired more than `keep` seconds ago (until then a poll still hears
    expired_token rather than invalid_grant)."""
    for code in [c for c, g in grants.items() if now >= g.expires_at + keep]:
        del grants[code]


# --- the verification page ----------------------------------------------------------------------
_STYLE = ("body{font-family:sans-serif;max-width:34em;margin:3em auto;padding:0 1em}"
          "label{display:block;margin-top:1em}input{font-size:1.1em;padding:.3em;width:100%;"
          "box-sizing:border-box}button{margin-top:1.5em;font-size:1.1em;padding:.4em 1.2em}"
          ".error{color:#a00}.ok{color:#070}")
# The page's headers: nothing from elsewhere, never framed, never cached.
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                           "form-action 'self'; frame-ancestors 'none'",
                "X-Frame-Options": "DENY", "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def page(user_code: str = "", username: str = "", message: str = "", ok: bool = False) -> str:
    """The form (and, after a post, its outcome): every value given is escaped."""
    esc = html.escape
    note = (f"<p class=\"{'ok' if ok else 'error'}\">{esc(message)}</p>" if message else "")
    form = "" if ok else (
        "<form method=\"post\" action=\"/auth/device/verify\" autocomplete=\"off\">"
        "<label>Code shown by the helper<input name=\"user_code\" required maxlength=\"32\" "
        f"value=\"{esc(user_code, quote=True)}\" autocapitalize=\"characters\"></label>"
        "<label>Username (your ALCF testbed account)<input name=\"username\" required "
        f"maxlength=\"32\" value=\"{esc(username, quote=True)}\" autocapitalize=\"none\">"
        "</label><label>Passcode (PIN, if you have one, then the code of your token)"
        "<input name=\"passcode\" type=\"password\" required maxlength=\"64\" "
        "inputmode=\"numeric\" autocomplete=\"one-time-code\"></label>"
        "<button type=\"submit\">Log in</button></form>")
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>ALCF Inference "
            f"Service: log in</title><style>{_STYLE}</style></head><body><h1>Log in to the ALCF "
            "Inference Service</h1><p>Enter the code that <code>inference_auth_token.py "
            f"authenticate</code> shows, your username and your passcode.</p>{note}{form}"
            "</body></html>\n")
