"""A job's workload under a shepherd of root's (D02): the worker runs as the job's user,
and when it ends, or the agent stops the job, nothing it started lives on.

The shepherd is the subreaper of everything below it (PR_SET_CHILD_SUBREAPER): a
`setsid` daemon or a double fork is reparented to it, not to init. When the worker exits
it kills every process left below it, until none is; SIGTERM (the agent's stop) goes to
the worker first. It runs as root, so the workload cannot kill it or ptrace it.

Usage: python -m aitestbed.cerebras.shepherd UID GID GROUPS -- ARGV...
       (GROUPS: comma-separated supplementary group ids, or -)
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
# The agent's stop sends SIGTERM, then SIGKILL a second later (agent.KILL_GRACE_SECONDS):
# the worker gets half of that, and the shepherd is done before the SIGKILL.
GRACE_SECONDS = 0.5


def children(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes whose parent is `pid` (its orphans' too, once reparented)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_everything_below(me: int, deadline_s: float = 30.0) -> None:
    """SIGKILL every process below the shepherd until none is left (each killed parent's
    children come up to it, and are killed on the next round)."""
    deadline = time.monotonic() + deadline_s
    while True:
        left = children(me)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        reap()
        if time.monotonic() > deadline:
            return


def parse(argv: list[str]) -> tuple[int, int, list[int], list[str]]:
    if len(argv) < 5 or argv[3] != "--":
        raise ValueError("usage: python -m aitestbed.cerebras.shepherd UID GID GROUPS -- "
                         "ARGV...")
    groups = [] if argv[2] == "-" else [int(g) for g in argv[2].split(",") if g]
    return int(argv[0]), int(argv[1]), groups, argv[4:]


def main(argv: list[str] | None = None) -> int:
    try:
        uid, gid, groups, command = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    me = os.getpid()
    options = {}
    if (uid, gid) != (os.getuid(), os.getgid()):
        options.update(user=uid, group=gid, extra_groups=groups)
    worker = subprocess.Popen(command, **options)

    def stop(signum, frame):  # the agent stops the job: the worker first, then the rest
        try:
            worker.send_signal(signal.SIGTERM)
            worker.wait(GRACE_SECONDS)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        kill_everything_below(me)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    code = worker.wait()
    kill_everything_below(me)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
