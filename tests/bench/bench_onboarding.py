"""Onboarding figures (printed, gating nothing): `make bench`.

On a mini cluster of its own:
  - onboarding 10 users with one `onboard-user` playbook run (target <= 60 s);
  - one MFA login (`ssh` to gc-login-01, `Password:` answered with the current
    passcode, `whoami`, no shared connection): 10 users, one login each
    (a code is taken once per step), min/median/max (target <= 1 s).
`make rehearse` prints its own wall time (target <= 10 min for one user).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid

import yaml
from aitestbed.host.driver import Driver
from benchlib import cli, destroy

USERS = [f"bench{i:02d}" for i in range(1, 11)]


def one_login(driver: Driver, user: str) -> float:
    """ssh to gc-login-01 on a connection of its own, the passcode typed at Password:."""
    started = time.monotonic()
    result = driver.password_login("gc-login-01", user, driver.state.askpass_path(user))
    elapsed = time.monotonic() - started
    if result.stdout.strip() != user:
        sys.exit(f"bench: {user} could not log in: {result.stderr}")
    return elapsed


def main() -> None:
    name = f"bench-onb-{uuid.uuid4().hex[:6]}"
    people = {"accounts": [{"name": u, "uid": 22001 + i, "systems": ["graphcore"]}
                           for i, u in enumerate(USERS)]}
    try:
        cli(name, "up", "--profile", "mini")
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as out:
            yaml.safe_dump(people, out)
        onboarding = cli(name, "playbook", "onboard-user", "-e", f"user={','.join(USERS)}",
                         "-e", f"@{out.name}")
        os.unlink(out.name)
        driver = Driver(name)
        logins = [one_login(driver, user) for user in USERS]
        print(f"onboarding 10 users (one playbook run, 14 nodes): {onboarding:.1f} s "
              "(target <= 60 s)")
        print(f"one MFA login (ssh + passcode + whoami), 10 users: min "
              f"{min(logins):.2f} s, median {statistics.median(logins):.2f} s, max "
              f"{max(logins):.2f} s (target <= 1 s)")
    finally:
        destroy(name)


if __name__ == "__main__":
    main()
