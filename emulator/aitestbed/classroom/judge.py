"""The instructor's page's decisions, pure: one user's share of the Raw (Evidence) and
what it says of each exercise (judge, cell).

A learner's exercise is "passed" when their record says so (`aitestbed exercise check`
passed) or when the system's records alone prove it: the job-level criteria of
exercises/checks.py, through its own selection helpers. Files in a learner's home are
never read here (that needs commands as the learner): exercises whose evidence is only
there (the setups, data-transfer, port-forwarding) pass from the record alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aitestbed.cerebras import wsjob as wsjobs_
from aitestbed.classroom.collect import Raw
from aitestbed.classroom.page import FAILED, NOT_STARTED, PASSED, STARTED, Cell
from aitestbed.exercises import checks
from aitestbed.exercises.catalog import Exercise
from aitestbed.exercises.checks import Nodes, SlurmJob

# Exercises whose evidence is only in the learner's home: the page shows their record.
HOME_ONLY = frozenset({"cerebras-setup", "graphcore-setup", "data-transfer", "port-forwarding"})
PBS_QUEUED = ("Q", "H", "W", "T", "S", "U")  # queued, held, waiting, moving, suspended
PBS_RUNNING = ("R", "E", "B")  # running, exiting, an array begun
QUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")
FAILED_STATES = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                 "PREEMPTED")
WSJOB_FINISHED = tuple(wsjobs_.FINISHED)
WSJOB_ACTIVE = tuple(wsjobs_.ACTIVE)


@dataclass
class Evidence:
    """One user's share of the Raw."""

    user: str
    uid: int
    logins: dict[str, set[str]]  # node -> the `Accepted METHOD for USER from ` lines seen
    finished: dict[str, list[SlurmJob]]  # system -> their ended jobs, in end order
    queue: dict[str, list[SlurmJob]]
    wsjobs: list[dict]
    listings: list[str]
    pbs_jobs: list[dict] = field(default_factory=list)

    @property
    def home(self) -> str:
        return f"/home/{self.user}"


def pbs_owner(job: dict) -> str:
    """The user of a PBS job: euser, else Job_Owner's name before the @."""
    return str(job.get("euser") or str(job.get("Job_Owner") or "").split("@")[0])


class Index:
    """The Raw grouped by user once, so each row costs only its own records."""

    def __init__(self, raw: Raw):
        self.raw = raw
        self.logins: dict[str, dict[str, set[str]]] = {}
        for node, lines in raw.logins.items():
            for method, user in lines:
                self.logins.setdefault(user, {}).setdefault(node, set()).add(
                    f"Accepted {method} for {user} from ")
        self.finished = self._by_owner(raw.finished)
        self.queue = self._by_owner(raw.queue)
        self.wsjobs: dict[str, list[dict]] = {}
        for job in raw.wsjobs or []:
            user = (job["spec"].get("user") or {}).get("username")
            if isinstance(user, str):
                self.wsjobs.setdefault(user, []).append(job)
        self.listings: dict[str, list[dict]] = {}
        for event in raw.listings:
            user = (event.get("user") or {}).get("username") if isinstance(
                event.get("user"), dict) else None
            if isinstance(user, str):
                self.listings.setdefault(user, []).append(event)
        self.journal = checks.journal_by_job(raw.journals)
        self.pbs_jobs: dict[str, list[dict]] = {}
        for job in (raw.pbs_jobs or {}).values():
            self.pbs_jobs.setdefault(pbs_owner(job), []).append(job)

    @staticmethod
    def _by_owner(jobs: dict[str, list[SlurmJob]]) -> dict[str, dict[str, list[SlurmJob]]]:
        found: dict[str, dict[str, list[SlurmJob]]] = {}
        for system, records in jobs.items():
            for job in records:
                found.setdefault(job.fields.get("UserId", ""), {}).setdefault(
                    system, []).append(job)
        return found

    def of(self, user: str, uid: int) -> Evidence:
        owner = f"{user}({uid})"
        finished = {s: checks.owned_jobs(jobs, user, uid)
                    for s, jobs in self.finished.get(owner, {}).items()}
        queue = self.queue.get(owner, {})
        return Evidence(user, uid, self.logins.get(user, {}), finished, queue,
                        checks.wsjobs_of(self.wsjobs.get(user, []), user),
                        checks.listings_of(self.listings.get(user, []), user),
                        self.pbs_jobs.get(user, []))


def _accepted(ev: Evidence, nodes: Nodes, names: list[str], method: str | None = None
              ) -> list[str]:
    return [n for n in names
            if checks.accepted_line(nodes, n, ev.user, method) in ev.logins.get(n, ())]


def failure(job: SlurmJob) -> str:
    return f"{job.describe()}{_exit(job)}"


def _exit(job: SlurmJob) -> str:
    code = job.fields.get("ExitCode", "")
    status, _, signal = code.partition(":")
    if signal not in ("", "0"):
        return f", signal {signal}"
    if status not in ("", "0"):
        return f", exit code {status}"
    return ""


def _running(jobs: list[SlurmJob]) -> str:
    return ", ".join(f"job {j.job_id} ({j.name}) {j.state}"
                     + (f" ({j.fields['Reason']})" if j.fields.get("Reason") not in
                        (None, "", "None") else "") for j in jobs)


def _slurm_status(done: SlurmJob | None, ended: list[SlurmJob], queued: list[SlurmJob],
                  passed_note: str = "") -> tuple[str, str]:
    """passed when done; else started while some job runs or waits; failed when the
    latest ended job did not complete; started when some ended."""
    if done is not None:
        return PASSED, passed_note or done.describe()
    if queued:
        return STARTED, _running(queued)
    if ended and ended[-1].state != "COMPLETED":
        return FAILED, failure(ended[-1])
    if ended:
        return STARTED, f"{ended[-1].describe()}, not yet all the exercise asks"
    return NOT_STARTED, ""


def judge(name: str, ev: Evidence, nodes: Nodes, journal: dict) -> tuple[str, str] | None:
    """What the system's records alone say of exercise `name` for a user: (status, why),
    or None when only the learner's home holds its evidence."""
    if name == "first-login":
        found = _accepted(ev, nodes, [n for ns in nodes.login.values() for n in ns])
        return (PASSED, f"sshd on {', '.join(found)} accepted them") if found else (
            NOT_STARTED, "")
    if name == "graphcore-login":
        logins = _accepted(ev, nodes, nodes.login.get("graphcore", []))
        hops = _accepted(ev, nodes, nodes.hop.get("graphcore", []), "publickey")
        if logins and hops:
            return PASSED, f"sshd on {', '.join(logins + hops)}"
        if logins or hops:
            return STARTED, f"logged in on {', '.join(logins + hops)}; not yet the second step"
        return NOT_STARTED, ""
    if name in ("graphcore-mnist", "graphcore-sbatch"):
        select = checks.mnist_srun_jobs if name == "graphcore-mnist" else checks.mnist_batch_jobs
        ended = select(ev.finished.get("graphcore", []))
        done = next((j for j in reversed(ended) if j.state == "COMPLETED"), None)
        return _slurm_status(done, ended, select(ev.queue.get("graphcore", [])))
    if name == "sambanova-lenet":
        ended = checks.lenet_srun_jobs(ev.finished.get("sambanova", []), ev.home)
        queued = checks.lenet_srun_jobs(ev.queue.get("sambanova", []), ev.home)
        run = checks.ran_on_rdus(ended, journal, "lenet.py run")
        test = checks.ran_on_rdus(ended, journal, "lenet.py test")
        done = test if run and test else None
        note = (f"run: {run.describe()}, test: {test.describe()}" if done and run else "")
        status, why = _slurm_status(done, ended, queued, note)
        if status == STARTED and not queued:
            why = ("`lenet.py run` done, not yet `lenet.py test`" if run
                   else "`lenet.py test` done, not yet `lenet.py run`" if test
                   else f"{ended[-1].describe()}; no run or test on the RDUs yet")
        return status, why
    if name == "sambanova-sbatch":
        ended = checks.lenet_batch_jobs(ev.finished.get("sambanova", []), ev.home)
        queued = checks.lenet_batch_jobs(ev.queue.get("sambanova", []), ev.home)
        completed = [j for j in ended if j.state == "COMPLETED"]
        held = checks.rdus_held(completed, journal)
        two = next((j for j in reversed(completed) if held.get(j.job_id, 0) >= 2), None)
        status, why = _slurm_status(
            two, ended, queued, f"{two.describe()} held {held[two.job_id]} RDUs" if two else "")
        if status == STARTED and not queued and completed:
            why = (f"{completed[-1].describe()} held {held.get(completed[-1].job_id, 0)} "
                   "RDU(s), not two")
        return status, why
    if name == "cerebras-fc-mnist":
        compiles = checks.jobs_of_type(ev.wsjobs, "compile")
        executes = checks.jobs_of_type(ev.wsjobs, "execute")
        ok = [next((j for j in reversed(jobs) if checks.phase(j) == wsjobs_.SUCCEEDED), None)
              for jobs in (compiles, executes)]
        if all(ok):
            return PASSED, " and ".join(f"{j['metadata']['name']} ({j['spec']['jobType']})"
                                        for j in ok) + " SUCCEEDED"
        active = [j for j in compiles + executes if checks.phase(j) not in WSJOB_FINISHED]
        if active:
            return STARTED, ", ".join(f"{j['metadata']['name']} {checks.phase(j)}"
                                      for j in active)
        failed = [jobs[-1] for jobs in (compiles, executes)
                  if jobs and checks.phase(jobs[-1]) == wsjobs_.FAILED]
        if failed:
            return FAILED, "; ".join(wsjob_failure(j) for j in failed)
        if compiles or executes:
            return STARTED, " and ".join(
                f"{t} SUCCEEDED" for t, j in zip(("compile", "execute"), ok, strict=True) if j
            ) or "no wsjob SUCCEEDED yet"
        return NOT_STARTED, ""
    if name == "cerebras-cancel":
        cancelled = checks.cancelled_by(ev.wsjobs, ev.user)
        if ev.listings and cancelled:
            return PASSED, f"listed their jobs; cancelled {cancelled[-1]['metadata']['name']}"
        if ev.listings:
            return STARTED, f"listed their jobs (last at {ev.listings[-1]}); none cancelled yet"
        if cancelled:
            return STARTED, (f"cancelled {cancelled[-1]['metadata']['name']}; not yet listed "
                             "with `csctl get jobs`")
        return NOT_STARTED, ""
    return None


def wsjob_failure(job: dict) -> str:
    message = str((job.get("status") or {}).get("message") or "").strip()
    return (f"wsjob {job['metadata'].get('name', '?')} ({job['spec'].get('jobType', '?')}) "
            f"{checks.phase(job)}" + (f": {message}" if message else ""))


def cell(exercise: Exercise, ev: Evidence | None, record: dict, nodes: Nodes,
         journal: dict) -> Cell:
    name = exercise.name
    passed = (record.get("passed") or {}) if isinstance(record, dict) else {}
    started = (record.get("started") or {}) if isinstance(record, dict) else {}
    if name in passed:
        return Cell(name, PASSED, f"`exercise check` passed at {passed[name]}")
    verdict = judge(name, ev, nodes, journal) if ev is not None else None
    if verdict is not None and verdict[0] in (PASSED, FAILED):
        return Cell(name, *verdict)
    if verdict is not None and verdict[0] == STARTED:
        return Cell(name, STARTED, verdict[1])
    if name in started:
        return Cell(name, STARTED, f"`exercise start` at {started[name]}")
    if name in HOME_ONLY:
        return Cell(name, NOT_STARTED, "its evidence is in the learner's home: shown once "
                                       "`exercise check` passes")
    return Cell(name, NOT_STARTED, "")
