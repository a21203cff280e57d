"""The emulated MobilePASS+ app: the current 8-digit code of a user's token.

Tokens are TOTP (RFC 6238: 30 s steps, 8 digits, SHA-1), the same codes
`oathtool --totp -d 8` gives and pam_oath on the login nodes checks.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING

import pyotp

from aitestbed.host.errors import AitestbedError

if TYPE_CHECKING:
    from aitestbed.host.state import ClusterState

STEP = 30
DIGITS = 8


def _totp(token: dict) -> pyotp.TOTP:
    secret = base64.b32encode(bytes.fromhex(token["secret"])).decode()
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP)


def code(token: dict, at: float | None = None) -> str:
    """The code the token shows at time `at` (now by default)."""
    return _totp(token).at(int(time.time() if at is None else at))


def typed(token: dict, at: float | None = None) -> str:
    """What the user types at `Password:`: the PIN first for CRYPTOCard tokens."""
    return token.get("pin", "") + code(token, at)


def seconds_left(at: float | None = None) -> int:
    now = time.time() if at is None else at
    return STEP - int(now) % STEP


def token_of(state: ClusterState, user: str) -> dict:
    """The user's token on this cluster; an unknown or offboarded user is one clear error."""
    registry = state.registry()
    record = registry.users.get(user)
    if record is None:
        raise AitestbedError(f"unknown user {user!r}: cluster {state.name!r} has "
                             f"{', '.join(sorted(registry.users)) or 'no accounts'}")
    if not record["active"]:
        raise AitestbedError(f"user {user} was offboarded: the token no longer exists")
    return registry.token(user)
