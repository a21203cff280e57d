"""First contact from nothing, as a member of `docker` who is not root (printed, gating
nothing): `python tests/bench/bench_first_contact.py` as root (it makes the user).

The issue's targets (41): `make cluster-up PROFILE=mini SYSTEMS=graphcore` <= 6 min to ready
on a fresh machine as a non-root member of `docker`; the full default profile <= 10 min.

A fresh machine, as far as one engine shared with other work allows:
  - a new user (empty ~/.cache: no Debian packages, no pip cache, no wheelhouse) with a
    copy of the checkout, and no venv;
  - an image prefix of its own (AITESTBED_IMAGE_PREFIX), so no image of the machine's is
    used: the base is made from Debian's packages (no registry here, so no
    debian:bookworm-slim), then the OS layer, then the class images;
  - what cannot be made fresh: the host's disk cache and Debian's and PyPI's servers.
Phases are read off `make`'s own output. BENCH_FULL=1 also brings up the default profile
(`alcf`) after it, from the same user's base and OS layer (a second fresh figure would need
a second base: say so when quoting it). BENCH_FIRST=alcf brings up the default profile
from nothing instead of the mini one. Everything it made is removed at the end.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def as_user(user: str, command: str, env: dict[str, str]) -> tuple[float, str, int]:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    started = time.monotonic()
    run = subprocess.run(["runuser", "-l", user, "-c", f"cd ~/aitestbed && {exports} {command}"],
                         capture_output=True, text=True, check=False)
    return time.monotonic() - started, run.stdout + run.stderr, run.returncode


def phases(output: str) -> list[str]:
    """The lines that say what a long step did: the base, the OS layer, the images."""
    keep = re.compile(r"base image|downloading|OS layer|building|built|ready|wheel|kube|"
                      r"meanwhile|waiting", re.I)
    return [ln for ln in output.splitlines() if keep.search(ln) and "task" not in ln][:40]


def cluster_up(user: str, env: dict[str, str], name: str, options: str, label: str,
               target: str) -> int:
    """`make cluster-up` as the user, timed and its phases printed; then destroyed."""
    took, out, rc = as_user(user, f"make cluster-up {options} NAME={name}".replace("  ", " "),
                            env)
    print(f"{label}: {took / 60:.1f} min" + (f" ({target})" if target else "")
          + ("" if rc == 0 else " FAILED"))
    for line in phases(out):
        print(f"    {line}")
    if rc:
        print(out[-3000:])
    as_user(user, f".venv/bin/aitestbed --name {name} destroy", env)
    return rc


def main() -> None:
    if os.getuid() != 0:
        print("bench: first contact skipped: run as root (it makes a user in `docker`)")
        return
    user = f"aitbfresh{uuid.uuid4().hex[:5]}"
    prefix = f"aitbfresh-{uuid.uuid4().hex[:6]}"
    env = {"AITESTBED_IMAGE_PREFIX": prefix}
    subprocess.run(["useradd", "-m", "-G", "docker", "-s", "/bin/bash", user], check=True)
    try:
        home = Path(f"~{user}").expanduser()
        files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co",
                                "--exclude-standard"], capture_output=True, check=True).stdout
        subprocess.run(f"tar -C {shlex.quote(str(ROOT))} --null -T - -c | "
                       f"runuser -u {user} -- tar -C {home} --one-top-level=aitestbed -x",
                       shell=True, input=files, check=True)
        if os.environ.get("AITESTBED_OPENPBS_TARBALL"):
            env["AITESTBED_OPENPBS_TARBALL"] = os.environ["AITESTBED_OPENPBS_TARBALL"]
        took, out, rc = as_user(user, "make venv", env)
        print(f"make venv (fresh user, no pip cache): {took:.0f} s" + ("" if rc == 0 else
              f" FAILED\n{out[-2000:]}"))
        if os.environ.get("BENCH_FIRST") == "alcf":  # the default profile from nothing
            cluster_up(user, env, "fresh-alcf", "", "make cluster-up (the default profile, "
                       "alcf), nothing built before", "target <= 10 min")
            return
        rc = cluster_up(user, env, "fresh-mini", "PROFILE=mini SYSTEMS=graphcore",
                        "make cluster-up PROFILE=mini SYSTEMS=graphcore, nothing built "
                        "before", "target <= 6 min")
        if os.environ.get("BENCH_FULL") == "1" and rc == 0:
            cluster_up(user, env, "fresh-alcf", "", "then make cluster-up (profile alcf), its "
                       "base and OS layer made", "")
    finally:
        uid = subprocess.run(["id", "-u", user], capture_output=True, text=True,
                             check=False).stdout.strip()
        subprocess.run(["pkill", "-KILL", "-u", user], check=False)
        if uid:  # the Go builder's cache (scripts/build-kube-binaries.sh), per uid
            subprocess.run(["docker", "volume", "rm", "-f", f"aitestbed-go-cache-{uid}"],
                           capture_output=True, check=False)
        images = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                                capture_output=True, text=True, check=False).stdout.split()
        mine = [i for i in images if i.startswith(f"{prefix}/")]
        if mine:
            subprocess.run(["docker", "rmi", "-f", *mine], capture_output=True, check=False)
        subprocess.run(["userdel", "-r", user], capture_output=True, check=False)


if __name__ == "__main__":
    main()
