"""What the instructor's page shows, read as root from the sources the exercise checks use.

  collect     one command per node and cycle, run as root through the checks' Probe
              (docker exec; never as a learner, never once per learner): sshd's log of
              accepted logins and the live sessions on the login nodes (and the
              Graphcore hop nodes), Slurm's job completion log, queue and nodes on
              each controller, snd's journal on the RDU nodes, the WSJobs and the
              audit log of `csctl get jobs` on the Cerebras management node -> Raw
  summarize   pure: Raw, the room, the load, the learners' exercise records -> Page
              (a row per learner, a panel per system)
  Watcher     a thread that takes a new Page every `interval` seconds; the web page
              only renders the last one

A learner's exercise is "passed" when their record says so (`aitestbed exercise check`
passed) or when the system's records alone prove it: the job-level criteria of
exercises/checks.py, through its own selection helpers. Files in a learner's home are
never read here (that needs commands as the learner): exercises whose evidence is only
there (the setups, data-transfer, port-forwarding) pass from the record alone.

sshd's log (`sshd -E`) has no timestamps: a login's time is when a cycle first saw its
line (within one interval), or the start of its still-open session (`ps`); logins
already in the log when the page started are "before" its first snapshot.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from aitestbed.cerebras import wsjob as wsjobs_
from aitestbed.classroom.roster import Load, Room
from aitestbed.exercises import checks
from aitestbed.exercises.catalog import Exercise
from aitestbed.exercises.checks import Nodes, SlurmJob
from aitestbed.exercises.probe import Probe
from aitestbed.groq import pbs_hooks
from aitestbed.groq.card import CARDS_PER_NODE
from aitestbed.host.inventory import Topology

PASSED, FAILED, STARTED, NOT_STARTED = "passed", "failed", "started", "not started"
STATUSES = (PASSED, FAILED, STARTED, NOT_STARTED)
# Exercises whose evidence is only in the learner's home: the page shows their record.
HOME_ONLY = frozenset({"cerebras-setup", "graphcore-setup", "data-transfer", "port-forwarding"})
PARALLEL = 4  # nodes read at once (docker exec; the engine serves them concurrently)

# One command per node and cycle, in sections; each section ends with its exit code.
_MARK = "@@aitestbed:"
US = "\x1f"  # squeue's field separator: no job name or path holds it
SQUEUE = ("squeue -h -a -o '" + US.join(
    ("%i", "%u", "%U", "%T", "%r", "%P", "%b", "%N", "%j", "%Z")) + "'")
SQUEUE_FIELDS = ("JobId", "UserName", "Uid", "JobState", "Reason", "Partition", "TresPerNode",
                 "NodeList", "Name", "WorkDir")
SECTIONS = {
    "clock": "date +%s",
    "sshd": f"grep -a '^Accepted ' {checks.SSHD_LOG} 2>/dev/null || true",
    "ps": "ps -eo etimes=,args=",
    "jobcomp": f"cat {checks.JOBCOMP_LOG} 2>/dev/null || true",
    "squeue": SQUEUE,
    "nodes": "scontrol show node -o",
    "snd": f"cat {checks.SND_JOURNAL} 2>/dev/null || true",
    "wsjobs": checks.WSJOBS_COMMAND,
    # Only the users' wsjob listings are audited (the policy), so the log stays small.
    "audit": f"grep -ahF '\"wsjobs\"' {checks.KUBE_AUDIT_LOGS} 2>/dev/null || true",
    "qstat": f"{pbs_hooks.QSTAT} -f -F json",  # the GroqRack's PBS jobs (queued, running)
}
_FIELD = re.compile(r"(\w+)=(\S*)")  # scontrol's key=value pairs (as checks reads jobcomp)
_ACCEPTED = re.compile(r"^Accepted (\S+) for (\S+) from ")
_SESSION = re.compile(r"^\s*(\d+)\s+sshd: ([^\s@]+) \[priv\]\s*$")
_GRES = re.compile(r"([A-Za-z_]\w*):(?:[\w.-]+:)?(\d+)")
_ALLOC = re.compile(r"gres/([A-Za-z_]\w*)(?::[\w.-]+)?=(\d+)")
UNITS = {"ipu": "IPU", "rdu": "RDU"}
PBS_QUEUED = ("Q", "H", "W", "T", "S", "U")  # queued, held, waiting, moving, suspended
PBS_RUNNING = ("R", "E", "B")  # running, exiting, an array begun
QUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")
FAILED_STATES = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                 "PREEMPTED")
WSJOB_FINISHED = tuple(wsjobs_.FINISHED)
WSJOB_ACTIVE = tuple(wsjobs_.ACTIVE)


# where to read -------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """The cluster's nodes by what the page reads on them."""

    nodes: Nodes  # the exercises' roles (login, hop, controllers, management, mfa)
    systems: tuple[str, ...]
    journals: tuple[str, ...] = ()  # nodes with snd (its journal says which RDUs a job held)
    wafers: tuple[str, ...] = ()  # the Cerebras systems (CS-2, CS-3), as wsjobs name them
    pbs: tuple[str, ...] = ()  # the GroqRack's PBS server
    groq_nodes: tuple[str, ...] = ()  # its GroqNodes (CARDS_PER_NODE cards each)

    @property
    def login_nodes(self) -> list[str]:
        return [n for names in self.nodes.login.values() for n in names]

    def reads(self) -> dict[str, tuple[str, ...]]:
        """node -> the sections read there (one command per node)."""
        plan: dict[str, list[str]] = {}

        def add(node: str, *sections: str) -> None:
            wanted = plan.setdefault(node, ["clock"])
            wanted += [s for s in sections if s not in wanted]

        for node in self.login_nodes:
            add(node, "sshd", "ps")
        for node in self.nodes.hop.get("graphcore", []):  # graphcore-login's second step
            add(node, "sshd")
        for names in self.nodes.controllers.values():
            for node in names:
                add(node, "jobcomp", "squeue", "nodes")
        for node in self.journals:
            add(node, "snd")
        for node in self.nodes.management[:1]:
            add(node, "wsjobs", "audit")
        for node in self.pbs[:1]:
            add(node, "qstat")
        return {node: tuple(sections) for node, sections in plan.items()}


def layout_of(topology: Topology, nodes: Nodes) -> Layout:
    return Layout(
        nodes=nodes, systems=tuple(topology.systems),
        journals=tuple(n.name for n in topology.nodes if "snd" in n.services),
        wafers=tuple(n.name for n in topology.nodes if n.node_class == "cs2"),
        pbs=tuple(n.name for n in topology.nodes if n.node_class == "pbs_server"),
        groq_nodes=tuple(n.name for n in topology.nodes if n.node_class == "groq_node"))


def node_command(sections: Iterable[str]) -> str:
    # The end mark starts a line of its own even after output without a final newline.
    return "; ".join(f"echo '{_MARK}{name}'; {SECTIONS[name]}; printf '\\n{_MARK}rc %s\\n' \"$?\""
                     for name in sections)


def split_sections(out: str) -> dict[str, tuple[int, str]]:
    """A node command's output: section -> (exit code, text)."""
    found: dict[str, tuple[int, str]] = {}
    name, lines = None, []
    for line in out.splitlines():
        if line.startswith(_MARK):
            tag = line[len(_MARK):]
            if tag.startswith("rc ") and name is not None:
                try:
                    rc = int(tag[3:])
                except ValueError:
                    rc = 1
                found[name] = (rc, "\n".join(lines))
                name, lines = None, []
            else:
                name, lines = tag, []
        elif name is not None:
            lines.append(line)
    if name is not None:  # cut short (the node went away mid-command)
        found[name] = (1, "\n".join(lines))
    return found


# what was read ---------------------------------------------------------------------
@dataclass
class SlurmNode:
    name: str
    state: str
    total: dict[str, int]  # gres -> count (ipu: 16)
    used: dict[str, int]

    @property
    def down(self) -> bool:
        return any(s in self.state for s in ("DOWN", "DRAIN", "FAIL", "*"))

    @property
    def busy(self) -> bool:
        return any(self.used.values()) or self.state.startswith(("ALLOC", "MIXED"))


@dataclass
class Raw:
    """One cycle's reading of the cluster, as read (nothing decided yet)."""

    cluster: str
    layout: Layout
    taken: float  # when the cycle started (epoch seconds)
    since: float = 0.0  # the watcher's first cycle: logins seen then are "before" it
    logins: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # node -> (method, user)
    login_seen: dict[str, list[float | None]] = field(default_factory=dict)  # the Watcher's
    sessions: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # (user, since)
    finished: dict[str, list[SlurmJob]] = field(default_factory=dict)  # system -> jobcomp
    queue: dict[str, list[SlurmJob]] = field(default_factory=dict)  # system -> squeue
    slurm_nodes: dict[str, list[SlurmNode]] = field(default_factory=dict)  # system -> nodes
    journals: dict[str, list[dict]] = field(default_factory=dict)  # node -> snd's entries
    wsjobs: list[dict] | None = None  # None: not read
    listings: list[dict] = field(default_factory=list)  # audit events of wsjob listings
    pbs_jobs: dict[str, dict] | None = None  # PBS job id -> its attributes; None: not read
    errors: list[str] = field(default_factory=list)


def parse_logins(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_ACCEPTED.match, text.splitlines()) if m]


def parse_sessions(text: str, clock: float) -> list[tuple[str, float]]:
    """(user, start) of each logged-in session (sshd's `sshd: USER [priv]` process)."""
    return [(m.group(2), clock - int(m.group(1)))
            for m in map(_SESSION.match, text.splitlines()) if m]


def parse_squeue(text: str, system: str) -> list[SlurmJob]:
    """squeue's lines as SlurmJob records (UserId as jobcomp writes it), so the checks'
    selections apply to queued jobs too."""
    jobs = []
    for line in text.splitlines():
        values = line.split(US)
        if len(values) != len(SQUEUE_FIELDS):
            continue
        fields = dict(zip(SQUEUE_FIELDS, values, strict=True))
        fields["UserId"] = f"{fields['UserName']}({fields['Uid']})"
        fields["System"] = system
        jobs.append(SlurmJob(fields))
    return jobs


def parse_nodes(text: str) -> list[SlurmNode]:
    nodes = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "NodeName" not in fields:
            continue
        total = {g: int(n) for g, n in _GRES.findall(fields.get("Gres", ""))}
        used = {g: int(n) for g, n in _ALLOC.findall(fields.get("AllocTRES", ""))}
        nodes.append(SlurmNode(fields["NodeName"], fields.get("State", "UNKNOWN"), total, used))
    return nodes


def collect(cluster: str, layout: Layout, probe: Probe,
            clock: Callable[[], float] = time.time) -> Raw:
    """Read the cluster once: one root command per node (in parallel); a node that does
    not answer becomes an error line of the Raw, never an exception."""
    raw = Raw(cluster=cluster, layout=layout, taken=clock())
    raw.since = raw.taken
    reads = layout.reads()

    def read(node: str) -> tuple[str, dict[str, tuple[int, str]] | None, str]:
        try:
            rc, out = probe.run(node, node_command(reads[node]))
        except Exception as err:  # noqa: BLE001 - a node down is shown, not raised
            return node, None, str(err).splitlines()[0] if str(err) else type(err).__name__
        first = next((line for line in out.splitlines() if line.strip()), "")
        return node, split_sections(out), (f"exit {rc}" if rc else "") + (
            f": {first[:200]}" if rc and first else "")

    with ThreadPoolExecutor(min(PARALLEL, max(1, len(reads)))) as pool:
        results = list(pool.map(read, reads))
    system_of = {n: s for s, names in layout.nodes.controllers.items() for n in names}
    for node, sections, problem in results:
        if sections is None:
            raw.errors.append(f"{node}: not read ({problem})")
            continue
        if not sections:
            raw.errors.append(f"{node}: no answer ({problem or 'nothing printed'})")
            continue
        _absorb(raw, node, reads[node], sections, system_of.get(node, ""))
    return raw


def _absorb(raw: Raw, node: str, asked: tuple[str, ...], sections: dict[str, tuple[int, str]],
            system: str) -> None:
    """What one node answered, into the Raw; a section missing or failed is an error line."""
    def text(name: str) -> str | None:
        if name not in sections:
            raw.errors.append(f"{node}: no answer for {name}")
            return None
        rc, out = sections[name]
        if rc != 0:
            first = next((line for line in out.splitlines() if line.strip()), "")
            raw.errors.append(f"{node}: {name} failed (exit {rc}){': ' + first if first else ''}")
            return None
        return out

    wanted = set(asked)
    clock = raw.taken
    if "clock" in wanted and (out := text("clock")) is not None:
        try:
            clock = float(out.strip())
        except ValueError:
            pass
    if "sshd" in wanted and (out := text("sshd")) is not None:
        raw.logins[node] = parse_logins(out)
    if "ps" in wanted and (out := text("ps")) is not None:
        raw.sessions[node] = parse_sessions(out, clock)
    if "jobcomp" in wanted and (out := text("jobcomp")) is not None:
        raw.finished.setdefault(system, []).extend(
            SlurmJob({**j.fields, "System": system}) for j in checks.parse_jobcomp(out))
    if "squeue" in wanted and (out := text("squeue")) is not None:
        raw.queue.setdefault(system, []).extend(parse_squeue(out, system))
    if "nodes" in wanted and (out := text("nodes")) is not None:
        raw.slurm_nodes.setdefault(system, []).extend(parse_nodes(out))
    if "snd" in wanted and (out := text("snd")) is not None:
        raw.journals[node] = checks.parse_json_lines(out)
    if "wsjobs" in wanted and (out := text("wsjobs")) is not None:
        try:
            items = json.loads(out).get("items") or []
            raw.wsjobs = [j for j in items if isinstance(j, dict) and isinstance(
                j.get("metadata"), dict) and isinstance(j.get("spec"), dict)]
        except (ValueError, AttributeError, TypeError):
            raw.errors.append(f"{node}: wsjobs: kubectl's answer is not JSON")
    if "audit" in wanted and (out := text("audit")) is not None:
        raw.listings = checks.parse_json_lines(out)
    if "qstat" in wanted and (out := text("qstat")) is not None:
        try:
            jobs = json.loads(out.strip() or "{}").get("Jobs") or {}
            raw.pbs_jobs = {str(k): v for k, v in jobs.items() if isinstance(v, dict)}
        except (ValueError, AttributeError, TypeError):
            raw.errors.append(f"{node}: qstat: its answer is not JSON")


def stamp(previous: dict[str, list[float | None]], logins: dict[str, list[tuple[str, str]]],
          now: float, first: bool) -> dict[str, list[float | None]]:
    """When each accepted login was first seen: kept from the previous cycle, `now` for
    new lines, None (unknown: before the page) for lines of the first cycle. A node whose
    log got shorter was recreated since the last cycle: all its lines are new."""
    seen = {}
    for node, lines in logins.items():
        before = previous.get(node, [])
        if first:
            seen[node] = [None] * len(lines)
        elif len(lines) >= len(before):
            seen[node] = before + [now] * (len(lines) - len(before))
        else:
            seen[node] = [now] * len(lines)
    for node, stamps in previous.items():  # a node not read this cycle keeps its stamps
        seen.setdefault(node, stamps)
    return seen


# what the page shows ---------------------------------------------------------------
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


# pure decisions ---------------------------------------------------------------------
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


def _failure(job: SlurmJob) -> str:
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
        return FAILED, _failure(ended[-1])
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
            return FAILED, "; ".join(_wsjob_failure(j) for j in failed)
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


def _wsjob_failure(job: dict) -> str:
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
                found.append((job.end, f"{system}: {_failure(job)}"))
    for job in ev.wsjobs:
        if checks.phase(job) == wsjobs_.FAILED:
            status = job.get("status") or {}
            when = str(status.get("completionTime") or job["metadata"].get(
                "creationTimestamp") or "").rstrip("Z")
            found.append((when, f"cerebras: {_wsjob_failure(job)}"))
    return max(found)[1] if found else ""


def _panels(raw: Raw) -> list[Panel]:
    panels = []
    for system in raw.layout.systems:
        if system == "cerebras":
            panels.append(_cerebras_panel(raw))
            continue
        if system == "groq":
            panels.append(_groq_panel(raw))
            continue
        if system not in raw.layout.nodes.controllers:
            panels.append(Panel(system, "", [], 0, 0, 0, 0, 0,
                                notes=["not shown on this page (no scheduler read)"]))
            continue
        nodes = raw.slurm_nodes.get(system, [])
        gres = next((g for n in nodes for g in n.total), "")
        queue = raw.queue.get(system, [])
        queued = sum(1 for j in queue if j.state in QUEUED_STATES)
        down = [n.name for n in nodes if n.down]
        panels.append(Panel(
            system=system, unit=UNITS.get(gres, gres.upper()),
            nodes=[NodeUse(n.name, n.state, n.used.get(gres, 0), n.total.get(gres, 0))
                   for n in nodes],
            nodes_in_use=sum(1 for n in nodes if n.busy),
            accelerators_in_use=sum(n.used.get(gres, 0) for n in nodes),
            accelerators=sum(n.total.get(gres, 0) for n in nodes),
            running=len(queue) - queued, queued=queued,
            notes=[f"down or drained: {', '.join(down)}"] if down else []))
    return panels


def pbs_owner(job: dict) -> str:
    """The user of a PBS job: euser, else Job_Owner's name before the @."""
    return str(job.get("euser") or str(job.get("Job_Owner") or "").split("@")[0])


def _groq_panel(raw: Raw) -> Panel:
    jobs = list((raw.pbs_jobs or {}).values())
    running = [j for j in jobs if j.get("job_state") in PBS_RUNNING]
    queued = sum(1 for j in jobs if j.get("job_state") in PBS_QUEUED)
    nodes = []
    for name in raw.layout.groq_nodes:
        used = sum(pbs_hooks.cards_on_node(
            str(j.get("exec_vnode") or ""), str((j.get("Resource_List") or {}).get("place", "")),
            name) for j in running)
        nodes.append(NodeUse(name, "IN USE" if used else "FREE", min(used, CARDS_PER_NODE),
                             CARDS_PER_NODE))
    return Panel(
        system="groq", unit="GroqCard", nodes=nodes,
        nodes_in_use=sum(1 for n in nodes if n.used), accelerators_in_use=sum(
            n.used for n in nodes), accelerators=CARDS_PER_NODE * len(nodes),
        running=len(running), queued=queued,
        notes=[] if raw.pbs_jobs is not None or not raw.layout.pbs else [
            "PBS's jobs were not read"])


def _cerebras_panel(raw: Raw) -> Panel:
    wafers = list(raw.layout.wafers)
    unit = "CS-3" if any("cs3" in w for w in wafers) else "CS-2"
    jobs = raw.wsjobs or []
    active = [j for j in jobs if checks.phase(j) in WSJOB_ACTIVE]
    held = {s: j for j in active for s in (j.get("status") or {}).get("systems") or []}
    queued = [j for j in jobs if checks.phase(j) == wsjobs_.QUEUEING]
    shown = sorted(active + queued, key=lambda j: str(j["metadata"].get("creationTimestamp")))
    notes = [] if raw.wsjobs is not None else ["the wsjobs were not read"]
    return Panel(
        system="cerebras", unit=unit,
        nodes=[NodeUse(w, "IN USE" if w in held else "FREE", int(w in held), 1) for w in wafers],
        nodes_in_use=sum(1 for w in wafers if w in held), accelerators_in_use=len(held),
        accelerators=len(wafers), running=len(active), queued=len(queued),
        wsjobs=[WsjobLine(
            name=str(j["metadata"].get("name", "")),
            user=str((j["spec"].get("user") or {}).get("username", "")),
            job_type=str(j["spec"].get("jobType", "")), phase=checks.phase(j),
            systems=list((j.get("status") or {}).get("systems") or []),
            message=str((j.get("status") or {}).get("message") or "")) for j in shown],
        notes=notes)


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
                columns=columns, rows=rows, panels=_panels(raw), errors=list(raw.errors),
                interval=interval)


# the watcher -----------------------------------------------------------------------
def practice_room(user: str, uid: int, systems: list[str]) -> Room:
    """The room the page shows on a cluster without a classroom: its practice user."""
    return Room(prefix="", project="", project_gid=0, systems=list(systems),
                learners={user: uid}, created="")


class Watcher:
    """Takes a snapshot every `interval` seconds in a thread of its own; `page` is the last.

    `source` makes one Page from the previous cycle's Raw (or None); the real one is
    built from a cluster name (`for_cluster`)."""

    def __init__(self, cluster: str, source: Callable[[Raw | None], tuple[Raw, Page]],
                 interval: float = 5.0, clock: Callable[[], float] = time.time):
        self.cluster = cluster
        self.interval = max(float(interval), 0.5)
        self.clock = clock
        self._source = source
        self._lock = threading.Lock()
        self._page = empty_page(cluster, self.interval)
        self._raw: Raw | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cycles = 0

    @property
    def page(self) -> Page:
        with self._lock:
            return self._page

    def refresh(self) -> Page:
        """One cycle; a failure keeps the last page and says so on it."""
        try:
            raw, page = self._source(self._raw)
        except Exception as err:  # noqa: BLE001 - the page shows it, the thread goes on
            message = f"snapshot failed: {type(err).__name__}: {err}".splitlines()[0]
            with self._lock:
                kept = self._page
                page = Page(**{**kept.__dict__, "errors": [message]})
                self._page = page
            return page
        with self._lock:
            self._raw, self._page = raw, page
            self.cycles += 1
        return page

    def start(self) -> Watcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="classroom-watcher",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    @classmethod
    def for_cluster(cls, cluster: str, interval: float = 5.0,
                    probe: Probe | None = None) -> Watcher:
        """The watcher of a running cluster (AitestbedError when it has no state)."""
        from aitestbed.classroom import roster
        from aitestbed.exercises import catalog
        from aitestbed.exercises.session import Session

        session = Session(cluster, probe)
        layout = layout_of(session.topology, session.nodes)
        root = session.state.root

        def source(previous: Raw | None) -> tuple[Raw, Page]:
            raw = collect(cluster, layout, session.probe)
            raw.login_seen = stamp(previous.login_seen if previous else {}, raw.logins,
                                   raw.taken, first=previous is None)
            raw.since = previous.since if previous else raw.taken
            errors = []
            try:
                room = roster.load_room(root)
                load = roster.load_load(root)
            except roster.ClassroomError as err:
                room, load = None, None
                errors.append(str(err))
            if room is None:
                user, uid = session.record.user, 0
                try:
                    user, uid = session.learner(None)
                except Exception as err:  # noqa: BLE001 - shown on the page
                    errors.append(str(err))
                room = practice_room(user, uid, layout.systems)
            exercises = catalog.available(room.systems or list(layout.systems))
            records = {u: session.progress(u) for u in room.learners}
            page = summarize(raw, room, load, records, exercises, interval)
            page.errors = errors + page.errors
            return raw, page

        return cls(cluster, source, interval)


def iso(epoch: float | None) -> str:
    if not epoch:
        return ""
    return dt.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")
