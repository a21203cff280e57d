"""`aitestbed run`'s decisions, pure: where a system's jobs are submitted, what a
scheduler's answer means (Slurm's scontrol and sacct, OpenPBS's qsub and
`qstat -x -f -F json`), what a run exits with, what figures a job printed.

The loop (runner.py) asks these functions and does what they say; unit tests check
them without a cluster.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from aitestbed.host import systems
from aitestbed.node.slurm_text import key_values

# Exit status of `aitestbed run` itself failing (no such cluster, not ready, bad input):
# as `docker run` does, 125; a job that exits 125 on its own is reported as 1.
TOOL_ERROR = 125
TIMED_OUT = 124  # as timeout(1)

# Slurm's job states (squeue(1), JOB STATE CODES) that are final.
SLURM_FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
               "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}
SUCCESS = {"COMPLETED", "SUCCEEDED"}
WSJOB_FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
# OpenPBS's job_state letters (qstat(1B)): F is a finished job (qstat -x keeps it).
PBS_FINAL = {"F"}
PBS_STATES = {"Q": "QUEUED", "H": "HELD", "W": "WAITING", "T": "TRANSIT", "R": "RUNNING",
              "E": "EXITING", "S": "SUSPENDED", "U": "SUSPENDED", "B": "BEGUN", "M": "MOVED"}
PBS_KILL_WALLTIME = -29  # Exit_status JOB_EXEC_KILL_WALLTIME: past its walltime


class PlanError(ValueError):
    """Input `aitestbed run` cannot act on (the CLI reports it with TOOL_ERROR)."""


@dataclass(frozen=True)
class NodeInfo:
    """A node of the running cluster, as its container's labels and node.json say."""
    name: str
    system: str
    node_class: str
    slurm_cluster: str = ""
    running: bool = True


@dataclass(frozen=True)
class Target:
    """Where a system's scripts go: the node to work on, and how they are run there."""
    system: str
    host: str  # the node that submits (Slurm) or runs (Cerebras) the scripts
    scheduler: str  # "slurm", "wsjob" or "pbs"
    controller: str = ""  # the Slurm controller's or PBS server's node (its readiness too)
    slurm_cluster: str = ""


def run_target(system: str) -> systems.RunTarget:
    """`--system SYSTEM`'s target in the registry; PlanError naming the choices."""
    targets = systems.run_targets()
    if system not in targets:
        raise PlanError(f"unknown system {system!r}: choose one of {', '.join(targets)}")
    return targets[system]


def target(system: str, nodes: list[NodeInfo]) -> Target:
    """The node a user of SYSTEM works on, as at ALCF: each system's registry entry says
    which of its nodes take the scripts (host/systems: a login node that submits to Slurm,
    an SN10 node, the Cerebras login node that runs the appliance's client, a GroqNode
    that submits to PBS)."""
    run = run_target(system)
    mine = sorted((n for n in nodes if n.system == run.system), key=lambda n: n.name)
    if not mine:
        raise PlanError(f"this cluster has no {run.system} system (bring it up with "
                        f"`aitestbed up --systems {run.system},...`)")
    hosts = run.hosts(mine)
    if not hosts:
        raise PlanError(f"this cluster has no node to submit {system} jobs from")
    host = hosts[0]
    if run.scheduler == "pbs":
        servers = [n.name for n in mine if n.node_class == "pbs_server"]
        return Target(system, host.name, "pbs", servers[0] if servers else "")
    if run.scheduler != "slurm":
        return Target(system, host.name, run.scheduler)
    controllers = [n for n in mine if n.node_class == "slurmctld"
                   and n.slurm_cluster == host.slurm_cluster]
    return Target(system, host.name, "slurm", controllers[0].name if controllers else "",
                  host.slurm_cluster)


def check_scheduler_options(run: systems.RunTarget, sbatch: list[str] | tuple[str, ...],
                            qsub: list[str] | tuple[str, ...]) -> None:
    """--sbatch for Slurm targets only, --qsub for PBS targets only."""
    title = run.system.capitalize()
    if sbatch and run.scheduler == "pbs":
        raise PlanError(f"--sbatch: {title} scripts are submitted with qsub (PBS), not "
                        "sbatch: give their options with --qsub")
    if sbatch and run.scheduler != "slurm":
        raise PlanError(f"--sbatch: {title} scripts run on the login node, not under Slurm")
    if qsub and run.scheduler == "slurm":
        raise PlanError(f"--qsub: {title} scripts are submitted with sbatch (Slurm), not "
                        "qsub: give their options with --sbatch")
    if qsub and run.scheduler != "pbs":
        raise PlanError(f"--qsub: {title} scripts run on the login node, not under PBS")


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """--max-output SIZE: bytes, or with K, M or G (powers of 1024), as `du -h` prints."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)i?B?\s*", text, re.I)
    if not match or float(match.group(1)) <= 0:
        raise PlanError("a size greater than 0, e.g. 500M or 2G")
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).upper()])


def human_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} B"


def _split_options(flag: str, given: tuple[str, ...] | list[str]) -> list[str]:
    """Every `flag` "OPTIONS" given (repeatable), split as a shell splits them."""
    options: list[str] = []
    for text in given:
        try:
            words = shlex.split(text)
        except ValueError as err:
            raise PlanError(f"{flag} {text!r}: {err}") from None
        options += words
    return options


def sbatch_options(given: tuple[str, ...] | list[str]) -> list[str]:
    """--sbatch "OPTIONS" (repeatable), split as a shell splits them."""
    options = _split_options("--sbatch", given)
    for word in options:
        if word in ("--wrap", "-W", "--wait") or word.startswith(("--wrap=", "--wait=")):
            raise PlanError(f"--sbatch {word}: aitestbed run submits the script itself and "
                            "waits for it; leave this option out")
    return options


def sbatch_argv(script: str, options: list[str]) -> list[str]:
    """The submission: --parsable for the job id; the script's own #SBATCH lines apply
    under the command line's (as sbatch does)."""
    return ["sbatch", "--parsable", *options, script]


def parse_sbatch_id(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    job_id = line.split(";")[0]
    if not job_id.isdigit():
        raise PlanError(f"sbatch printed no job id: {stdout.strip()!r}")
    return job_id


def parse_scontrol(line: str) -> dict[str, str]:
    """One `scontrol -o show job ID` line as a dict (node/slurm_text's record)."""
    return key_values(line)


SACCT_FIELDS = "JobID,State,ExitCode,NodeList"
SACCT_PREFIX = "sacct:"


def parse_sacct(line: str) -> dict[str, str]:
    """`sacct -n -X -P --format=JobID,State,ExitCode,NodeList` for a job Slurm's controller
    has forgotten (MinJobAge), as the fields of `scontrol show job` (`CANCELLED by 1001`
    is CANCELLED)."""
    parts = line.strip().splitlines()[0].split("|") if line.strip() else []
    if len(parts) != 4:
        return {}
    job, state, exit_code, nodes = parts
    return {"JobId": job, "JobState": state.split()[0] if state else "",
            "ExitCode": exit_code, "NodeList": nodes}


def parse_look(line: str) -> dict[str, str]:
    """What one look found for a job: scontrol's line, or sacct's when scontrol forgot it."""
    if line.startswith(SACCT_PREFIX):
        return parse_sacct(line[len(SACCT_PREFIX):])
    return parse_scontrol(line)


@dataclass(frozen=True)
class SlurmView:
    state: str  # JobState (PENDING, RUNNING, COMPLETED, ...); "" when unknown
    reason: str = ""
    exit_code: int | None = None
    stdout_path: str = ""
    node_list: str = ""
    batch_host: str = ""  # the node the batch script starts on

    @property
    def final(self) -> bool:
        return self.state in SLURM_FINAL


def slurm_view(fields: dict[str, str]) -> SlurmView:
    state = fields.get("JobState", "")
    reason = fields.get("Reason", "")
    code = None
    if "ExitCode" in fields and state in SLURM_FINAL:
        status, _, signal = fields["ExitCode"].partition(":")
        code = 128 + int(signal) if signal.isdigit() and int(signal) else int(status or 0)
        if code == 0 and state not in ("COMPLETED", "FAILED"):
            code = None  # NODE_FAIL, CANCELLED, ... report 0:0: the job had no say
    host = fields.get("BatchHost", "")
    return SlurmView(state, "" if reason in ("None", "(null)") else reason, code,
                     fields.get("StdOut", ""), fields.get("NodeList", ""),
                     "" if host == "(null)" else host)


# Slurm's reason for a job whose batch script could not be started on its node.
LAUNCH_FAILURE = "JobLaunchFailure"


def workdir_missing(reason: str, workdir: str, node: str, login: str, runs_dir: str) -> str:
    """The reason of a job that could not start because its work directory (the run's copy)
    is not on the compute node: ~/RUNS_DIR linked to a directory only the login node has."""
    return (f"{reason}: the job could not start: its work directory {workdir} does not exist "
            f"on {node} (is ~/{runs_dir} a link to a directory only {login} has?)")


def exit_status(state: str, exit_code: int | None) -> int:
    """What one script contributes to the run's exit status."""
    if state in SUCCESS and not exit_code:
        return 0
    if state == "TIMEOUT":
        return TIMED_OUT
    if exit_code:
        return 1 if exit_code == TOOL_ERROR else exit_code
    return 1


def run_status(results: list[tuple[str, int | None]]) -> int:
    """0 when every script succeeded; else the first failure's status (argument order)."""
    for state, code in results:
        status = exit_status(state, code)
        if status:
            return status
    return 0


def pending_note(view: SlurmView) -> str:
    """Why a job has not started yet, with Slurm's reason."""
    return f"still {view.state or 'PENDING'}" + (f" ({view.reason})" if view.reason else "")


# OpenPBS (qsub, qstat -x -f -F json, qdel) ---------------------------------------------------
# qsub's options (getopt string of OpenPBS's qsub.c): those taking a value, and flags.
_QSUB_VALUED = set("aAcCeGjJklmMNoPpqrRSuvW")
_QSUB_FLAGS = set("fhIVXz")
_QSUB_REFUSED = {
    "I": "an interactive job needs a terminal",
    "X": "X11 forwarding is for interactive jobs",
    "z": "aitestbed run reads the job id qsub prints",
    "J": "aitestbed run follows one job per script, not a job array",
}
_FALSE = {"false", "f", "n", "no", "0"}


def qsub_options(given: tuple[str, ...] | list[str]) -> list[str]:
    """--qsub "OPTIONS" (repeatable), split as a shell splits them; the options that make
    qsub interactive or wait for the job (-I, -W block=true), hide the job id (-z),
    submit an array (-J) or a command instead of the script (--) are refused."""
    options = _split_options("--qsub", given)
    waits = "aitestbed run submits the script itself and waits for it; leave this option out"
    index = 0
    while index < len(options):
        word = options[index]
        index += 1
        if word == "--" or word.startswith("--"):
            raise PlanError(f"--qsub {word}: {waits}")
        if not word.startswith("-") or word == "-":
            raise PlanError(f"--qsub {word}: not an option (aitestbed run names the script)")
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter in _QSUB_REFUSED:
                raise PlanError(f"--qsub -{letter}: {_QSUB_REFUSED[letter]}; leave this "
                                "option out")
            if letter in _QSUB_VALUED:
                value = letters
                if not value:
                    if index >= len(options):
                        raise PlanError(f"--qsub -{letter}: a value is missing")
                    value = options[index]
                    index += 1
                letters = ""
                if letter == "W" and _blocks(value):
                    raise PlanError(f"--qsub -W {value}: {waits}")
            elif letter not in _QSUB_FLAGS:
                raise PlanError(f"--qsub -{letter}: not an option of qsub")
    return options


def _blocks(attributes: str) -> bool:
    """-W block=true (alone or in a list: -W depend=afterok:1,block=true)."""
    for item in attributes.split(","):
        name, _, value = item.partition("=")
        if name.strip().lower() == "block" and value.strip().lower() not in _FALSE:
            return True
    return False


def qsub_argv(script: str, options: list[str]) -> list[str]:
    """The submission: the script's own #PBS lines apply under the command line's (as
    qsub does)."""
    return ["qsub", *options, script]


_PBS_JOB_ID = re.compile(r"^(\d+)\.\S+$")


def parse_qsub_id(stdout: str) -> str:
    """qsub prints the job's id, `SEQUENCE.SERVER` (12.groq-r01-control)."""
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    if not lines or not _PBS_JOB_ID.match(lines[-1]):
        raise PlanError(f"qsub printed no job id: {stdout.strip()!r}")
    return lines[-1]


def qstat_job(text: str, job_id: str) -> dict:
    """The job's attributes from `qstat -x -f -F json JOB` ({} when the answer has no such
    job or is not JSON: the server restarting, the job unknown)."""
    try:
        jobs = json.loads(text).get("Jobs") or {}
    except (ValueError, AttributeError):
        return {}
    if not isinstance(jobs, dict):
        return {}
    sequence = job_id.split(".")[0]
    for key, attributes in jobs.items():
        if (key == job_id or key.split(".")[0] == sequence) and isinstance(attributes, dict):
            return attributes
    return {}


def pbs_path(value: str) -> str:
    """Output_Path or Error_Path (`host:/path`) as the path on the shared file system."""
    if value.startswith("/"):
        return value
    _host, _, path = value.partition(":")
    return path if path.startswith("/") else ""


@dataclass(frozen=True)
class PbsView:
    state: str  # as a JobResult says it: QUEUED, RUNNING, ..., COMPLETED, FAILED, CANCELLED
    job_state: str = ""  # PBS's letter; "" when unknown
    reason: str = ""
    exit_code: int | None = None
    output_path: str = ""
    error_path: str = ""
    exec_host: str = ""

    @property
    def final(self) -> bool:
        return self.job_state in PBS_FINAL


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def pbs_view(attributes: dict) -> PbsView:
    """A job's qstat attributes as a state and exit code: F with Exit_status 0 is COMPLETED;
    1-255 FAILED with that code; 256+N killed by signal N (128+N, as a shell says it); -29
    (JOB_EXEC_KILL_WALLTIME) TIMEOUT; another negative status, PBS could not run it
    (FAILED, no code of its own); no Exit_status, deleted before it ran (CANCELLED)."""
    letter = str(attributes.get("job_state", ""))
    comment = str(attributes.get("comment", ""))
    paths = {key: pbs_path(str(attributes.get(key, "")))
             for key in ("Output_Path", "Error_Path")}
    hosts = str(attributes.get("exec_host", ""))
    exec_host = "+".join(sorted({h.split("/")[0] for h in hosts.split("+") if h}))
    common = {"job_state": letter, "output_path": paths["Output_Path"],
              "error_path": paths["Error_Path"], "exec_host": exec_host}
    if letter not in PBS_FINAL:
        return PbsView(PBS_STATES.get(letter, letter), reason=comment, **common)
    status = _int(attributes.get("Exit_status", ""))
    if status is None:
        return PbsView("CANCELLED", reason=comment or "deleted before it ran", **common)
    if status == 0:
        return PbsView("COMPLETED", exit_code=0, **common)
    if status == PBS_KILL_WALLTIME:
        return PbsView("TIMEOUT", reason="past its walltime (Exit_status -29)", **common)
    if status < 0:
        return PbsView("FAILED", reason=f"PBS could not run it (Exit_status {status})"
                       + (f": {comment}" if comment else ""), **common)
    if status > 256:
        return PbsView("FAILED", exit_code=128 + status - 256,
                       reason=f"killed by signal {status - 256}", **common)
    return PbsView("FAILED", exit_code=status, **common)


def pbs_pending_note(view: PbsView) -> str:
    """Why a PBS job has not ended, with the server's comment."""
    return f"still {view.state or 'QUEUED'}" + (f" ({view.reason})" if view.reason else "")


# The figures a job printed (last one wins): the throughput, loss and accuracy lines of
# the vendor SDKs' logs and of common training scripts.
FIGURES = {
    "samples_per_sec": [r"\bRate=([\d.]+) samples/sec", r"throughput:? ([\d.]+) samples/s",
                        r"([\d.]+) samples/s(?:ec)?\b"],
    "global_samples_per_sec": [r"GlobalRate=([\d.]+) samples/sec"],
    "loss": [r"\bLoss=([\d.]+)", r"\bloss[:= ]+([\d.]+(?:e-?\d+)?)"],
    "accuracy_percent": [r"accuracy\b[^%\n]*?([\d.]+) ?%"],
    "latency_ms": [r"latency:? ([\d.]+) ms"],
}
_FIGURES = {k: [re.compile(p, re.IGNORECASE) for p in v] for k, v in FIGURES.items()}


def figures(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        for key, patterns in _FIGURES.items():
            for pattern in patterns:
                match = pattern.search(line)
                if match:
                    try:
                        found[key] = float(match.group(1))
                    except ValueError:
                        continue
                    break
    return found


@dataclass
class JobResult:
    """One script's outcome: what `--json` prints for it."""
    script: str
    system: str
    state: str = "PENDING"
    exit_code: int | None = None
    job_id: str = ""
    reason: str = ""
    duration_s: float = 0.0
    output_file: str = ""  # where the job's output was brought back to
    files: list[str] = field(default_factory=list)  # files the job created or changed
    wsjobs: list[dict] = field(default_factory=list)  # Cerebras: {"name", "type", "phase"}
    figures: dict[str, float] = field(default_factory=dict)
    tail: str = ""  # the output's last lines (for JUnit)

    @property
    def ok(self) -> bool:
        return exit_status(self.state, self.exit_code) == 0

    def to_json(self) -> dict:
        return {"script": self.script, "system": self.system, "job_id": self.job_id,
                "state": self.state, "exit_code": self.exit_code, "reason": self.reason,
                "duration_s": round(self.duration_s, 3), "output_file": self.output_file,
                "files": self.files, "wsjobs": self.wsjobs, "figures": self.figures}

    def summary(self) -> str:
        what = f"job {self.job_id} " if self.job_id else ""
        code = "" if self.exit_code is None else f" (exit {self.exit_code})"
        why = f": {self.reason}" if self.reason and not self.ok else ""
        jobs = ""
        if self.wsjobs:
            jobs = "; wsjobs " + ", ".join(f"{j['name']} {j['phase']}" for j in self.wsjobs)
        return f"{self.script}: {what}{self.state}{code} in {self.duration_s:.1f} s{why}{jobs}"


@dataclass
class RunReport:
    """What `aitestbed run` returns: every script's result and the run's exit status."""
    cluster: str
    system: str
    user: str
    results: list[JobResult]

    @property
    def exit_code(self) -> int:
        return run_status([(r.state, r.exit_code) for r in self.results])

    # one script: its result's fields read through (testbed.run("x.sh").state, .reason,
    # .output_file, ...); the run's own exit_code stays the run's
    def _only(self) -> JobResult:
        if len(self.results) != 1:
            raise AttributeError("this run has several scripts: read .results")
        return self.results[0]

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in JobResult.__dataclass_fields__:
            raise AttributeError(name)
        return getattr(self._only(), name)

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "system": self.system, "user": self.user,
                "exit_code": self.exit_code, "results": [r.to_json() for r in self.results]}


def _epoch(stamp: str) -> float | None:
    import datetime

    try:
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return None


def wsjobs_of(items: list[dict], user: str, begin: float, end: float) -> list[dict]:
    """The wsjobs (csctl get jobs -a -o json) USER created between BEGIN and END (epoch
    seconds; the API's stamps are whole seconds), oldest first."""
    found = []
    for job in items:
        spec, meta = job.get("spec") or {}, job.get("metadata") or {}
        created = _epoch(meta.get("creationTimestamp", ""))
        if ((spec.get("user") or {}).get("username") != user or created is None
                or not begin - 1 <= created <= end + 1):
            continue
        found.append({"name": meta.get("name", ""), "type": spec.get("jobType", ""),
                      "phase": (job.get("status") or {}).get("phase") or "QUEUEING",
                      "created": created})
    found.sort(key=lambda j: (j["created"], j["name"]))
    for job in found:
        del job["created"]
    return found
