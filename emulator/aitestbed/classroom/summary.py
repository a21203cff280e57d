"""The instructor's page from one cycle's Raw, pure: a row per learner (then per load
user) with the exercises' cells, their jobs, last login and last failure; a panel per
system.

sshd's log (`sshd -E`) has no timestamps: a login's time is when a cycle first saw its
line (within one interval), or the start of its still-open session (`ps`); logins
already in the log when the page started are "before" its first snapshot.
"""

from __future__ import annotations

from aitestbed.cerebras import wsjob as wsjobs_
from aitestbed.classroom.collect import Raw
from aitestbed.classroom.judge import (
    FAILED_STATES,
    HOME_ONLY,
    PBS_QUEUED,
    PBS_RUNNING,
    QUEUED_STATES,
    WSJOB_ACTIVE,
    Evidence,
    Index,
    cell,
    failure,
    wsjob_failure,
)
from aitestbed.classroom.page import PASSED, Column, Jobs, Page, Row
from aitestbed.classroom.panels import panels
from aitestbed.classroom.roster import Load, Room
from aitestbed.exercises import checks
from aitestbed.exercises.catalog import Exercise


def _last_login(ev_user: str, raw: Raw) -> tuple[float | None, str]:
    login_nodes = set(raw.layout.login_nodes)
    best: tuple[float, str] | None = None
    before = False
    for node, lines in raw.logins.items():
        if node not in login_nodes:
            continue
        stamps = raw.login_seen.get(node, [])
        for i, (_, user) in enumerate(lines):
            if user != ev_user:
                continue
            when = stamps[i] if i < len(stamps) else None
            if when is None:
                before = True
            elif best is None or when > best[0]:
                best = (when, node)
    for node, sessions in raw.sessions.items():
        for user, started in sessions:
            if user == ev_user and (best is None or started > best[0]):
                best = (started, node)
    if best is not None:
        return best[0], best[1]
    return None, ("before the page started" if before else "never")


def _user_jobs(ev: Evidence, raw: Raw) -> dict[str, Jobs]:
    jobs = {s: Jobs() for s in raw.layout.systems}
    for system, queued in ev.queue.items():
        counts = jobs.setdefault(system, Jobs())
        for job in queued:
            if job.state in QUEUED_STATES:
                counts.queued += 1
            else:
                counts.running += 1
    for job in ev.pbs_jobs:
        counts = jobs.setdefault("groq", Jobs())
        if job.get("job_state") in PBS_QUEUED:
            counts.queued += 1
        elif job.get("job_state") in PBS_RUNNING:
            counts.running += 1
    if ev.wsjobs:
        counts = jobs.setdefault("cerebras", Jobs())
        for job in ev.wsjobs:
            phase = checks.phase(job)
            if phase == wsjobs_.QUEUEING:
                counts.queued += 1
            elif phase in WSJOB_ACTIVE:
                counts.running += 1
    return jobs


def _last_failure(ev: Evidence) -> str:
    found: list[tuple[str, str]] = []
    for system, jobs in ev.finished.items():
        for job in jobs:
            if job.state in FAILED_STATES:
                found.append((job.end, f"{system}: {failure(job)}"))
    for job in ev.wsjobs:
        if checks.phase(job) == wsjobs_.FAILED:
            status = job.get("status") or {}
            when = str(status.get("completionTime") or job["metadata"].get(
                "creationTimestamp") or "").rstrip("Z")
            found.append((when, f"cerebras: {wsjob_failure(job)}"))
    return max(found)[1] if found else ""


def summarize(raw: Raw, room: Room, load: Load | None, records: dict[str, dict],
              exercises: list[Exercise], interval: float = 5.0) -> Page:
    """The page: a row per learner (then per load user), a panel per system."""
    index = Index(raw)
    nodes = raw.layout.nodes
    columns = [Column(e.name, e.title, e.system, e.name in HOME_ONLY,
                      str((room.exercises or {}).get(e.name, ""))) for e in exercises]
    rows = []
    load_users = dict(load.users) if load else {}
    people = [(name, uid, False) for name, uid in room.learners.items()]
    people += [(name, uid, True) for name, uid in load_users.items()
               if name not in room.learners]
    for user, uid, is_load in people:
        ev = index.of(user, int(uid))
        when, note = _last_login(user, raw)
        cells = [] if is_load else [cell(e, ev, records.get(user) or {}, nodes, index.journal)
                                    for e in exercises]
        row = Row(user=user, uid=int(uid), load=is_load, last_login=when, login_note=note,
                  cells=cells, jobs=_user_jobs(ev, raw), last_failure=_last_failure(ev),
                  passed=sum(1 for c in cells if c.status == PASSED))
        rows.append(row)
    for i, column in enumerate(columns):
        column.passed = sum(1 for r in rows if r.cells and r.cells[i].status == PASSED)
    heading = (f"project {room.project}: {len(room.learners)} learner(s)" if room.project
               else "no classroom on this cluster: the practice user")
    if load_users:
        heading += f", {len(load_users)} load user(s) ({load.level})"
    return Page(cluster=raw.cluster, heading=heading, taken=raw.taken, since=raw.since,
                columns=columns, rows=rows, panels=panels(raw), errors=list(raw.errors),
                interval=interval)
