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
import subprocess
import sys
import tempfile
import time
import uuid

import yaml
from aitestbed.host.state import ClusterState

CLI = [sys.executable, "-m", "aitestbed.cli"]
USERS = [f"bench{i:02d}" for i in range(1, 11)]


def cli(name: str, *args: str) -> float:
    started = time.monotonic()
    result = subprocess.run([*CLI, "--name", name, *args], capture_output=True, text=True,
                            check=False)
    if result.returncode:
        sys.exit(f"bench: aitestbed {' '.join(args)} failed:\n{result.stdout[-2000:]}"
                 f"{result.stderr}")
    return time.monotonic() - started


def one_login(state: ClusterState, user: str) -> float:
    env = {**os.environ, "SSH_ASKPASS": str(state.askpass_path(user)),
           "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
    started = time.monotonic()
    result = subprocess.run(["ssh", "-F", str(state.ssh_config_path), "-o", "ControlPath=none",
                             "-l", user, "gc-login-01", "whoami"], capture_output=True,
                            text=True, env=env, stdin=subprocess.DEVNULL, check=False)
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
        state = ClusterState(name)
        logins = [one_login(state, user) for user in USERS]
        print(f"onboarding 10 users (one playbook run, 14 nodes): {onboarding:.1f} s "
              "(target <= 60 s)")
        print(f"one MFA login (ssh + passcode + whoami), 10 users: min "
              f"{min(logins):.2f} s, median {statistics.median(logins):.2f} s, max "
              f"{max(logins):.2f} s (target <= 1 s)")
    finally:
        subprocess.run([*CLI, "--name", name, "destroy"], capture_output=True, check=False)


if __name__ == "__main__":
    main()
