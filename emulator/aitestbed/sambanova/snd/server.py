"""snd, the SN Devices Service: owns a node's RDUs and tiles (HTTP/JSON on a Unix socket).

  GET    /node                   platform, RDUs, tiles per RDU
  GET    /tiles                  one row per tile: status, job, session, state shares
  GET    /jobs                   the jobs holding RDUs
  PUT    /jobs/ID                {"user", "rdus"}   (root: Slurm's prolog)
  DELETE /jobs/ID                                   (root: Slurm's epilog)
  POST   /sessions               {"tiles", "job_id"} -> {"id", "tiles"}  (the job's RDUs only)
  PUT    /sessions/ID/state      {"state": "pload" | "exec" | "idle"}
  DELETE /sessions/ID
The caller's PID and user come from the socket (SO_PEERCRED), never from the
request, so a session belongs to a process and ends with it. The state is saved
on every change: a restart of snd keeps running jobs' RDUs and tiles.

The journal (<state>/journal.jsonl, root only) keeps one JSON line per RDU
reservation and per session opened: which job held how many RDUs and which
command ran on them, after the job is gone (Slurm's accounting records how many
RDUs a job held, not which ones nor what ran on them).
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from pathlib import Path

from aitestbed.node.daemon import UnixJsonHandler, UnixJsonServer, append_journal, save_json
from aitestbed.node.processes import process_alive, process_start_ticks
from aitestbed.sambanova.snd.client import DEFAULT_SOCKET
from aitestbed.sambanova.snd.state import (
    STATES,
    ForbiddenError,
    NotFoundError,
    PlacementError,
    RduNode,
)

STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"


def process_command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


class SndServer(UnixJsonServer):
    def __init__(self, socket_path: str | Path, state_dir: str | Path, *, node: str,
                 tiles_per_rdu: int):
        self.state_file = Path(state_dir) / STATE_FILE
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.journal_file = Path(state_dir) / JOURNAL_FILE
        self.lock = threading.Lock()
        if self.state_file.is_file():
            self.rdus = RduNode.from_dict(json.loads(self.state_file.read_text()))
            self.rdus.node, self.rdus.tiles_per_rdu = node, tiles_per_rdu
        else:
            self.rdus = RduNode(node=node, tiles_per_rdu=tiles_per_rdu)
        super().__init__(socket_path, _Handler)  # mode 0666: every user's runtime asks

    def save(self) -> None:
        save_json(self.state_file, self.rdus.to_dict(), sort_keys=True)

    def journal(self, event: str, **fields) -> None:
        append_journal(self.journal_file, event, **fields)


class _Handler(UnixJsonHandler):
    server: SndServer

    def _handle(self, method: str) -> None:
        try:
            body = self.read_json() if method in ("POST", "PUT") else {}
            pid, uid, user = self.peer()
            with self.server.lock:
                self.server.rdus.reap(process_alive)
                status, reply, changed = self._route(method, self.path_parts(), body, pid, uid,
                                                     user)
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
            self.reply(404, {"error": f"no such session or job: {err}"})

    def _route(self, method: str, path: list[str], body: dict, pid: int, uid: int,
               user: str) -> tuple[int, dict | list, bool]:
        rdus = self.server.rdus
        match method, path:
            case "GET", ["node"]:
                return 200, rdus.describe(), False
            case "GET", ["tiles"]:
                return 200, rdus.tile_rows(), False
            case "GET", ["jobs"]:
                return 200, rdus.jobs, False
            case "PUT", ["jobs", job_id]:
                self._require_root(uid)
                known = job_id in rdus.jobs
                job = rdus.reserve(job_id, str(body["user"]), int(body["rdus"]))
                if not known:
                    self.server.journal("reserve", job=job_id, **job)
                return 200, job, True
            case "DELETE", ["jobs", job_id]:
                self._require_root(uid)
                rdus.release(job_id)
                return 200, {}, True
            case "POST", ["sessions"]:
                start = process_start_ticks(pid)
                session = rdus.open_session(
                    pid=pid, start_ticks=start or 0, user=user, command=process_command(pid),
                    job_id=body.get("job_id"), tiles=int(body["tiles"]), caller_is_root=uid == 0)
                self.server.journal("session", job=session.job_id, user=user,
                                    command=session.command, tiles=session.tiles)
                return 200, {"id": session.id, "tiles": session.tiles}, True
            case "PUT", ["sessions", session_id, "state"]:
                state = body["state"]
                if state not in STATES:
                    raise ValueError(f"state must be one of {', '.join(STATES)}")
                rdus.session(session_id, None if uid == 0 else pid).set_state(
                    state, time.time())
                return 200, {}, True
            case "DELETE", ["sessions", session_id]:
                rdus.close_session(session_id, None if uid == 0 else pid)
                return 200, {}, True
        return 404, {"error": f"no such resource: {method} {self.path}"}, False

    @staticmethod
    def _require_root(uid: int) -> None:
        if uid != 0:
            raise ForbiddenError("only root (Slurm's prolog and epilog) assigns RDUs to jobs")

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._handle("GET")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="snd", description="SN Devices Service")
    parser.add_argument("--socket", default=DEFAULT_SOCKET)
    parser.add_argument("--state", default="/var/lib/snd")
    parser.add_argument("--tiles-per-rdu", type=int, required=True, choices=(4, 8),
                        help="4 on a DataScale SN10-8, 8 on an SN30-8")
    parser.add_argument("--node", default=socket.gethostname().split(".")[0])
    args = parser.parse_args(argv)
    server = SndServer(args.socket, args.state, node=args.node, tiles_per_rdu=args.tiles_per_rdu)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
