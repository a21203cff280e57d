"""`aitestbed run`'s loop: copy, submit, follow, bring back. Thin: plan.py decides.
How a target's scripts are followed is its scheduler's class (FOLLOW at the end): SlurmRun
(sbatch, output streamed), WsjobRun (bash on the Cerebras login node), PbsRun (qsub on a
GroqNode, output shown when each job ends).

Everything on the cluster is done as the user (runuser; a login shell where a user
would have one: submitting, running a Cerebras script), in a fresh copy of the
directory under ~/aitestbed-runs/RUN/ on the system's login node (compute nodes share
/home), which is removed at the end unless asked to keep it.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from aitestbed.host.cluster import Cluster
from aitestbed.host.errors import AitestbedError
from aitestbed.host.health import probe
from aitestbed.host.jobrun import plan, transfer
from aitestbed.host.jobrun.plan import JobResult, NodeInfo, PlanError, RunReport, Target
from aitestbed.host.provider import NodeGone, Provider
from aitestbed.host.state import ClusterState
from aitestbed.node.login import as_login

POLL = 0.5  # seconds between two looks at the jobs, once they have run a while
FIRST_POLL = 0.1  # the first look; each next one waits FIRST_POLL longer, up to POLL
TAIL_LINES = 40
RUNS_DIR = "aitestbed-runs"
CHUNK = 1 << 20  # output bytes read per job per poll

# Run as the user on the submit host: each job's scontrol line and its new output bytes.
POLL_SCRIPT = r"""
import base64, json, os, subprocess, sys
out = {}
for job, (path, offset) in json.loads(sys.argv[1]).items():
    r = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True)
    line = r.stdout.strip() or r.stderr.strip()
    if r.returncode and "Invalid job id" in line:  # forgotten (MinJobAge): ask accounting
        a = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "--format=SACCT_FIELDS"],
                           capture_output=True, text=True)
        if a.returncode == 0 and a.stdout.strip():
            line = "SACCT_PREFIX" + a.stdout.strip()
    data = b""
    if not path:
        for word in line.split():
            if word.startswith("StdOut="):
                path = word[7:]
    if path:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(CHUNK)
        except OSError:
            pass
    out[job] = [line, path, base64.b64encode(data).decode()]
print(json.dumps(out))
""".replace("CHUNK", str(CHUNK)).replace("SACCT_FIELDS", plan.SACCT_FIELDS) \
    .replace("SACCT_PREFIX", plan.SACCT_PREFIX)

# Run as the user on the PBS submit host: each job's `qstat -x -f -F json` answer (one
# qstat per job, so each answer is one JSON document) and new bytes of the files asked for
# ([exists, base64]). Outside a login shell PATH lacks PBS's commands: /etc/pbs.conf's
# PBS_EXEC says where they are.
PBS_POLL_SCRIPT = r"""
import base64, json, os, shutil, subprocess, sys
ask = json.loads(sys.argv[1])
qstat = shutil.which("qstat")
if qstat is None:
    home = "/opt/pbs"
    try:
        with open("/etc/pbs.conf") as conf:
            for line in conf:
                if line.startswith("PBS_EXEC="):
                    home = line.split("=", 1)[1].strip()
    except OSError:
        pass
    qstat = os.path.join(home, "bin", "qstat")
out = {"jobs": {}, "files": []}
for job in ask["jobs"]:
    try:
        r = subprocess.run([qstat, "-x", "-f", "-F", "json", job], capture_output=True,
                           text=True)
        out["jobs"][job] = [r.stdout, r.stderr.strip()]
    except OSError as err:
        out["jobs"][job] = ["", str(err)]
for path, offset in ask["files"]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            out["files"].append([True, base64.b64encode(f.read(CHUNK)).decode()])
    except OSError:
        out["files"].append([False, ""])
print(json.dumps(out))
""".replace("CHUNK", str(CHUNK))


@dataclass
class Options:
    system: str
    scripts: list[str]
    user: str | None = None
    directory: Path = Path(".")
    output_dir: Path = Path("aitestbed-output")
    timeout: float | None = None
    sbatch: list[str] = field(default_factory=list)
    keep: bool = False
    on_output: Callable[[str, str], None] = lambda script, text: None  # streamed output
    on_progress: Callable[[str], None] = lambda message: None
    qsub: list[str] = field(default_factory=list)
    max_output: int = transfer.MAX_OUTPUT  # bytes brought back per script


# the cluster ------------------------------------------------------------------------------
def cluster_nodes(cluster: Cluster) -> list[NodeInfo]:
    """The cluster's nodes its provider has, as the inventory describes them: fast, no
    Ansible."""
    handles = cluster.provider.nodes(cluster.name)
    return [NodeInfo(node.name, node.system, node.node_class, node.slurm_cluster or "",
                     handles[node.name].running)
            for node in cluster.topology.nodes if node.name in handles]


def check_ready(where: Provider, cluster: str, nodes: list[NodeInfo],
                target: Target) -> None:
    by_name = {n.name: n for n in nodes}
    names = [n for n in (target.host, target.controller) if n]
    for name in names:
        if not by_name[name].running:
            raise AitestbedError(f"cluster {cluster!r} is not running ({name} is stopped): "
                                 f"`aitestbed --name {cluster} up`")
    with ThreadPoolExecutor(len(names)) as pool:
        # Both are running (just seen): only their health is asked.
        healths = list(pool.map(lambda n: probe(where, cluster, n, "running"), names))
    for name, health in zip(names, healths, strict=True):
        if not health.ready:
            raise AitestbedError(f"cluster {cluster!r} is not ready ({name}: "
                                 f"{health.summary}): `aitestbed --name {cluster} wait`")


def check_user(state: ClusterState, user: str, system: str) -> None:
    users = state.registry().users
    record = users.get(user)
    if record is None:
        raise AitestbedError(f"unknown user {user!r} in cluster {state.name!r}")
    if not record.get("active", True):
        raise AitestbedError(f"user {user!r} was offboarded in cluster {state.name!r}")
    group = plan.run_target(system).system
    if group not in record.get("systems", []):
        raise AitestbedError(f"user {user!r} has no access to {group} (their systems: "
                             f"{', '.join(record.get('systems', [])) or 'none'})")


# one node, as a user ------------------------------------------------------------------------
class Remote:
    """Commands on one node: as root, as the user, or in the user's login shell."""

    def __init__(self, where: Provider, cluster: str, node: str, user: str):
        self.where, self.cluster, self.node, self.user = where, cluster, node, user

    @property
    def container(self) -> str:  # what messages call the node
        return self.node

    def on(self, node: str) -> Remote:
        """Another node of the cluster, as the same user."""
        return Remote(self.where, self.cluster, node, self.user)

    def exec(self, argv: list[str], as_user: bool = True) -> tuple[int, bytes, bytes]:
        try:
            result = self.where.exec(self.cluster, self.node, argv,
                                     user=self.user if as_user else None, separate=True)
        except NodeGone as err:
            raise AitestbedError(f"{self.node} stopped: {err}") from None
        return result.exit_code, result.stdout, result.stderr

    def login_shell(self, command: str) -> tuple[int, str, str]:
        rc, out, err = self.exec(as_login(self.user, command), as_user=False)
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    def stdin(self, argv: list[str], data: bytes, timeout: float = 600
              ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr): kept apart, as the terminal's tool may write on
        stderr (kubectl's "Unknown stream id" lines) what is not the command's output."""
        command = self.where.terminal_argv(self.cluster, self.node, argv, tty=False,
                                           user=self.user)
        result = subprocess.run(command, input=data, capture_output=True, timeout=timeout,
                                check=False)
        return (result.returncode, result.stdout.decode(errors="replace"),
                result.stderr.decode(errors="replace"))

    def popen(self, command: str) -> subprocess.Popen:
        argv = self.where.terminal_argv(self.cluster, self.node, as_login(self.user, command),
                                        tty=False)
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@dataclass
class Workspace:
    """The run's copy of the directory on the cluster: one directory per script."""
    root: str  # /home/USER/aitestbed-runs/RUN
    dirs: list[str]

    def marker(self, index: int) -> str:
        return f"{self.root}/.{index}.start"


def upload(remote: Remote, directory: Path, files: list[str], count: int,
           run_id: str) -> Workspace:
    data = transfer.pack(directory, files)
    script = (
        'set -e; umask 022; home=$(getent passwd "$(id -un)" | cut -d: -f6); '
        f'root="$home/{RUNS_DIR}/{run_id}"; mkdir -p "$root/src"; '
        'tar -x -p -f - -C "$root/src"; '
        f'for i in $(seq 1 {count}); do cp -a "$root/src" "$root/$i"; touch "$root/.$i.start";'
        ' done; rm -rf "$root/src"; echo "$root"')
    rc, out, err = remote.stdin(["sh", "-c", script], data)
    if rc or not out.strip():
        raise AitestbedError(f"copying {directory} to {remote.container} failed: "
                             f"{(out + err).strip()[-300:]}")
    root = out.strip().splitlines()[-1]
    return Workspace(root, [f"{root}/{i}" for i in range(1, count + 1)])


def bring_back(remote: Remote, workspace: Workspace, index: int, destination: Path,
               budget: int = transfer.MAX_OUTPUT, first: str = ""
               ) -> tuple[list[str], list[tuple[str, int]]]:
    """Files the job created or changed in its directory (newer than the start marker),
    within BUDGET bytes: (the files brought back, those left on the cluster and their
    sizes). Listed first, chosen here, then sent as a sparse-aware tar of only those."""
    workdir = shlex.quote(workspace.dirs[index])
    marker = shlex.quote(workspace.marker(index + 1))
    rc, listing, err = remote.exec(["sh", "-c", f"cd {workdir} && find . -newer {marker} "
                                    "\\( -type f -o -type l \\) -printf '%s %p\\0'"])
    if rc and not listing:
        raise AitestbedError(f"bringing back {workspace.dirs[index]} failed: "
                             f"{err.decode(errors='replace').strip()[-300:]}")
    taken, left = transfer.choose(transfer.parse_listing(listing), budget, first)
    if not taken:
        return [], left
    names = shlex.quote(f"{workspace.root}/.{index + 1}.back")
    wrote, _, err_text = remote.stdin(["sh", "-c", f"cat > {names}"],
                                      b"".join(n.encode(errors="surrogateescape") + b"\0"
                                               for n, _ in taken))
    if wrote:
        raise AitestbedError(f"bringing back {workspace.dirs[index]} failed: "
                             f"{err_text.strip()[-300:]}")
    rc, out, err = remote.exec(["sh", "-c", f"cd {workdir} && tar -c -S --null "
                                f"-T {names} -f -; rm -f {names}"])
    if rc and not out:
        raise AitestbedError(f"bringing back {workspace.dirs[index]} failed: "
                             f"{err.decode(errors='replace').strip()[-300:]}")
    return transfer.unpack(out, destination), left


def output_dir_of(options: Options, script: str) -> Path:
    return options.output_dir / script


# the run --------------------------------------------------------------------------------------
def run(cluster: str, options: Options) -> RunReport:
    opened = Cluster.open(cluster)
    state, record = opened.state, opened.record
    user = options.user or record.user
    try:
        scripts = _check(state, options, user)
    except PlanError as err:
        raise AitestbedError(str(err)) from None
    where = opened.provider
    nodes = cluster_nodes(opened)
    if not nodes:
        raise AitestbedError(f"cluster {cluster!r} has no containers: "
                             f"`aitestbed --name {cluster} up`")
    try:
        target = plan.target(options.system, nodes)
    except PlanError as err:
        raise AitestbedError(str(err)) from None
    check_ready(where, cluster, nodes, target)
    files = transfer.select(options.directory, leave_out=options.output_dir)
    left_out = [s for s in scripts if s not in files]
    if left_out:
        raise AitestbedError(f"{', '.join(left_out)}: left out of the copy by .gitignore")
    remote = Remote(where, cluster, target.host, user)
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    options.on_progress(f"copying {options.directory} ({len(files)} files) to "
                        f"{user}@{target.host}")
    workspace = upload(remote, options.directory, files, len(scripts), run_id)
    results = [JobResult(s, options.system) for s in scripts]
    try:
        FOLLOW[target.scheduler](remote, workspace, options, results).follow()
    finally:
        for index, result in enumerate(results):
            _collect(remote, workspace, index, result, options)
        if not options.keep:
            remote.exec(["sh", "-c", f"rm -rf {shlex.quote(workspace.root)}; "
                         f"rmdir {shlex.quote(workspace.root.rsplit('/', 1)[0])} 2>/dev/null"])
    return RunReport(cluster, options.system, user, results)


def _check(state: ClusterState, options: Options, user: str) -> list[str]:
    """The scripts, relative to the directory; PlanError or AitestbedError for bad input."""
    run_target = plan.run_target(options.system)
    if not options.scripts:
        raise PlanError("name at least one script to run")
    plan.check_scheduler_options(run_target, options.sbatch, options.qsub)
    directory = options.directory
    if not directory.is_dir():
        raise PlanError(f"no such directory: {directory}")
    scripts = []
    root = directory.resolve()
    for script in options.scripts:
        path = (directory / script).resolve()
        if not path.is_relative_to(root):
            raise PlanError(f"{script}: not inside {directory} (scripts are copied with it)")
        if not path.is_file():
            raise PlanError(f"no such script: {directory / script}")
        scripts.append(path.relative_to(root).as_posix())
    if len(set(scripts)) != len(scripts):
        raise PlanError("a script is named twice")
    check_user(state, user, options.system)
    try:
        options.output_dir.mkdir(parents=True, exist_ok=True)
        probe_file = options.output_dir / f".aitestbed-{uuid.uuid4().hex[:8]}"
        probe_file.write_bytes(b"")
        probe_file.unlink()
    except OSError as err:
        raise PlanError(f"cannot write the output directory {options.output_dir}: "
                        f"{err.strerror}") from None
    return scripts


def _collect(remote: Remote, workspace: Workspace, index: int, result: JobResult,
             options: Options) -> None:
    destination = output_dir_of(options, result.script)
    left: list[tuple[str, int]] = []
    try:
        result.files, left = bring_back(remote, workspace, index, destination,
                                        options.max_output, first=result.output_file)
    except AitestbedError as err:
        result.reason = result.reason or str(err)
    if left:
        shown = ", ".join(f"{name.removeprefix('./')} ({plan.human_size(size)})"
                          for name, size in left[:5])
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        options.on_progress(f"{result.script}: not brought back, over --max-output "
                            f"{plan.human_size(options.max_output)}: {shown}{more}")
    if result.output_file:
        result.output_file = str(destination / result.output_file)


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-TAIL_LINES:])


class SubmissionRefused(AitestbedError):
    """sbatch or qsub queued no job for a script (a bad option, an impossible request):
    `aitestbed run` could not run it, so it exits with TOOL_ERROR, not as a job failed."""


def refusal(text: str) -> str:
    """The submitter's own message: its last line that is not a usage hint (sbatch follows
    `unrecognized option` with `Try "sbatch --help" ...`, qsub a `usage:` block)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    usage = next((i for i, line in enumerate(lines) if line.startswith("usage:")), len(lines))
    said = [line for line in lines[:usage] if not line.startswith("Try ")]
    return (said or lines or [""])[-1]


class BatchRun:
    """Submit every script to a batch queue from its directory on the submit host, then
    follow them all with one look per poll; what differs is the scheduler's (subclasses)."""

    submitter: str  # the command that queues a script, named when it fails

    def __init__(self, remote: Remote, workspace: Workspace, options: Options,
                 results: list[JobResult]):
        self.remote, self.workspace, self.options, self.results = (remote, workspace, options,
                                                                   results)
        self.started: dict[str, float] = {}

    def follow(self) -> None:
        deadline = (time.monotonic() + self.options.timeout) if self.options.timeout else None
        by_job: dict[str, JobResult] = {}
        try:
            for index, result in enumerate(self.results):
                try:
                    submitted = self._submit(index, result)
                except SubmissionRefused:
                    self._interrupted(by_job)  # the jobs this run queued before it
                    raise
                if submitted:
                    by_job[result.job_id] = result
            interval = FIRST_POLL
            while self._following(by_job):
                time.sleep(interval)
                interval = min(POLL, interval + FIRST_POLL)
                self._poll(by_job)
                if deadline and time.monotonic() > deadline:
                    deadline = self._past_deadline(by_job)
                    if deadline is None:
                        break
        except KeyboardInterrupt:
            self._interrupted(by_job)
            raise
        for job, result in by_job.items():
            self._finish(job, result)

    def _submit(self, index: int, result: JobResult) -> bool:
        argv = self._argv(result.script)
        command = f"cd {shlex.quote(self.workspace.dirs[index])} && {shlex.join(argv)}"
        self.started[result.script] = time.monotonic()
        rc, out, err = self.remote.login_shell(command)
        if rc:  # no job: a bad option (N18), not a job that failed
            said = refusal(err) or refusal(out) or f"{self.submitter} failed (exit {rc})"
            result.state, result.reason = "FAILED", said
            raise SubmissionRefused(f"{result.script} was not submitted: {said}")
        try:
            result.job_id = self._parse_id(out)
        except PlanError as err:
            result.state, result.exit_code, result.reason = "FAILED", 1, str(err)
            return False
        self._submitted(result)
        return True

    def _timed_out(self, result: JobResult, was: str) -> None:
        """`result` stopped by --timeout; `was` says how it stood."""
        result.reason = f"aitestbed run --timeout {self.options.timeout:g} s: {was}"
        result.state, result.exit_code = "TIMEOUT", None
        result.duration_s = time.monotonic() - self.started[result.script]

    # The scheduler's part.
    def _argv(self, script: str) -> list[str]:
        raise NotImplementedError

    def _parse_id(self, out: str) -> str:
        raise NotImplementedError

    def _submitted(self, result: JobResult) -> None:
        raise NotImplementedError

    def _following(self, by_job: dict[str, JobResult]) -> bool:
        raise NotImplementedError

    def _poll(self, by_job: dict[str, JobResult]) -> None:
        raise NotImplementedError

    def _past_deadline(self, by_job: dict[str, JobResult]) -> float | None:
        """--timeout has passed: the next deadline, or None to stop following."""
        raise NotImplementedError

    def _interrupted(self, by_job: dict[str, JobResult]) -> None:
        raise NotImplementedError

    def _finish(self, job: str, result: JobResult) -> None:
        raise NotImplementedError


class SlurmRun(BatchRun):
    """Submit every script with sbatch, then follow them all with one look per poll."""

    submitter = "sbatch"

    def __init__(self, remote: Remote, workspace: Workspace, options: Options,
                 results: list[JobResult]):
        super().__init__(remote, workspace, options, results)
        self.sbatch = plan.sbatch_options(options.sbatch)
        self.offsets: dict[str, int] = {}
        self.paths: dict[str, str] = {}
        self.text: dict[str, list[str]] = {}
        self.partial: dict[str, bytes] = {}

    def _following(self, by_job: dict[str, JobResult]) -> bool:
        return any(r.state not in plan.SLURM_FINAL for r in by_job.values())

    def _past_deadline(self, by_job: dict[str, JobResult]) -> float | None:
        self._time_out(by_job)
        return None

    def _interrupted(self, by_job: dict[str, JobResult]) -> None:
        self._cancel([r for r in by_job.values() if r.state not in plan.SLURM_FINAL])

    def _finish(self, job: str, result: JobResult) -> None:
        self._flush(job)
        text = "".join(self.text[job])
        result.tail, result.figures = _tail(text), plan.figures(text)
        workdir = self.workspace.dirs[self.results.index(result)] + "/"
        path = self.paths.get(job, "")
        if path.startswith(workdir):
            result.output_file = path[len(workdir):]
        elif path:  # --output elsewhere: what was streamed is its copy
            name = transfer.safe_name(Path(path).name) or "output.log"
            destination = output_dir_of(self.options, result.script)
            destination.mkdir(parents=True, exist_ok=True)
            (destination / name).write_text(text)
            result.output_file = name

    def _argv(self, script: str) -> list[str]:
        return plan.sbatch_argv(script, self.sbatch)

    def _parse_id(self, out: str) -> str:
        return plan.parse_sbatch_id(out)

    def _submitted(self, result: JobResult) -> None:
        self.offsets[result.job_id] = 0
        self.text[result.job_id] = []
        self.partial[result.job_id] = b""
        self.options.on_progress(f"{result.script}: submitted batch job {result.job_id}")

    def _look(self, jobs: list[str]) -> dict[str, tuple[str, bytes]]:
        """One exec on the submit host: each job's scontrol line and its new output bytes
        (read on from the last offset, as the user; the output path is remembered)."""
        wanted = {job: [self.paths.get(job, ""), self.offsets[job]] for job in jobs}
        rc, out, err = self.remote.exec(["python3", "-c", POLL_SCRIPT, json.dumps(wanted)])
        if rc:
            raise AitestbedError(f"following the jobs failed: "
                                 f"{err.decode(errors='replace').strip()[-300:]}")
        seen = {}
        for job, (line, path, data) in json.loads(out).items():
            if path:
                self.paths[job] = path
            chunk = base64.b64decode(data)
            self._output(job, chunk)
            seen[job] = (line, chunk)
        return seen

    def _poll(self, by_job: dict[str, JobResult]) -> None:
        for job, (line, chunk) in self._look(list(by_job)).items():
            result = by_job[job]
            if result.state in plan.SLURM_FINAL:
                continue
            view = plan.slurm_view(plan.parse_look(line))
            if not view.state:
                continue
            if view.state == "RUNNING" != result.state:
                self.options.on_progress(f"{result.script}: job {job} RUNNING on "
                                         f"{view.node_list}")
            result.state, result.reason = view.state, view.reason
            result.duration_s = time.monotonic() - self.started[result.script]
            if view.final:
                result.exit_code = view.exit_code
                if view.reason == plan.LAUNCH_FAILURE:
                    result.reason = self._not_started(result, view)
                if len(chunk) == CHUNK:  # more output than one look reads: the rest
                    self._drain(job)

    def _not_started(self, result: JobResult, view: plan.SlurmView) -> str:
        """Why Slurm could not start the job, when it is that the run's copy is not on the
        compute node (N34): Slurm says only JobLaunchFailure."""
        node = view.batch_host or (view.node_list if view.node_list.replace("-", "").isalnum()
                                   else "")
        if not node:
            return view.reason
        workdir = self.workspace.dirs[self.results.index(result)]
        try:
            rc, _, _ = self.remote.on(node).exec(["test", "-d", workdir])
        except AitestbedError:
            return view.reason  # the node is gone: NODE_FAIL's to say
        if rc == 0:
            return view.reason
        return plan.workdir_missing(view.reason, workdir, node, self.remote.container,
                                     RUNS_DIR)

    def _output(self, job: str, data: bytes) -> None:
        if not data:
            return
        self.offsets[job] += len(data)
        data = self.partial[job] + data
        complete, _, rest = data.rpartition(b"\n")
        self.partial[job] = rest
        if complete:
            text = complete.decode(errors="replace") + "\n"
            self.text[job].append(text)
            script = next(r.script for r in self.results if r.job_id == job)
            self.options.on_output(script, text)

    def _flush(self, job: str) -> None:
        if self.partial.get(job):
            text = self.partial[job].decode(errors="replace") + "\n"
            self.partial[job] = b""
            self.text[job].append(text)
            self.options.on_output(next(r.script for r in self.results if r.job_id == job),
                                   text)

    def _drain(self, job: str) -> None:
        """The rest of a finished job's output, a chunk per look."""
        for _ in range(64):
            before = self.offsets[job]
            try:
                self._look([job])
            except AitestbedError:
                return
            if self.offsets[job] == before:
                return

    def _cancel(self, results: list[JobResult]) -> None:
        ids = [r.job_id for r in results if r.job_id]
        if ids:
            self.remote.exec(["scancel", *ids])

    def _time_out(self, by_job: dict[str, JobResult]) -> None:
        waiting = [r for r in by_job.values() if r.state not in plan.SLURM_FINAL]
        self._cancel(waiting)
        for result in waiting:
            was = (plan.pending_note(plan.SlurmView(result.state, result.reason))
                   if result.state != "RUNNING" else "while RUNNING")
            self._timed_out(result, was)
            self._drain(result.job_id)


class WsjobRun:
    """Each script with bash in the user's login shell on the Cerebras login node, side by
    side; the wsjobs it created, read from the appliance afterwards."""

    def __init__(self, remote: Remote, workspace: Workspace, options: Options,
                 results: list[JobResult]):
        self.remote, self.workspace, self.options, self.results = (remote, workspace, options,
                                                                   results)
        self.windows: dict[int, list] = {}  # when each script ran (epoch seconds)

    def follow(self) -> None:
        started_at = time.time()
        threads = [threading.Thread(target=self._one, args=(i, r), daemon=True)
                   for i, r in enumerate(self.results)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            for index in range(len(self.results)):
                self._stop(index)
            raise
        self._wsjobs(started_at)

    def _pidfile(self, index: int) -> str:
        return f"{self.workspace.root}/.{index + 1}.pid"

    def _stop(self, index: int) -> None:
        self.remote.exec(["sh", "-c", f"kill -TERM $(cat {shlex.quote(self._pidfile(index))})"
                                      " 2>/dev/null"])

    def _one(self, index: int, result: JobResult) -> None:
        limit = f"{self.options.timeout:g}s" if self.options.timeout else "0"
        command = (f"cd {shlex.quote(self.workspace.dirs[index])} && "
                   f"echo $$ > {shlex.quote(self._pidfile(index))} && "
                   f"exec timeout -k 10 {limit} bash {shlex.quote(result.script)}")
        started = time.monotonic()
        self.windows[index] = [time.time(), None]
        process = self.remote.popen(command)
        lines: list[str] = []
        assert process.stdout is not None
        for raw in process.stdout:
            text = raw.decode(errors="replace")
            lines.append(text)
            self.options.on_output(result.script, text)
        code = process.wait()
        self.windows[index][1] = time.time()
        result.duration_s = time.monotonic() - started
        text = "".join(lines)
        result.tail, result.figures = _tail(text), plan.figures(text)
        if self.options.timeout and code in (124, 137):
            result.state, result.exit_code = "TIMEOUT", None
            result.reason = f"aitestbed run --timeout {self.options.timeout:g} s"
        else:
            result.state, result.exit_code = ("COMPLETED" if code == 0 else "FAILED"), code
        destination = output_dir_of(self.options, result.script)
        destination.mkdir(parents=True, exist_ok=True)
        (destination / "output.log").write_text(text)
        result.output_file = "output.log"

    def _wsjobs(self, started_at: float) -> None:
        rc, out, _ = self.remote.login_shell("csctl get jobs -a -o json")
        if rc:
            return
        try:
            items = json.loads(out).get("items", [])
        except ValueError:
            return
        for index, result in enumerate(self.results):
            begin, end = self.windows.get(index, [started_at, None])
            for job in plan.wsjobs_of(items, self.remote.user, begin, end or time.time()):
                result.wsjobs.append(job)
                if result.state == "TIMEOUT" and job["phase"] not in plan.WSJOB_FINAL:
                    self.remote.login_shell(f"csctl cancel job {shlex.quote(job['name'])}")
                    job["phase"] = "CANCELLED"


class PbsRun(BatchRun):
    """Submit every script with qsub from its directory on the submit host (a GroqNode: the
    queue takes jobs from those only), then follow them all with one look per poll.

    PBS spools a job's output on its execution host while it runs and copies it next to
    the script when the job ends (Output_Path/Error_Path, <name>.o<seq> and .e<seq>, on
    the shared /home), so each job's output is shown when it ends; the files come back
    with the rest of what the job made."""

    submitter = "qsub"
    GRACE = 40  # looks a finished job's output files may take to appear

    def __init__(self, remote: Remote, workspace: Workspace, options: Options,
                 results: list[JobResult]):
        super().__init__(remote, workspace, options, results)
        self.qsub = plan.qsub_options(options.qsub)
        self.final: set[str] = set()  # jobs PBS says are finished (F)
        self.timed_out: set[str] = set()  # jobs --timeout deleted
        self.paths: dict[str, list[str]] = {}  # job -> its output and error files
        self.read: dict[str, bytearray] = {}  # path -> what was read of it
        self.misses: dict[str, int] = {}  # path -> looks that did not find it
        self.complete: set[str] = set()  # paths read to their end (or given up)

    def _following(self, by_job: dict[str, JobResult]) -> bool:
        return not all(self._done(job) for job in by_job)

    def _past_deadline(self, by_job: dict[str, JobResult]) -> float | None:
        if self.timed_out:  # and the grace for their files has passed too
            return None
        self._time_out(by_job)
        return time.monotonic() + self.GRACE * POLL  # for their files

    def _interrupted(self, by_job: dict[str, JobResult]) -> None:
        self._cancel([job for job in by_job if job not in self.final])

    def _done(self, job: str) -> bool:
        return job in self.final and all(p in self.complete for p in self.paths.get(job, []))

    def _argv(self, script: str) -> list[str]:
        return plan.qsub_argv(script, self.qsub)

    def _parse_id(self, out: str) -> str:
        return plan.parse_qsub_id(out)

    def _submitted(self, result: JobResult) -> None:
        result.state = "QUEUED"
        self.options.on_progress(f"{result.script}: submitted job {result.job_id}")

    def _look(self, jobs: list[str]) -> dict[str, str]:
        """One exec on the submit host: each job's qstat answer, and the next bytes of the
        finished jobs' files that are not read to their end."""
        files = [path for job in self.paths if job in self.final for path in self.paths[job]
                 if path not in self.complete]
        ask = {"jobs": jobs, "files": [[path, len(self.read[path])] for path in files]}
        rc, out, err = self.remote.exec(["python3", "-c", PBS_POLL_SCRIPT, json.dumps(ask)])
        if rc:
            raise AitestbedError(f"following the jobs failed: "
                                 f"{err.decode(errors='replace').strip()[-300:]}")
        answer = json.loads(out)
        for path, (exists, data) in zip(files, answer["files"], strict=True):
            chunk = base64.b64decode(data)
            self.read[path] += chunk
            if not exists:
                self.misses[path] += 1
                if self.misses[path] >= self.GRACE:
                    self.complete.add(path)  # never delivered (-k, a deleted job, ...)
            elif len(chunk) < CHUNK:
                self.complete.add(path)
        return {job: text for job, (text, _err) in answer["jobs"].items()}

    def _poll(self, by_job: dict[str, JobResult]) -> None:
        waiting = [job for job in by_job if job not in self.final]
        for job, text in self._look(waiting).items():
            view = plan.pbs_view(plan.qstat_job(text, job))
            if not view.job_state:
                continue  # not answered (the server restarting): the next look
            result = by_job[job]
            if view.state == "RUNNING" != result.state and job not in self.timed_out:
                self.options.on_progress(f"{result.script}: job {job} RUNNING on "
                                         f"{view.exec_host}")
            if job not in self.timed_out:
                result.state, result.reason = view.state, view.reason
                result.duration_s = time.monotonic() - self.started[result.script]
            if view.final:
                self.final.add(job)
                if job not in self.timed_out:
                    result.exit_code = view.exit_code
                paths = list(dict.fromkeys(p for p in (view.output_path, view.error_path)
                                           if p))
                self.paths[job] = paths
                for path in paths:
                    self.read.setdefault(path, bytearray())
                    self.misses.setdefault(path, 0)

    def _finish(self, job: str, result: JobResult) -> None:
        """The job's output (Output_Path, then Error_Path) shown, its tail and figures, and
        where its output file comes back."""
        texts = [self.read[path].decode(errors="replace") for path in self.paths.get(job, [])]
        text = "".join(t if t.endswith("\n") or not t else t + "\n" for t in texts)
        if text:
            self.options.on_output(result.script, text)
        result.tail, result.figures = _tail(text), plan.figures(text)
        workdir = self.workspace.dirs[self.results.index(result)] + "/"
        destination = output_dir_of(self.options, result.script)
        for number, path in enumerate(self.paths.get(job, [])):
            inside = path[len(workdir):] if path.startswith(workdir) else ""
            if not inside and path in self.complete and self.read[path]:
                # -o/-e elsewhere: what was read is its copy
                inside = transfer.safe_name(Path(path).name) or f"output{number}.log"
                destination.mkdir(parents=True, exist_ok=True)
                (destination / inside).write_bytes(bytes(self.read[path]))
            if number == 0 and path == self.paths[job][0]:
                result.output_file = inside

    def _cancel(self, jobs: list[str]) -> None:
        if jobs:
            self.remote.login_shell(shlex.join(["qdel", *jobs]))

    def _time_out(self, by_job: dict[str, JobResult]) -> None:
        """qdel what has not finished; their output files still come back (PBS copies
        them when the deleted job ends)."""
        waiting = {job: r for job, r in by_job.items() if job not in self.final}
        self._cancel(list(waiting))
        for job, result in waiting.items():
            was = ("while RUNNING" if result.state == "RUNNING"
                   else plan.pbs_pending_note(plan.PbsView(result.state, reason=result.reason)))
            self._timed_out(result, was)
            self.timed_out.add(job)


# How a run target's scheduler runs the scripts (host/systems: RunTarget.scheduler).
FOLLOW = {"slurm": SlurmRun, "wsjob": WsjobRun, "pbs": PbsRun}
