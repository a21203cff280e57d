"""First come, first served: which wsjobs start, which wait and what they are told.

Pure decisions over the jobs as the API returns them, so the controller can be
killed and restarted at any point: it recomputes everything from the jobs.
Compile and execute jobs queue separately. At most `max_compile` compiles and
`max_execute` executes run at once (a 125Gi node runs one 67Gi compile beside one
execute); an execute job also needs `numWafers` free CS-2 systems. A compile runs on
the first system's host (its workers), never on the management node: users' code
stays away from the control plane (etcd, the API server; D01). Each queue is in
priority order (--job_priority p1 before p2 before p3), then first come, first served:
a job never overtakes an older one of its type and priority, so a two-system job is not
starved by one-system jobs behind it. On the CS-3 cluster max_execute is its number of
MemoryX groups (two).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from aitestbed.cerebras import wsjob

COMPILE_MEMORY = "67Gi"
MORE_INFO = "For more information, please run 'csctl get jobs'."


@dataclass(frozen=True)
class Limits:
    systems: tuple[str, ...]
    management_node: str
    max_compile: int = 1
    max_execute: int = 1
    heartbeat_timeout: float = 30.0

    @property
    def compile_node(self) -> str:
        """Where compiles run: the first system's host, beside its workers."""
        return self.systems[0]


@dataclass
class Decisions:
    schedule: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # systems, node
    fail: dict[str, str] = field(default_factory=dict)            # never startable
    cancel: dict[str, str] = field(default_factory=dict)          # queued: end now
    request_cancel: dict[str, str] = field(default_factory=dict)  # started: agent stops it
    messages: dict[str, str] = field(default_factory=dict)        # queued: new status message


def _created(job: dict) -> tuple[str, str]:
    return job["metadata"].get("creationTimestamp", ""), job["metadata"]["name"]


def _queue_order(job: dict) -> tuple[int, str, str]:
    return (wsjob.priority(job), *_created(job))


def _stale(job: dict, now: datetime.datetime, timeout: float) -> bool:
    beat = wsjob.parse_time((job["metadata"].get("annotations") or {}).get(
        wsjob.HEARTBEAT_ANNOTATION))
    return beat is not None and (now - beat).total_seconds() > timeout


def _overtime(job: dict, now: datetime.datetime) -> bool:
    limit = job["spec"].get("jobTimeSec")
    started = wsjob.parse_time((job.get("status") or {}).get("startTime"))
    return bool(limit and started and (now - started).total_seconds() > limit)


def decide(jobs: list[dict], limits: Limits, now: datetime.datetime) -> Decisions:
    out = Decisions()
    active = [j for j in jobs if wsjob.phase(j) in wsjob.ACTIVE]
    held = {s for j in active for s in (j.get("status") or {}).get("systems") or []}
    free = [s for s in limits.systems if s not in held]
    running = {kind: sum(1 for j in active if j["spec"]["jobType"] == kind)
               for kind in ("compile", "execute")}
    systems_in_use = len(held)

    for job in active:
        name, spec = job["metadata"]["name"], job["spec"]
        if spec.get("cancelRequested"):
            continue
        if _stale(job, now, limits.heartbeat_timeout):
            out.request_cancel[name] = "the client stopped sending heartbeats"
        elif _overtime(job, now):
            out.request_cancel[name] = f"job exceeded its time limit of {spec['jobTimeSec']} s"

    queued = sorted((j for j in jobs if wsjob.phase(j) == wsjob.QUEUEING), key=_queue_order)
    waiting_before = {"compile": 0, "execute": 0}
    for job in queued:
        name, spec = job["metadata"]["name"], job["spec"]
        kind = spec["jobType"]
        if spec.get("cancelRequested"):
            out.cancel[name] = spec.get("cancelReason") or "canceled by user"
            continue
        if _stale(job, now, limits.heartbeat_timeout):
            out.cancel[name] = "the client stopped sending heartbeats"
            continue
        wanted = int(spec.get("numWafers", 1)) if kind == "execute" else 0
        if wanted > len(limits.systems):
            out.fail[name] = (f"job requests {wanted} system(s) but the cluster has "
                              f"{len(limits.systems)}")
            continue
        limit = limits.max_compile if kind == "compile" else limits.max_execute
        if waiting_before[kind] == 0 and running[kind] < limit and wanted <= len(free):
            systems = free[:wanted]
            free = free[wanted:]
            running[kind] += 1
            systems_in_use += wanted
            node = systems[0] if systems else limits.compile_node
            out.schedule[name] = (systems, node)
            continue
        if waiting_before[kind]:
            status = f"{waiting_before[kind]} {kind} job(s) queued before current job."
        else:
            status = ("current job is top of queue but likely blocked by running jobs, "
                      f"{running['execute']} execute job(s) running using {systems_in_use} "
                      f"system(s), {running['compile']} compile job(s) running using "
                      f"{COMPILE_MEMORY if running['compile'] else '0Gi'} memory.")
        message = f"job is queueing. Job queue status: {status} {MORE_INFO}"
        if (job.get("status") or {}).get("message") != message:
            out.messages[name] = message
        waiting_before[kind] += 1
    return out
