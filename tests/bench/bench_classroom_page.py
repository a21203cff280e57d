"""The instructor's page figures (printed, gating nothing): `make bench`.

  - a snapshot of 100 learners (and 10 load users) decided from a synthetic reading of
    the cluster: each learner logged in, ran MNIST and LeNet jobs (some failed, some
    running or queued), compiled and trained on the CS-2, listed and cancelled; min,
    median and max of `summarize`;
  - the page of those 100 learners rendered through Flask (GET /, and /api/room.json):
    min, median and max (target: the page renders 100 learners in <= 1 s);
  - with BENCH_CLUSTER=NAME, one real snapshot of that running cluster (collect: one root
    command per node), min, median and max of a few.
"""

from __future__ import annotations

import json
import os
import statistics
import time

from aitestbed.classroom import snapshot
from aitestbed.classroom.roster import Load, Room
from aitestbed.classroom.snapshot import Layout, Raw, Watcher, collect, summarize
from aitestbed.classroom.web import make_app
from aitestbed.exercises import catalog
from aitestbed.exercises.checks import Nodes, SlurmJob

LEARNERS = int(os.environ.get("BENCH_LEARNERS", "100"))
LOAD_USERS = 10
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "30"))
NODES = Nodes(
    login={"cerebras": ["cer-login-01"], "graphcore": ["gc-login-01"],
           "sambanova": ["sambanova"]},
    hop={"graphcore": ["gc-poplar-02"], "sambanova": ["sm-01", "sm-02", "sn30-r1-h1"]},
    controllers={"graphcore": ["gc-slurmctld"],
                 "sambanova": ["sn10-slurmctld", "sn30-slurmctld"]},
    management=["cer-mgmt-01"],
    mfa=frozenset({"cer-login-01", "gc-login-01", "sambanova"}))
LAYOUT = Layout(nodes=NODES, systems=("cerebras", "graphcore", "sambanova"),
                journals=("sm-01", "sm-02", "sn30-r1-h1"), wafers=("cer-cs2-01", "cer-cs2-02"))
MNIST = "graphcore/examples/tutorials/simple_applications/pytorch/mnist"
LENET = "apps/starters/lenet"


def job(job_id: int, user: str, uid: int, name: str, state: str, workdir: str, node: str,
        system: str, minute: int, exit_code: str = "0:0") -> SlurmJob:
    return SlurmJob({
        "JobId": str(job_id), "UserId": f"{user}({uid})", "GroupId": f"{user}({uid})",
        "Name": name, "JobState": state, "Partition": "p64", "TimeLimit": "UNLIMITED",
        "StartTime": f"2026-11-27T02:{minute:02d}:00",
        "EndTime": f"2026-11-27T02:{minute:02d}:30", "NodeList": node, "NodeCnt": "1",
        "WorkDir": workdir, "ExitCode": exit_code, "DerivedExitCode": exit_code,
        "System": system})


def queued(job_id: int, user: str, uid: int, name: str, state: str, workdir: str,
           system: str) -> SlurmJob:
    return SlurmJob({"JobId": str(job_id), "UserName": user, "Uid": str(uid),
                     "UserId": f"{user}({uid})", "JobState": state,
                     "Reason": "None" if state == "RUNNING" else "Resources",
                     "Partition": "p64", "TresPerNode": "gres:ipu:1", "NodeList": "",
                     "Name": name, "WorkDir": workdir, "System": system})


def wsjob(name: str, user: str, job_type: str, phase: str, minute: int, **spec) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": f"2026-11-27T02:{minute:02d}:00Z"},
            "spec": {"user": {"username": user}, "jobType": job_type, **spec},
            "status": {"phase": phase, "systems": ["cer-cs2-01"] if job_type == "execute"
                       and phase == "RUNNING" else [], "message": f"{job_type} job {phase}"}}


def synthetic() -> tuple[Raw, Room, Load, dict]:
    learners = {f"learner{i:03d}": 20001 + i for i in range(LEARNERS)}
    load = Load(level="heavy", users={f"load{i:02d}": 21000 + i for i in range(LOAD_USERS)},
                started="")
    raw = Raw("bench", LAYOUT, taken=time.time(), since=time.time() - 600)
    logins: dict[str, list[tuple[str, str]]] = {n: [] for n in
                                                 ("cer-login-01", "gc-login-01", "sambanova",
                                                  "gc-poplar-02")}
    gc, sn, queue_gc, journal, wsjobs, audit = [], [], [], [], [], []
    next_id = 1
    for i, (user, uid) in enumerate(learners.items()):
        home = f"/home/{user}"
        for node in ("cer-login-01", "gc-login-01", "sambanova"):
            logins[node].append(("keyboard-interactive/pam", user))
        logins["gc-poplar-02"].append(("publickey", user))
        for name, state, code in (("python", "FAILED", "1:0"), ("python", "COMPLETED", "0:0"),
                                  ("submit-mnist-poptorch-job.sh",
                                   "COMPLETED" if i % 3 else "FAILED", "0:0")):
            gc.append(job(next_id, user, uid, name, state, f"{home}/{MNIST}", "gc-poplar-02",
                          "graphcore", i % 60, code))
            next_id += 1
        if i % 4 == 0:
            queue_gc.append(queued(next_id, user, uid, "python", "RUNNING", f"{home}/{MNIST}",
                                   "graphcore"))
            queue_gc.append(queued(next_id + 1, user, uid, "wrap", "PENDING", home, "graphcore"))
            next_id += 2
        for step in ("run", "test"):
            sn.append(job(next_id, user, uid, "python", "COMPLETED", f"{home}/{LENET}",
                          "sn30-r1-h1", "sambanova", i % 60))
            journal += [{"event": "reserve", "job": str(next_id), "user": user, "rdus": [0]},
                        {"event": "session", "job": str(next_id), "user": user,
                         "command": f"python lenet.py {step} --pef=pef/lenet/lenet.pef"}]
            next_id += 1
        sn.append(job(next_id, user, uid, "submit-lenet-job.sh", "COMPLETED", f"{home}/{LENET}",
                      "sn30-r1-h1", "sambanova", i % 60))
        journal.append({"event": "reserve", "job": str(next_id), "user": user,
                        "rdus": [0, 1] if i % 2 else [0]})
        next_id += 1
        wsjobs += [wsjob(f"wsjob-{i}c", user, "compile", "SUCCEEDED", i % 60),
                   wsjob(f"wsjob-{i}e", user, "execute",
                         "SUCCEEDED" if i % 5 else "FAILED", i % 60),
                   wsjob(f"wsjob-{i}x", user, "execute", "CANCELLED", i % 60,
                         cancelReason=f"canceled by {user}")]
        if i % 2:
            audit.append({"verb": "list", "user": {"username": user},
                          "objectRef": {"resource": "wsjobs"}, "responseStatus": {"code": 200},
                          "requestReceivedTimestamp": "2026-11-27T02:30:00.000000Z"})
    for user, uid in load.users.items():
        queue_gc.append(queued(next_id, user, uid, "big", "RUNNING", f"/home/{user}",
                               "graphcore"))
        next_id += 1
    raw.logins = logins
    raw.login_seen = {n: [time.time() - 60] * len(lines) for n, lines in logins.items()}
    raw.finished = {"graphcore": gc, "sambanova": sn}
    raw.queue = {"graphcore": queue_gc, "sambanova": []}
    raw.slurm_nodes = {
        "graphcore": [snapshot.SlurmNode(f"gc-poplar-0{n}", "MIXED", {"ipu": 16}, {"ipu": 8})
                      for n in (1, 2)],
        "sambanova": [snapshot.SlurmNode(n, "IDLE", {"rdu": 8}, {})
                      for n in ("sm-01", "sm-02", "sn30-r1-h1")]}
    raw.journals = {"sn30-r1-h1": journal}
    raw.wsjobs = wsjobs
    raw.listings = audit
    room = Room(prefix="learner", project="bench", project_gid=20000,
                systems=list(LAYOUT.systems), learners=learners, created="")
    records = {user: {"started": {"data-transfer": "2026-11-27T02:00:00+00:00"},
                      "passed": {"cerebras-setup": "2026-11-27T02:10:00+00:00"} if i % 2 else {}}
               for i, user in enumerate(learners)}
    return raw, room, load, records


def timed(fn, rounds: int = ROUNDS) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return times, result


def ms(times: list[float]) -> str:
    return (f"min {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms")


def main() -> None:
    raw, room, load, records = synthetic()
    exercises = catalog.available(list(LAYOUT.systems))
    decide, page = timed(lambda: summarize(raw, room, load, records, exercises))
    watcher = Watcher("bench", lambda previous: (raw, page))
    watcher.refresh()
    client = make_app(watcher).test_client()
    render, response = timed(lambda: client.get("/"))
    assert response.status_code == 200 and response.text.count('class="learner"') == LEARNERS
    as_json, answer = timed(lambda: client.get("/api/room.json"))
    assert len(answer.json["rows"]) == LEARNERS + LOAD_USERS
    both = [d + r for d, r in zip(decide, render, strict=True)]
    statuses = [c.status for r in page.rows for c in r.cells]
    print(f"instructor's page, {LEARNERS} learners x {len(exercises)} exercises + {LOAD_USERS} "
          f"load users ({len(raw.finished['graphcore']) + len(raw.finished['sambanova'])} "
          f"ended jobs, {len(raw.wsjobs)} wsjobs; cells: "
          + ", ".join(f"{s} {statuses.count(s)}" for s in snapshot.STATUSES) + ")")
    print(f"  summarize (the snapshot's decisions): {ms(decide)}")
    print(f"  GET / (render, {len(response.data) / 1024:.0f} KiB): {ms(render)} "
          "(target: <= 1000 ms)")
    print(f"  summarize + GET /: {ms(both)}")
    print(f"  GET /api/room.json ({len(answer.data) / 1024:.0f} KiB): {ms(as_json)}")
    cluster = os.environ.get("BENCH_CLUSTER")
    if cluster:
        from aitestbed.exercises.session import Session
        session = Session(cluster)
        layout = snapshot.layout_of(session.topology, session.nodes)
        cycles, raw = timed(lambda: collect(cluster, layout, session.probe), rounds=5)
        print(f"  one snapshot of cluster {cluster!r} ({len(layout.reads())} nodes, one root "
              f"command each): {ms(cycles)}" + (f"; errors: {raw.errors}" if raw.errors else ""))
    json.dumps(page.to_json())  # the page is JSON-able


if __name__ == "__main__":
    main()
