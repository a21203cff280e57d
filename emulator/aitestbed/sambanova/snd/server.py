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

The daemon's skeleton (socket, state file, journal, lock, reap, save, errors to
statuses) is every node daemon's: aitestbed.node.daemon. This module holds the routes.
"""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

from aitestbed.node.daemon import NodeDevicesHandler, Peer, Route, UnixJsonDaemon
from aitestbed.node.processes import process_command, process_start_ticks
from aitestbed.sambanova.snd.client import DEFAULT_SOCKET
from aitestbed.sambanova.snd.state import STATES, RduNode

PROLOG_ONLY = "only root (Slurm's prolog and epilog) assigns RDUs to jobs"


class SndServer(UnixJsonDaemon[RduNode]):
    def __init__(self, socket_path: str | Path, state_dir: str | Path, *, node: str,
                 tiles_per_rdu: int):
        def model_from(saved: dict | None) -> RduNode:
            if saved is None:
                return RduNode(node=node, tiles_per_rdu=tiles_per_rdu)
            rdus = RduNode.from_dict(saved)
            rdus.node, rdus.tiles_per_rdu = node, tiles_per_rdu
            return rdus

        super().__init__(socket_path, state_dir, _Handler, model_from)

    @property
    def rdus(self) -> RduNode:
        return self.model


class _Handler(NodeDevicesHandler):
    server: SndServer
    not_found = "no such session or job"
    prologue_only = PROLOG_ONLY
    reserve_count = "rdus"

    def room_route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        rdus = self.server.rdus
        pid, _, user = peer
        match method, path:
            case "GET", ["tiles"]:
                return 200, rdus.tile_rows(), False
            case "POST", ["sessions"]:
                start = process_start_ticks(pid)
                session = rdus.open_session(
                    pid=pid, start_ticks=start or 0, user=user, command=process_command(pid),
                    job_id=body.get("job_id"), tiles=int(body["tiles"]), caller_is_root=peer.root)
                self.server.journal("session", job=session.job_id, user=user,
                                    command=session.command, tiles=session.tiles)
                return 200, {"id": session.id, "tiles": session.tiles}, True
            case "PUT", ["sessions", session_id, "state"]:
                state = body["state"]
                if state not in STATES:
                    raise ValueError(f"state must be one of {', '.join(STATES)}")
                rdus.session(session_id, None if peer.root else pid).set_state(
                    state, time.time())
                return 200, {}, True
        return self.no_route(method)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="snd", description="SN Devices Service")
    parser.add_argument("--socket", default=DEFAULT_SOCKET)
    parser.add_argument("--state", default="/var/lib/snd")
    parser.add_argument("--tiles-per-rdu", type=int, required=True, choices=(4, 8),
                        help="4 on a DataScale SN10-8, 8 on an SN30-8")
    parser.add_argument("--node", default=socket.gethostname().split(".")[0])
    args = parser.parse_args(argv)
    SndServer(args.socket, args.state, node=args.node, tiles_per_rdu=args.tiles_per_rdu).serve()


if __name__ == "__main__":
    main()
