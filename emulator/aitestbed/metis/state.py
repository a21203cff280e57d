"""What the gateway decides, as pure functions of what it knows and the time.

- `ApiError`: a refusal with its HTTP status and the body the service answers, the
  OpenAI error shape ({"error": {"message", "type", "param", "code"}}), whose "code"
  and "message" also match the ALCF gateway's own errors (resource_server_async).
- `authenticate`: the bearer token -> the user, or 401/403 as the ALCF gateway words it.
- `token_user`, `may_refresh`: who gets a session (a uid munged vouched for that is an
  active testbed account) and whether a refresh token still gives access tokens.
- `admit`: a user's request against the per-user rate (requests a minute) and the
  concurrent requests: allowed, or 429 with Retry-After.
- `model_phase`: the docs' states of a model (Live, Starting, Queued, Offline) from when
  a cold start began and whether its weights are in memory.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from aitestbed.metis.tokens import TokenRecord

LIVE, STARTING, QUEUED, OFFLINE = "Live", "Starting", "Queued", "Offline"
STATES = (LIVE, STARTING, QUEUED, OFFLINE)
WINDOW_SECONDS = 60.0

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 408: "timeout_error",
          411: "invalid_request_error", 413: "invalid_request_error",
          415: "invalid_request_error", 429: "rate_limit_error", 502: "upstream_error",
          503: "service_unavailable", 504: "upstream_error"}


class ApiError(Exception):
    """A request the gateway refuses: status, one-line message, OpenAI `code`/`param`
    (`allow`: a 405's allowed methods)."""

    def __init__(self, status: int, message: str, code: str | None = None,
                 param: str | None = None, retry_after: int | None = None,
                 allow: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.retry_after, self.allow = retry_after, allow

    def body(self) -> dict:
        return {"error": {"message": self.message,
                          "type": _TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code}}


# --- who calls ------------------------------------------------------------------------------
MISSING = "Missing ('Authorization': 'Bearer <your-access-token>') in request headers."
NOT_BEARER = "Authorization type should be Bearer."
MALFORMED = "Auth only allows header type Authorization: Bearer <token>."
INACTIVE = "Token is either not active or invalid"
EXPIRED = ("Access token expired. Run `python inference_auth_token.py get_access_token` "
           "to refresh it.")


def authenticate(header: str | None, lookup: Callable[[str], TokenRecord | None],
                 user_active: Callable[[str], bool], now: float) -> str:
    """The user a request's Authorization header proves, or ApiError 401/403."""
    if not header or not header.strip():
        raise ApiError(401, MISSING, "unauthorized")
    parts = header.strip().split(" ")
    if parts[0].lower() != "bearer":
        raise ApiError(401, NOT_BEARER, "unauthorized")
    if len(parts) != 2 or not parts[1] or not parts[1].isprintable() or len(parts[1]) > 4096:
        raise ApiError(401, MALFORMED, "unauthorized")
    record = lookup(parts[1])
    if record is None or record.revoked:
        raise ApiError(401, INACTIVE, "unauthorized")
    if now >= record.expires_at:
        raise ApiError(401, EXPIRED, "unauthorized")
    if not user_active(record.user):
        raise ApiError(403, f"Permission denied: {record.user} may not use the ALCF "
                            "inference service (no active account).", "access_denied")
    return record.user


REAUTHENTICATE = ("Your session has ended: re-authentication is required every 7 days. Run "
                  "`python inference_auth_token.py authenticate --force`.")


def token_user(uid: int, name_of: Callable[[int], str | None],
               user_active: Callable[[str], bool]) -> str:
    """The testbed account a proved uid is, or ApiError 403: tokens go to the testbed's
    active accounts only (not root, not a service's uid, not an offboarded user)."""
    name = name_of(uid)
    if name is None:
        raise ApiError(403, f"uid {uid} is not a testbed account: the ALCF inference service "
                            "issues tokens to the testbed's users only.", "access_denied")
    if not user_active(name):
        raise ApiError(403, f"Permission denied: {name} may not use the ALCF inference service "
                            "(no active account).", "access_denied")
    return name


def may_refresh(record: TokenRecord | None, user_active: Callable[[str], bool],
                now: float) -> str:
    """The user of a refresh token that still gives access tokens, or ApiError 401/403."""
    if record is None or record.revoked:
        raise ApiError(401, "The refresh token is not valid: run `python "
                            "inference_auth_token.py authenticate --force`.", "invalid_grant")
    ends = record.session_ends if record.session_ends is not None else record.expires_at
    if now >= ends:
        raise ApiError(401, REAUTHENTICATE, "invalid_grant")
    if not user_active(record.user):
        raise ApiError(403, f"Permission denied: {record.user} may not use the ALCF inference "
                            "service (no active account).", "access_denied")
    return record.user


# --- how much each user asks ----------------------------------------------------------------
@dataclass
class Usage:
    """One user's requests: when the recent ones began, and how many run now."""

    started: deque = field(default_factory=deque)
    active: int = 0

    def begin(self, now: float) -> None:
        self.started.append(now)
        self.active += 1

    def end(self) -> None:
        self.active = max(0, self.active - 1)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    error: ApiError | None = None


def admit(usage: Usage, requests_per_minute: int, concurrent: int, now: float) -> Decision:
    """Whether one more request of this user may start now (pure: `usage` is not changed;
    the caller calls usage.begin on an allowed request)."""
    recent = [t for t in usage.started if now - t < WINDOW_SECONDS]
    if len(recent) >= requests_per_minute:
        wait = math.ceil(recent[-requests_per_minute] + WINDOW_SECONDS - now)
        return Decision(False, ApiError(
            429, f"Rate limit exceeded: {requests_per_minute} requests per minute per user.",
            "too_many_requests", retry_after=max(1, wait)))
    if usage.active >= concurrent:
        return Decision(False, ApiError(
            429, f"Too many concurrent requests: at most {concurrent} per user at a time.",
            "too_many_requests", retry_after=1))
    return Decision(True)


def forget_old(usage: Usage, now: float) -> None:
    while usage.started and now - usage.started[0] >= WINDOW_SECONDS:
        usage.started.popleft()


# --- a model's state ----------------------------------------------------------------------------
def model_phase(hot: bool, asked_at: float | None, loaded: bool, now: float,
                queued_s: float, starting_s: float) -> str:
    """Live, Starting, Queued or Offline: a hot model is Live once loaded; a cold one is
    Offline until first asked (`asked_at`), then Queued for `queued_s`, then Starting
    until `starting_s` more have passed and its weights are loaded (wall seconds: the
    timing's device seconds times the time scale)."""
    if hot and loaded and asked_at is None:
        return LIVE
    if asked_at is None:
        return OFFLINE if not hot else STARTING
    elapsed = now - asked_at
    if elapsed < queued_s:
        return QUEUED
    if elapsed < queued_s + starting_s or not loaded:
        return STARTING
    return LIVE


def retry_after_cold(asked_at: float | None, now: float, queued_s: float,
                     starting_s: float) -> int:
    """Seconds until a cold model should be Live (at least 1)."""
    if asked_at is None:
        return max(1, math.ceil(queued_s + starting_s))
    return max(1, math.ceil(asked_at + queued_s + starting_s - now))
