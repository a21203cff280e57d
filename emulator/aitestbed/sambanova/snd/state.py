"""One DataScale node's RDUs as the snd daemon owns them: jobs' RDUs and processes' tiles.

Slurm's prolog reserves RDUs for a job (its `--gres=rdu:N` on this node); the
SambaFlow runtime of each process then opens a session holding the tiles its
PEF was compiled for, taken from its job's RDUs and from nowhere else, so the
RDUs a job uses are the RDUs Slurm gave it. Data-parallel ranks share their
job's RDUs (two 4-tile ranks fill an SN30 RDU): for the guide's
`sbatch --gres=rdu:1 --tasks-per-node 8` ("all eight RDUs per node are to be
used") job_submit.lua makes the job hold one RDU per task on a node, up to 8.
A session ends when its process does; snd notices through `reap`.

Times are per state (program load, execute, idle) since the session opened,
which is what sntilestat's percentages are computed from. The error classes and
the sessions' bookkeeping (lookup, close, reap) are every node daemon's
(aitestbed.node.daemon).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field

from aitestbed.node.daemon import (
    ForbiddenError,
    JobSession,
    NodeDevices,
    NotFoundError,
    PlacementError,
)
from aitestbed.sambanova.rdu import RDUS_PER_NODE, SYSTEMS, tile_names

__all__ = ["STATES", "HEALTHY", "ForbiddenError", "NotFoundError", "PlacementError", "RduNode",
           "Session"]

STATES = ("pload", "exec", "idle")
HEALTHY = "perfect"


@dataclass
class Session(JobSession):
    tiles: list[str]
    opened: float
    state: str = "pload"
    since: float = 0.0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STATES, 0.0))

    def set_state(self, state: str, now: float) -> None:
        self.seconds[self.state] += max(0.0, now - self.since)
        self.state, self.since = state, now

    def shares(self, now: float) -> dict[str, float]:
        """Percent of the session's life in each state so far."""
        seconds = dict(self.seconds)
        seconds[self.state] += max(0.0, now - self.since)
        total = sum(seconds.values())
        if total <= 0:
            return {s: (100.0 if s == self.state else 0.0) for s in STATES}
        return {s: 100.0 * v / total for s, v in seconds.items()}


@dataclass
class RduNode(NodeDevices[Session]):
    node: str
    tiles_per_rdu: int
    jobs: dict[str, dict] = field(default_factory=dict)  # job id -> {"user", "rdus"}
    sessions: dict[str, Session] = field(default_factory=dict)
    tile_status: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=itertools.count, repr=False)

    def __post_init__(self) -> None:
        if self.tiles_per_rdu not in SYSTEMS:
            raise ValueError(f"no DataScale system has {self.tiles_per_rdu} tiles per RDU")

    # --- what the node is ---------------------------------------------------------------
    @property
    def platform(self) -> str:
        return SYSTEMS[self.tiles_per_rdu].name

    def rdu_tiles(self, rdu: int) -> list[str]:
        return tile_names(rdu, self.tiles_per_rdu)

    def all_tiles(self) -> list[str]:
        return [t for rdu in range(RDUS_PER_NODE) for t in self.rdu_tiles(rdu)]

    def describe(self) -> dict:
        return {"node": self.node, "platform": self.platform, "rdus": RDUS_PER_NODE,
                "tiles_per_rdu": self.tiles_per_rdu}

    # --- jobs (Slurm's prolog and epilog) -----------------------------------------------
    def reserved_rdus(self) -> set[int]:
        return {r for job in self.jobs.values() for r in job["rdus"]}

    def reserve(self, job_id: str, user: str, count: int) -> dict:
        """Give the job `count` RDUs no other job holds, preferring ones no process uses."""
        if job_id in self.jobs:
            return self.jobs[job_id]
        if not 0 <= count <= RDUS_PER_NODE:
            raise PlacementError(f"a node has {RDUS_PER_NODE} RDUs, job {job_id} asks for {count}")
        busy = self._busy_tiles()
        free = [r for r in range(RDUS_PER_NODE) if r not in self.reserved_rdus()]
        free.sort(key=lambda r: (any(t in busy for t in self.rdu_tiles(r)), r))
        if count > len(free):
            raise PlacementError(f"job {job_id} needs {count} RDUs, {len(free)} are free")
        self.jobs[job_id] = {"user": user, "rdus": sorted(free[:count])}
        return self.jobs[job_id]

    def release(self, job_id: str) -> None:
        """The job is over: its RDUs and its processes' tiles are free again."""
        self.jobs.pop(job_id, None)
        for sid in [s.id for s in self.sessions.values() if s.job_id == job_id]:
            del self.sessions[sid]

    # --- sessions (the runtime of each process) -----------------------------------------
    def _busy_tiles(self) -> dict[str, Session]:
        return {t: s for s in self.sessions.values() for t in s.tiles}

    def _fit(self, rdus: list[int], needed: int, busy: dict[str, Session]) -> list[str] | None:
        """Tiles for a PEF of `needed` tiles: an aligned block inside one RDU, or whole RDUs."""
        per_rdu = self.tiles_per_rdu
        if needed <= per_rdu:
            block = 1 << (needed - 1).bit_length()  # 1, 2, 4, 8 tiles: power-of-two blocks
            for rdu in rdus:
                tiles = self.rdu_tiles(rdu)
                for start in range(0, per_rdu, block):
                    chosen = tiles[start:start + needed]
                    block_free = not any(t in busy for t in tiles[start:start + block])
                    if len(chosen) == needed and block_free:
                        return chosen
            return None
        whole = [r for r in rdus if not any(t in busy for t in self.rdu_tiles(r))]
        count = -(-needed // per_rdu)
        if len(whole) < count:
            return None
        return [t for r in whole[:count] for t in self.rdu_tiles(r)][:needed]

    def open_session(self, *, pid: int, start_ticks: int, user: str, command: str,
                     job_id: str | None, tiles: int, now: float | None = None,
                     caller_is_root: bool = False) -> Session:
        if tiles < 1:
            raise PlacementError(f"a PEF needs at least one tile, not {tiles}")
        job = self.job_for_session(
            job_id, job_id, user, caller_is_root, device="RDU",
            unallocated=f"no RDU is allocated to this process: the PEF needs {tiles} tiles; "
                        "run it with srun or sbatch (--gres=rdu:N for more than one RDU)")
        per_rdu = self.tiles_per_rdu
        held = len(job["rdus"]) * per_rdu
        if tiles > held:
            raise PlacementError(
                f"the PEF needs {tiles} tiles but job {job_id} holds {held} "
                f"({len(job['rdus'])} RDU(s) of {per_rdu} tiles on {self.platform}): "
                f"ask for --gres=rdu:{-(-tiles // per_rdu)}")
        busy = self._busy_tiles()
        chosen = self._fit(job["rdus"], tiles, busy)
        if chosen is None:
            users = sorted({f"{s.pid} ({s.user})" for t, s in busy.items()
                            if self._rdu_of(t) in job["rdus"]})
            # What the job's processes would need together, this one included.
            together = tiles + sum(len(s.tiles) for s in self.sessions.values()
                                   if s.job_id == job_id)
            rdus = -(-together // per_rdu)
            hint = (f": its processes need {together} tiles together, ask for "
                    f"--gres=rdu:{rdus}" if len(job["rdus"]) < rdus <= RDUS_PER_NODE else "")
            raise PlacementError(
                f"the PEF needs {tiles} tiles and the RDUs of job {job_id} have no "
                f"{tiles} free tiles together; in use by PID {', '.join(users) or '-'}{hint}")
        now = time.time() if now is None else now
        session = Session(id=self.new_session_id(pid), pid=pid, start_ticks=start_ticks,
                          user=user, command=command, job_id=job_id, tiles=chosen,
                          opened=now, since=now)
        self.sessions[session.id] = session
        return session

    # --- what sntilestat and snconfig show ----------------------------------------------
    @staticmethod
    def _rdu_of(tile: str) -> int:
        _, xrdu, rdu, _ = tile.split("/")
        return int(xrdu.split("_")[1]) * 2 + int(rdu.split("_")[1])

    def tile_rows(self, now: float | None = None) -> list[dict]:
        now = time.time() if now is None else now
        busy = self._busy_tiles()
        owner = {r: job_id for job_id, job in self.jobs.items() for r in job["rdus"]}
        rows = []
        for tile in self.all_tiles():
            session = busy.get(tile)
            shares = session.shares(now) if session else {"idle": 100.0, "exec": 0.0, "pload": 0.0}
            rows.append({
                "tile": tile, "status": self.tile_status.get(tile, HEALTHY),
                "job": owner.get(self._rdu_of(tile)),
                "idle": shares["idle"], "exec": shares["exec"], "pload": shares["pload"],
                "aload": 0.0, "chkpt": 0.0, "quiesce": 0.0,
                "pid": session.pid if session else None,
                "user": session.user if session else None,
                "command": session.command if session else None,
            })
        return rows

    # --- persistence (a restart of snd keeps jobs and live sessions) --------------------
    def to_dict(self) -> dict:
        return {"node": self.node, "tiles_per_rdu": self.tiles_per_rdu, "jobs": self.jobs,
                "sessions": [asdict(s) for s in self.sessions.values()],
                "tile_status": self.tile_status}

    @classmethod
    def from_dict(cls, data: dict) -> RduNode:
        node = cls(node=data["node"], tiles_per_rdu=int(data["tiles_per_rdu"]),
                   jobs=dict(data.get("jobs", {})), tile_status=dict(data.get("tile_status", {})))
        node.restore_sessions(Session(**raw) for raw in data.get("sessions", []))
        return node
