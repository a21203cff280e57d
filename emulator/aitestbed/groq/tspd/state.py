"""One GroqNode's eight GroqCards as the tspd daemon owns them: jobs' cards, processes' sessions.

PBS's prologue reserves cards for a job (its groq_accelerator on this node, or all
eight for `-l select=1,place=excl`); the GroqFlow runtime of each process then
opens a session that locks the GroqChips its model was compiled for, taken from
its job's unlocked cards and from nowhere else, so the cards a job uses are the
cards PBS gave it. A session ends when its process does (tspd notices through
`reap`); the epilogue releases the job's cards and clears their memory.

"Locked" is what `tsp-ctl status` shows: a card some process holds open. A card
that held a program keeps it in memory until `tsp-ctl clear` or the job's end.

The error classes and the sessions' bookkeeping (lookup, close, reap) are every
node daemon's (aitestbed.node.daemon).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from aitestbed.groq.card import CARDS_PER_NODE, HEALTHY, describe
from aitestbed.node.daemon import (
    ForbiddenError,
    JobSession,
    NodeDevices,
    NotFoundError,
    PlacementError,
)

__all__ = ["EXCL_HINT", "ForbiddenError", "GroqNode", "NotFoundError", "PlacementError",
           "Session"]

EXCL_HINT = "-l select=1,place=excl gives a job all eight GroqChips of a node"


@dataclass
class Session(JobSession):
    cards: list[int]
    opened: float


@dataclass
class GroqNode(NodeDevices[Session]):
    node: str
    cards: int = CARDS_PER_NODE
    jobs: dict[str, dict] = field(default_factory=dict)  # job id -> {"user", "cards"}
    sessions: dict[str, Session] = field(default_factory=dict)
    memory: dict[int, str] = field(default_factory=dict)  # card -> the program left on it
    health: dict[int, str] = field(default_factory=dict)  # card -> status when not "Up"
    _ids: itertools.count = field(default_factory=itertools.count, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.cards <= CARDS_PER_NODE:
            raise ValueError(f"a GroqNode has 1 to {CARDS_PER_NODE} cards, not {self.cards}")

    def describe(self) -> dict:
        return {"node": self.node, "cards": self.cards}

    # --- jobs (PBS's prologue and epilogue) ---------------------------------------------
    def job_key(self, job_id: str | None) -> str | None:
        """The job as tspd knows it: PBS_JOBID "12.server" or its sequence number "12"."""
        if not job_id:
            return None
        if job_id in self.jobs:
            return job_id
        seq = job_id.split(".")[0]
        matches = [j for j in self.jobs if j.split(".")[0] == seq]
        return matches[0] if len(matches) == 1 else None

    def reserved(self) -> set[int]:
        return {c for job in self.jobs.values() for c in job["cards"]}

    def reserve(self, job_id: str, user: str, cards: int) -> dict:
        """Give the job the `cards` lowest cards no other job holds; a retry gets the same."""
        if job_id in self.jobs:
            return self.jobs[job_id]
        if not 0 <= cards <= self.cards:
            raise PlacementError(
                f"a GroqNode has {self.cards} GroqCards, job {job_id} asks for {cards}")
        taken = self.reserved()
        free = [c for c in range(self.cards) if c not in taken]
        if cards > len(free):
            raise PlacementError(
                f"job {job_id} needs {cards} GroqCards on {self.node}, {len(free)} are free")
        self.jobs[job_id] = {"user": user, "cards": free[:cards]}
        return self.jobs[job_id]

    def release(self, job_id: str) -> None:
        """The job is over: its sessions end, its cards are free and their memory cleared."""
        job = self.jobs.pop(job_id, None)
        for sid in [s.id for s in self.sessions.values() if s.job_id == job_id]:
            del self.sessions[sid]
        for card in job["cards"] if job else []:
            self.memory.pop(card, None)

    def visible(self, user: str, job_id: str | None, caller_is_root: bool = False) -> list[int]:
        """The cards a process of `user` in PBS job `job_id` may use: that job's, if it is his."""
        key = self.job_key(job_id)
        if key is None:
            return []
        job = self.jobs[key]
        return list(job["cards"]) if job["user"] == user or caller_is_root else []

    # --- sessions (the runtime of each process) -----------------------------------------
    def locked(self) -> dict[int, Session]:
        return {c: s for s in self.sessions.values() for c in s.cards}

    def open_session(self, *, pid: int, start_ticks: int, user: str, job_id: str | None,
                     cards: int, command: str, now: float | None = None,
                     caller_is_root: bool = False) -> Session:
        if cards < 1:
            raise PlacementError(f"a model needs at least one GroqChip, not {cards}")
        key = self.job_key(job_id)
        job = self.job_for_session(
            job_id, key, user, caller_is_root, device="GroqCard",
            unallocated=f"no GroqChip is allocated to this process: the model needs {cards}; "
                        f"run it in a PBS job on a GroqNode ({EXCL_HINT})")
        held = len(job["cards"])
        if cards > held:
            ask = (f"ask for -l select=1:groq_accelerator={cards} or -l select=1,place=excl "
                   f"(all eight)" if cards <= self.cards else
                   f"a GroqNode has {self.cards}: more needs a multi-node topology")
            raise PlacementError(
                f"the model needs {cards} GroqChips but job {key} holds {held} on "
                f"{self.node}: {ask}")
        locked = self.locked()
        free = [c for c in job["cards"] if c not in locked]
        if cards > len(free):
            users = sorted({f"{s.pid} ({s.user})" for c, s in locked.items()
                            if c in job["cards"]})
            raise PlacementError(
                f"the model needs {cards} GroqChips and job {key} has {len(free)} unlocked of "
                f"its {held}; the others are locked by PID {', '.join(users)}")
        now = time.time() if now is None else now
        session = Session(id=self.new_session_id(pid), pid=pid, start_ticks=start_ticks,
                          user=user, command=command, job_id=key, cards=free[:cards],
                          opened=now)
        self.sessions[session.id] = session
        for card in session.cards:
            self.memory[card] = command
        return session

    # --- tsp-ctl ------------------------------------------------------------------------
    def clearable(self, user: str, job_id: str | None, caller_is_root: bool = False) -> list[int]:
        """What `tsp-ctl clear` may reset: root every card; a user his job's cards, or,
        outside a job, the cards no job holds (clearing a free card harms nobody)."""
        if caller_is_root:
            return list(range(self.cards))
        if self.job_key(job_id) is not None:
            return self.visible(user, job_id)
        taken = self.reserved()
        return [c for c in range(self.cards) if c not in taken]

    def clear(self, cards: Iterable[int]) -> dict:
        """Reset the given cards' memory; a locked card (in use) is left alone."""
        locked = self.locked()
        chosen = sorted(set(cards))
        cleared = [c for c in chosen if c not in locked]
        for card in cleared:
            self.memory.pop(card, None)
        return {"cleared": cleared, "locked": [c for c in chosen if c in locked]}

    def set_health(self, card: int, status: str) -> None:
        if not 0 <= card < self.cards:
            raise NotFoundError(f"card {card}")
        if status == HEALTHY:
            self.health.pop(card, None)
        else:
            self.health[card] = status

    def card_rows(self) -> list[dict]:
        """One row per card of the node, whoever holds it: what tsp-ctl prints."""
        locked = self.locked()
        owner = {c: (job_id, job["user"]) for job_id, job in self.jobs.items()
                 for c in job["cards"]}
        rows = []
        for card in range(self.cards):
            session = locked.get(card)
            job_id, user = owner.get(card, (None, None))
            rows.append({
                **describe(card), "locked": session is not None, "job": job_id, "user": user,
                "pid": session.pid if session else None,
                "command": session.command if session else None,
                "memory": "loaded" if card in self.memory else "clear",
                "health": self.health.get(card, HEALTHY),
            })
        return rows

    # --- persistence (a restart of tspd keeps jobs and live sessions) -------------------
    def to_dict(self) -> dict:
        return {"node": self.node, "cards": self.cards, "jobs": self.jobs,
                "sessions": [asdict(s) for s in self.sessions.values()],
                "memory": {str(c): p for c, p in self.memory.items()},
                "health": {str(c): h for c, h in self.health.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> GroqNode:
        node = cls(node=data["node"], cards=int(data.get("cards", CARDS_PER_NODE)),
                   jobs=dict(data.get("jobs", {})),
                   memory={int(c): p for c, p in data.get("memory", {}).items()},
                   health={int(c): h for c, h in data.get("health", {}).items()})
        node.restore_sessions(Session(**raw) for raw in data.get("sessions", []))
        return node
