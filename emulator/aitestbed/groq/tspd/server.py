"""tspd: the root daemon that owns a GroqNode's eight GroqCards (HTTP/JSON on a Unix socket).

  GET    /node                   node name, number of cards
  GET    /cards                  every card: locked, job, user, session PID, memory, health
  GET    /visible                {"job", "cards"}: the caller's PBS job's cards ([] outside one)
  GET    /jobs                   the jobs holding cards
  PUT    /jobs/ID                {"user", "cards"}   (root: PBS's prologue)
  DELETE /jobs/ID                                    (root: PBS's epilogue)
  POST   /sessions               {"cards": n} -> {"id", "cards", "job"}  (the job's cards only)
  DELETE /sessions/ID                                (the caller's own; root any)
  POST   /clear                  {} -> {"cleared", "locked"}   (tsp-ctl clear)
  PUT    /cards/N/health         {"status"}          (root: fault injection; "Up" heals)
The caller's PID and user come from the socket (SO_PEERCRED), never from the
request. The caller's job is the PBS job whose session the process belongs to: PBS
starts each job in a session of its own and records its id (`session_id`), and
/proc/PID/stat says a process's session to anyone. (A process's environment is no
proof: its PBS_JOBID can be set by hand, and a root daemon without CAP_SYS_PTRACE,
as in a container, cannot read another user's /proc/PID/environ anyway. It is read
only for a process in no job's session, e.g. root's own tools and the unit tests.)
The job's owner must be the caller. The state is saved on every change: a
restart of tspd keeps running jobs' cards and sessions.

The journal (<state>/journal.jsonl, root only) keeps one JSON line per card
reservation and per session opened: which job held which cards and what ran on
them, after the job is gone.

The daemon's skeleton (socket, state file, journal, lock, reap, save, errors to
statuses) is every node daemon's: aitestbed.node.daemon. This module holds the
routes and how a process's PBS job is found.

    python -m aitestbed.groq.tspd.server --node groq-r01-gn-01 --state-dir /var/lib/tspd
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aitestbed.groq.card import CARDS_PER_NODE
from aitestbed.groq.tspd.client import DEFAULT_SOCKET
from aitestbed.groq.tspd.state import GroqNode
from aitestbed.node.daemon import NodeDevicesHandler, Peer, Route, UnixJsonDaemon
from aitestbed.node.processes import process_command, process_start_ticks

DEFAULT_STATE_DIR = "/var/lib/tspd"
PROLOGUE_ONLY = "only root (PBS's prologue and epilogue) assigns GroqCards to jobs"
HEALTH_ROOT_ONLY = "only root (PBS's prologue and epilogue) sets a card's health"


def pbs_job_of(pid: int) -> str | None:
    """The PBS_JOBID in a process's environment (as it was started), None if it has none."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        if entry.startswith(b"PBS_JOBID="):
            return entry[len(b"PBS_JOBID="):].decode(errors="replace") or None
    return None


PRINTJOB = "/opt/pbs/bin/printjob"
MOM_JOBS = Path("/var/spool/pbs/mom_priv/jobs")


def session_of(pid: int) -> int | None:
    """The session id of a process (/proc/PID/stat, readable by anyone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[3])  # state ppid pgrp session
    except (OSError, ValueError, IndexError):
        return None


def mom_sessions(node: str, jobs: Path = MOM_JOBS, printjob: str = PRINTJOB) -> dict[int, str]:
    """session id -> job id of the PBS jobs this node's mom runs: the mom records each job's
    session in its job file (`printjob <id>.JB` says `sid: N`) as it starts the job, before
    the server hears of it."""
    found = {}
    for path in sorted(jobs.glob("*.JB")):
        try:
            done = subprocess.run([printjob, str(path)], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        match = re.search(r"^\s*sid:\s+(\d+)", done.stdout, re.M)
        if match and int(match.group(1)) > 0:
            found[int(match.group(1))] = path.name[:-len(".JB")]
    return found


class PbsJobOf:
    """The PBS job a process belongs to: the job whose session it is in (the mom's job
    files, read again when a session is not known, at most ten times a second); for a
    process in no job's session, the PBS_JOBID of its environment if tspd can read it."""

    def __init__(self, node: str, sessions: Callable[[str], dict[int, str]] = mom_sessions):
        self.node = node
        self._sessions = sessions
        self._known: dict[int, str] = {}
        self._asked = 0.0
        self._lock = threading.Lock()

    def __call__(self, pid: int) -> str | None:
        session = session_of(pid)
        if session is not None:
            # A job's first process may ask before the mom has written the job file: wait
            # for it (2 s at most) when the session's leader is a child of pbs_mom.
            deadline = time.monotonic() + (2.0 if started_by_mom(session) else 0.0)
            while True:
                job = self._lookup(session)
                if job or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
            if job:
                return job
        return pbs_job_of(pid)

    def _lookup(self, session: int) -> str | None:
        with self._lock:
            now = time.monotonic()
            if (session not in self._known or now - self._asked > 5.0) \
                    and now - self._asked > 0.1:
                self._known, self._asked = self._sessions(self.node), now
            return self._known.get(session)


def started_by_mom(session: int) -> bool:
    """Whether the session's leader is a child of pbs_mom (a job's shell)."""
    try:
        stat = Path(f"/proc/{session}/stat").read_text()
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        return Path(f"/proc/{parent}/comm").read_text().strip() == "pbs_mom"
    except (OSError, ValueError, IndexError):
        return False


class TspdServer(UnixJsonDaemon[GroqNode]):
    def __init__(self, socket_path: str | Path, state_dir: str | Path, *, node: str,
                 cards: int = CARDS_PER_NODE,
                 job_of: Callable[[int], str | None] = pbs_job_of):
        self.job_of = job_of

        def model_from(saved: dict | None) -> GroqNode:
            if saved is None:
                return GroqNode(node=node, cards=cards)
            groq = GroqNode.from_dict(saved)
            groq.node = node
            return groq

        super().__init__(socket_path, state_dir, _Handler, model_from)

    @property
    def groq(self) -> GroqNode:
        return self.model


class _Handler(NodeDevicesHandler):
    server: TspdServer
    not_found = "no such session, job or card"
    prologue_only = PROLOGUE_ONLY
    reserve_count = "cards"

    def room_route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        groq = self.server.groq
        pid, _, user = peer
        root = peer.root
        match method, path:
            case "GET", ["cards"]:
                return 200, groq.card_rows(), False
            case "GET", ["visible"]:
                job_id = self.server.job_of(pid)
                cards = groq.visible(user, job_id, caller_is_root=root)
                return 200, {"job": groq.job_key(job_id) if cards else None,
                             "cards": cards}, False
            case "POST", ["sessions"]:
                session = groq.open_session(
                    pid=pid, start_ticks=process_start_ticks(pid) or 0, user=user,
                    job_id=self.server.job_of(pid), cards=int(body["cards"]),
                    command=process_command(pid), caller_is_root=root)
                self.server.journal("session", job=session.job_id, user=user,
                                    command=session.command, cards=session.cards)
                return 200, {"id": session.id, "cards": session.cards,
                             "job": session.job_id}, True
            case "POST", ["clear"]:
                cards = groq.clearable(user, self.server.job_of(pid), caller_is_root=root)
                return 200, groq.clear(cards), True
            case "PUT", ["cards", card, "health"]:
                self.require_root(peer, HEALTH_ROOT_ONLY)
                groq.set_health(int(card), str(body["status"]))
                return 200, {}, True
        return self.no_route(method)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tspd", description="GroqCard service of a GroqNode")
    parser.add_argument("--node", default=socket.gethostname().split(".")[0],
                        help="this node's name (default: the short hostname)")
    parser.add_argument("--state-dir", default=DEFAULT_STATE_DIR,
                        help=f"where the cards' state is kept (default: {DEFAULT_STATE_DIR})")
    parser.add_argument("--socket", default=DEFAULT_SOCKET,
                        help=f"the Unix socket to answer on (default: {DEFAULT_SOCKET})")
    parser.add_argument("--cards", type=int, default=CARDS_PER_NODE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    TspdServer(args.socket, args.state_dir, node=args.node, cards=args.cards,
               job_of=PbsJobOf(args.node)).serve()


if __name__ == "__main__":
    main()
