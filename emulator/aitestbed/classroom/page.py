"""The instructor's page as data: a row per learner (cells per exercise, jobs, last
login, last failure), a panel per system, the errors of the cycle. The web page renders
it (web.py) and serves it as JSON; nothing here reads or decides.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

PASSED, FAILED, STARTED, NOT_STARTED = "passed", "failed", "started", "not started"
STATUSES = (PASSED, FAILED, STARTED, NOT_STARTED)


@dataclass
class Cell:
    exercise: str
    status: str  # passed, failed, started, not started
    note: str = ""  # why (the tooltip)


@dataclass
class Jobs:
    running: int = 0
    queued: int = 0


@dataclass
class Row:
    user: str
    uid: int
    load: bool
    last_login: float | None  # epoch; None: never, or before the page (see login_note)
    login_note: str  # "gc-login-01", "before the page started", "never"
    cells: list[Cell]
    jobs: dict[str, Jobs]  # system -> its running and queued jobs
    last_failure: str = ""  # the last failed job: system, job, state, reason
    passed: int = 0


@dataclass
class NodeUse:
    name: str
    state: str
    used: int
    total: int


@dataclass
class WsjobLine:
    name: str
    user: str
    job_type: str
    phase: str
    systems: list[str]
    message: str


@dataclass
class Panel:
    system: str
    unit: str  # IPU, RDU, CS-2
    nodes: list[NodeUse]
    nodes_in_use: int
    accelerators_in_use: int
    accelerators: int
    running: int
    queued: int
    wsjobs: list[WsjobLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Column:
    name: str
    title: str
    system: str
    home_only: bool
    begun: str = ""  # when the instructor began it for the room
    passed: int = 0  # learners who passed it


@dataclass
class Page:
    cluster: str
    heading: str
    taken: float
    since: float
    columns: list[Column]
    rows: list[Row]
    panels: list[Panel]
    errors: list[str]
    interval: float = 5.0

    def to_json(self) -> dict:
        return asdict(self)


def empty_page(cluster: str, interval: float, error: str = "") -> Page:
    """What the page shows before the first snapshot."""
    return Page(cluster=cluster, heading="taking the first snapshot", taken=0.0, since=0.0,
                columns=[], rows=[], panels=[], errors=[error] if error else [],
                interval=interval)


def iso(epoch: float | None) -> str:
    if not epoch:
        return ""
    return dt.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")
