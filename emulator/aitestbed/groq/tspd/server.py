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
request, and the caller's job is the PBS_JOBID in its environment, which the
daemon reads from /proc/PID/environ as root can (a process started in a PBS job
inherits it; a process of another user cannot borrow a job that is not his, as
the job's owner must be the caller). The state is saved on every change: a
restart of tspd keeps running jobs' cards and sessions.

The journal (<state>/journal.jsonl, root only) keeps one JSON line per card
reservation and per session opened: which job held which cards and what ran on
them, after the job is gone.

    python -m aitestbed.groq.tspd.server --node groq-r01-gn-01 --state-dir /var/lib/tspd
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aitestbed.groq.card import CARDS_PER_NODE
from aitestbed.groq.tspd.client import DEFAULT_SOCKET
from aitestbed.groq.tspd.state import ForbiddenError, GroqNode, NotFoundError, PlacementError
from aitestbed.node.daemon import JsonHandler, save_json
from aitestbed.node.processes import process_alive, process_start_ticks

STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"
DEFAULT_STATE_DIR = "/var/lib/tspd"


def process_command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


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


class TspdServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, socket_path: str | Path, state_dir: str | Path, *, node: str,
                 cards: int = CARDS_PER_NODE,
                 job_of: Callable[[int], str | None] = pbs_job_of):
        self.socket_path = Path(socket_path)
        self.state_file = Path(state_dir) / STATE_FILE
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.journal_file = Path(state_dir) / JOURNAL_FILE
        self.job_of = job_of
        self.lock = threading.Lock()
        if self.state_file.is_file():
            self.groq = GroqNode.from_dict(json.loads(self.state_file.read_text()))
            self.groq.node = node
        else:
            self.groq = GroqNode(node=node, cards=cards)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        super().__init__(str(self.socket_path), _Handler)
        self.socket_path.chmod(0o666)  # every user's runtime and tools ask tspd

    def save(self) -> None:
        save_json(self.state_file, self.groq.to_dict(), sort_keys=True)

    def journal(self, event: str, **fields) -> None:
        entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, **fields}
        fd = os.open(self.journal_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as journal:
            journal.write(json.dumps(entry, sort_keys=True) + "\n")

    def server_close(self) -> None:
        super().server_close()
        self.socket_path.unlink(missing_ok=True)


class _Handler(JsonHandler):
    server: TspdServer

    def address_string(self) -> str:
        return "unix"

    def _peer(self) -> tuple[int, int, str]:
        pid, uid, _ = struct.unpack("3i", self.request.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
        return pid, uid, user

    def _path(self) -> list[str]:
        return [p for p in self.path.split("?")[0].split("/") if p]

    def _handle(self, method: str) -> None:
        try:
            body = self.read_json() if method in ("POST", "PUT") else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            pid, uid, user = self._peer()
            with self.server.lock:
                self.server.groq.reap(process_alive)
                status, reply, changed = self._route(method, self._path(), body, pid, uid, user)
                if changed:
                    self.server.save()
            self.reply(status, reply)
        except (ValueError, KeyError, TypeError) as err:
            self.reply(400, {"error": f"bad request: {err}"})
        except PlacementError as err:
            self.reply(409, {"error": str(err)})
        except ForbiddenError as err:
            self.reply(403, {"error": str(err)})
        except NotFoundError as err:
            self.reply(404, {"error": f"no such session, job or card: {err}"})

    def _route(self, method: str, path: list[str], body: dict, pid: int, uid: int,
               user: str) -> tuple[int, dict | list, bool]:
        groq = self.server.groq
        root = uid == 0
        match method, path:
            case "GET", ["node"]:
                return 200, groq.describe(), False
            case "GET", ["cards"]:
                return 200, groq.card_rows(), False
            case "GET", ["visible"]:
                job_id = self.server.job_of(pid)
                cards = groq.visible(user, job_id, caller_is_root=root)
                return 200, {"job": groq.job_key(job_id) if cards else None,
                             "cards": cards}, False
            case "GET", ["jobs"]:
                return 200, groq.jobs, False
            case "PUT", ["jobs", job_id]:
                self._require_root(uid)
                known = job_id in groq.jobs
                job = groq.reserve(job_id, str(body["user"]), int(body["cards"]))
                if not known:
                    self.server.journal("reserve", job=job_id, **job)
                return 200, job, not known
            case "DELETE", ["jobs", job_id]:
                self._require_root(uid)
                groq.release(job_id)
                return 200, {}, True
            case "POST", ["sessions"]:
                session = groq.open_session(
                    pid=pid, start_ticks=process_start_ticks(pid) or 0, user=user,
                    job_id=self.server.job_of(pid), cards=int(body["cards"]),
                    command=process_command(pid), caller_is_root=root)
                self.server.journal("session", job=session.job_id, user=user,
                                    command=session.command, cards=session.cards)
                return 200, {"id": session.id, "cards": session.cards,
                             "job": session.job_id}, True
            case "DELETE", ["sessions", session_id]:
                groq.close_session(session_id, None if root else pid)
                return 200, {}, True
            case "POST", ["clear"]:
                cards = groq.clearable(user, self.server.job_of(pid), caller_is_root=root)
                return 200, groq.clear(cards), True
            case "PUT", ["cards", card, "health"]:
                self._require_root(uid, "sets a card's health")
                groq.set_health(int(card), str(body["status"]))
                return 200, {}, True
        return 404, {"error": f"no such resource: {method} {self.path}"}, False

    @staticmethod
    def _require_root(uid: int, what: str = "assigns GroqCards to jobs") -> None:
        if uid != 0:
            raise ForbiddenError(f"only root (PBS's prologue and epilogue) {what}")

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._handle("GET")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")


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
    server = TspdServer(args.socket, args.state_dir, node=args.node, cards=args.cards)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
