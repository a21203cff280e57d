"""What each exercise's `check` looks at: the cluster's real state, read through a probe.

Evidence is what a learner leaves by doing the exercise: sshd's log of their
logins, Slurm's job completion records, the WSJobs of the Cerebras appliance,
files and venvs in their home. Each criterion says whether it is done and, if
not, the next command from the guide (a hint with {placeholders} the catalog
fills in for this cluster and user).
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from aitestbed.cerebras import guide as cs_guide
from aitestbed.cerebras.guide import CS_DATASET, CS_DIR, CS_MODELZOO, CS_VENV, FC_MNIST
from aitestbed.exercises.probe import Probe
from aitestbed.graphcore import guide as gc_guide
from aitestbed.graphcore.guide import GC_EXAMPLES, GC_VENV, MNIST_DIR
from aitestbed.node import guide
from aitestbed.node.guide import LOCAL_PORT, SERVER_PORT
from aitestbed.node.slurm_text import key_values
from aitestbed.sambanova import guide as sn_guide
from aitestbed.sambanova.guide import LENET, LENET_VENV, PEF

SSHD_LOG = "/var/log/sshd.log"
JOBCOMP_LOG = "/var/log/slurm/jobcomp.log"
SND_JOURNAL = "/var/lib/snd/journal.jsonl"
KUBE_AUDIT_LOGS = "/var/log/kubernetes/audit*.log"
HTTP_TIMEOUT = 5.0


@dataclass
class Criterion:
    """One thing the exercise asks for, done or not, with the next step when not."""

    text: str
    done: bool
    hint: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class Nodes:
    """The cluster's nodes, by the role they play for a learner."""

    login: dict[str, list[str]]  # system -> login nodes
    hop: dict[str, list[str]]  # system -> compute nodes users may ssh to from a login node
    controllers: dict[str, list[str]]  # system -> Slurm controllers
    management: list[str]  # Cerebras appliance nodes with an admin kubeconfig
    mfa: frozenset[str] = frozenset()  # login nodes that ask for a passcode


@dataclass
class Context:
    """Who is checked, on which cluster, and how to reach it."""

    probe: Probe
    user: str
    uid: int
    nodes: Nodes
    payload: str | None = None  # the token `start data-transfer` wrote
    payload_name: str = ""
    http_get: Callable[[str], str | None] = field(default=lambda url: http_get(url))

    @property
    def home(self) -> str:
        return f"/home/{self.user}"

    def as_user(self, node: str, command: str) -> tuple[int, str]:
        return self.probe.run(node, command, user=self.user)

    def as_root(self, node: str, command: str) -> tuple[int, str]:
        return self.probe.run(node, command)


def http_get(url: str) -> str | None:
    """The body at url from this machine, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as response:  # noqa: S310 - local
            return response.read().decode(errors="replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None


# evidence -------------------------------------------------------------------
def accepted_line(nodes: Nodes, node: str, user: str, method: str | None = None) -> str:
    """The start of sshd's log line for an accepted login of user on node (by `method`,
    else the node's own: the passcode where it asks for one, the key elsewhere)."""
    how = method or ("keyboard-interactive/pam" if node in nodes.mfa else "publickey")
    return f"Accepted {how} for {user} from "


def accepted_logins(ctx: Context, nodes: list[str], method: str | None = None) -> list[str]:
    """The nodes whose sshd accepted a login of the user (by `method`, else the node's own)."""
    found = []
    for node in nodes:
        pattern = accepted_line(ctx.nodes, node, ctx.user, method)
        rc, _ = ctx.as_root(node, f"grep -qF -- {shlex.quote(pattern)} {SSHD_LOG}")
        if rc == 0:
            found.append(node)
    return found


@dataclass(frozen=True)
class SlurmJob:
    """One line of Slurm's job completion log (jobcomp/filetxt).

    The line does not say how many IPUs or RDUs the job held (sacct does, from
    slurmdbd; the exercises read this log as root, needing no daemon up). A Graphcore
    job that completes had its IPUs
    (poptorch fails without one); for a SambaNova job, its node's snd journal says
    which RDUs it held and what ran on them (`rdu_journal`).
    """

    fields: dict[str, str]

    @property
    def job_id(self) -> str:
        return self.fields.get("JobId", "")

    @property
    def name(self) -> str:
        return self.fields.get("Name", "")

    @property
    def state(self) -> str:
        return self.fields.get("JobState", "")

    @property
    def workdir(self) -> str:
        return self.fields.get("WorkDir", "")

    @property
    def end(self) -> str:
        return self.fields.get("EndTime", "")

    @property
    def node(self) -> str:
        """The job's node (the exercises' jobs run on one)."""
        return self.fields.get("NodeList", "")

    def describe(self) -> str:
        return f"job {self.job_id} ({self.name}) {self.state}"


def parse_jobcomp(text: str) -> list[SlurmJob]:
    """The job completion log's lines (jobcomp/filetxt: one `Key=Value` record a job)."""
    return [SlurmJob(key_values(line)) for line in text.splitlines() if "JobId=" in line]


def owned_jobs(jobs: list[SlurmJob], user: str, uid: int) -> list[SlurmJob]:
    """The jobs of user (jobcomp's `UserId=name(uid)`), in the order they ended."""
    owner = f"{user}({uid})"
    return sorted((j for j in jobs if j.fields.get("UserId") == owner), key=lambda j: j.end)


def slurm_jobs(ctx: Context, system: str) -> list[SlurmJob]:
    """The user's finished jobs on a system's Slurm clusters, in the order they ended."""
    jobs = []
    for node in ctx.nodes.controllers.get(system, []):
        _, out = ctx.as_root(node, f"cat {JOBCOMP_LOG} 2>/dev/null")
        jobs += parse_jobcomp(out)
    return owned_jobs(jobs, ctx.user, ctx.uid)


WSJOBS_COMMAND = "kubectl get wsjobs -n job-operator -o json"


def wsjobs_of(items: list[dict], user: str) -> list[dict]:
    """The WSJobs of user among the API's items, oldest first."""
    mine = [j for j in items
            if (j.get("spec", {}).get("user") or {}).get("username") == user]
    return sorted(mine, key=lambda j: j["metadata"].get("creationTimestamp", ""))


def wsjobs(ctx: Context) -> list[dict]:
    """The user's WSJobs on the Cerebras appliance, oldest first."""
    for node in ctx.nodes.management:
        rc, out = ctx.as_root(node, WSJOBS_COMMAND)
        if rc == 0:
            return wsjobs_of(json.loads(out).get("items", []), ctx.user)
    return []


def last_state(jobs: list, what: str) -> str:
    """A note on the latest attempt, for a hint: what went wrong last time."""
    return f" (your last {what} ended {jobs[-1]})" if jobs else ""


def parse_json_lines(text: str) -> list[dict]:
    """The records of a JSON-lines log (a torn or foreign line is skipped)."""
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def json_lines(ctx: Context, node: str, paths: str) -> list[dict]:
    """The records of a JSON-lines log on a node, read as root (a torn last line is skipped)."""
    _, out = ctx.as_root(node, f"cat {paths} 2>/dev/null")
    return parse_json_lines(out)


def in_home(ctx: Context, node: str, test: str) -> bool:
    """`test` (a shell condition, paths relative to the home) holds, as the user."""
    return ctx.as_user(node, f"cd ~ && {test}")[0] == 0


def release_of(version: str) -> str:
    """2.1.1 of `2.1.1` or of a wheel's local version `2.1.1+1cf4d0632b`."""
    return version.split("+", 1)[0]


def package_version(ctx: Context, node: str, venv: str, package: str) -> str:
    rc, out = ctx.as_user(node, f"{venv}/bin/python -c 'import importlib.metadata as m; "
                                f"print(m.version(\"{package}\"))' 2>/dev/null")
    return out.strip() if rc == 0 else ""


def git_at(ctx: Context, node: str, repo: str, tag: str) -> tuple[bool, bool]:
    """(is a clone, HEAD is the tag's commit)."""
    if ctx.as_user(node, f"test -d {repo}/.git")[0] != 0:
        return False, False
    rc, out = ctx.as_user(node, f"cd {repo} && git rev-parse HEAD \"{tag}^{{commit}}\" "
                                "2>/dev/null")
    heads = out.split()
    return True, rc == 0 and len(heads) == 2 and heads[0] == heads[1]


def first(nodes: dict[str, list[str]], system: str) -> str:
    return (nodes.get(system) or [""])[0]


# first login ----------------------------------------------------------------
def first_login(ctx: Context) -> list[Criterion]:
    logins = [n for nodes in ctx.nodes.login.values() for n in nodes]
    found = accepted_logins(ctx, logins)
    return [Criterion(
        "logged in to a login node over ssh (with a passcode where the node asks for one)",
        bool(found),
        "get your code with `aitestbed --name {cluster} passcode {user}` (it plays "
        "MobilePASS+), then `ssh -F {ssh_config} {login}` and type it at Password:",
        f"sshd on {', '.join(found)} accepted you" if found else "")]


# Cerebras (paths and commands: cerebras/guide.py) ---------------------------------------
def cerebras_setup(ctx: Context) -> list[Criterion]:
    node = first(ctx.nodes.login, "cerebras")
    rc, mode = ctx.as_user(node, "stat -c %a ~")
    navigable = rc == 0 and len(mode.strip()) >= 3 and int(mode.strip()[-1]) & 5 == 5
    venv = in_home(ctx, node, f"test -x {CS_VENV}/bin/python -a -f {CS_VENV}/pyvenv.cfg")
    version = package_version(ctx, node, CS_VENV, "cerebras_pytorch") if venv else ""
    cloned, at_release = git_at(ctx, node, CS_MODELZOO, cs_guide.CS_TAG)
    return [
        Criterion("home directory navigable by the appliance", navigable, "chmod a+xr ~/",
                  f"mode {mode.strip()}" if rc == 0 else ""),
        Criterion(f"a venv at {CS_VENV}", venv,
                  f"mkdir -p {CS_DIR} && cd {CS_DIR} && {cs_guide.CS_MAKE_VENV}"),
        Criterion("cerebras_pytorch 2.1.1 installed in it", release_of(version) == "2.1.1",
                  f"{cs_guide.CS_ACTIVATE} && {cs_guide.CS_INSTALL}"
                  + (f" (found {version})" if version else ""),
                  f"cerebras_pytorch {version}" if version else ""),
        Criterion(f"the modelzoo cloned at {CS_MODELZOO}", cloned,
                  f"cd {CS_DIR} && {cs_guide.CS_CLONE}"),
        Criterion(f"the modelzoo checked out at {cs_guide.CS_TAG}", at_release,
                  f"cd {CS_MODELZOO} && {cs_guide.CS_CHECKOUT} && {cs_guide.CS_REQUIREMENTS}"),
    ]


def jobs_of_type(jobs: list[dict], job_type: str) -> list[dict]:
    return [j for j in jobs if j.get("spec", {}).get("jobType") == job_type]


def phase(job: dict) -> str:
    return (job.get("status") or {}).get("phase", "QUEUEING")


def cerebras_fc_mnist(ctx: Context) -> list[Criterion]:
    node = first(ctx.nodes.login, "cerebras")
    dataset = in_home(ctx, node, f"grep -q {CS_DATASET} {FC_MNIST}/configs/params.yaml")
    jobs = wsjobs(ctx)
    criteria = [Criterion(
        "configs/params.yaml reads the MNIST data set from /software", dataset,
        f"cd {FC_MNIST} and set train_input and eval_input data_dir to "
        f"\"{CS_DATASET}\" in configs/params.yaml")]
    run = f"cd {{fc_mnist}} && export MODEL_DIR=model_dir && {cs_guide.CS_SMOKETEST}"
    for job_type, text in (("compile", "the model compiled on the appliance (a compile WSJob "
                                       "SUCCEEDED)"),
                           ("execute", "the model trained on a CS-2 (an execute WSJob "
                                       "SUCCEEDED)")):
        mine = jobs_of_type(jobs, job_type)
        done = [j for j in mine if phase(j) == "SUCCEEDED"]
        last = [f"{phase(j)}: {(j.get('status') or {}).get('message', '')}".rstrip(": ")
                for j in mine[-1:]]
        criteria.append(Criterion(
            text, bool(done),
            f"{cs_guide.CS_ACTIVATE} && {run}" + last_state(last, f"{job_type} job"),
            done[-1]["metadata"]["name"] if done else ""))
    return criteria


def listings_of(events: list[dict], user: str) -> list[str]:
    """When user listed the wsjobs, among the audit log's events."""
    return sorted(event.get("requestReceivedTimestamp", "") for event in events
                  if event.get("verb") == "list"
                  and (event.get("user") or {}).get("username") == user
                  and (event.get("objectRef") or {}).get("resource") == "wsjobs"
                  and (event.get("responseStatus") or {}).get("code") == 200)


def wsjob_listings(ctx: Context) -> list[str]:
    """When the user listed the wsjobs (`csctl get jobs`), from the API server's audit log."""
    found = []
    for node in ctx.nodes.management:
        found += listings_of(json_lines(ctx, node, KUBE_AUDIT_LOGS), ctx.user)
    return sorted(found)


def cancelled_by(jobs: list[dict], user: str) -> list[dict]:
    """The jobs among `jobs` that user cancelled with csctl."""
    return [j for j in jobs if phase(j) == "CANCELLED"
            and j["spec"].get("cancelReason") == f"canceled by {user}"]


def cerebras_cancel(ctx: Context) -> list[Criterion]:
    listed = wsjob_listings(ctx)
    mine = cancelled_by(wsjobs(ctx), ctx.user)
    return [
        Criterion("listed your jobs with `csctl get jobs`", bool(listed),
                  "on {cer_login}: `csctl get jobs` (the NAME column is what cancel takes)",
                  f"last at {listed[-1]}" if listed else ""),
        Criterion(
            "cancelled one of your jobs with csctl while it was queued or running", bool(mine),
            "start a run in the background (add `AITESTBED_TIME_SCALE=1` before python to run "
            "at the real system's pace), list it with `csctl get jobs`, then "
            "`csctl cancel job <NAME>`",
            f"{mine[-1]['metadata']['name']} CANCELLED" if mine else "")]


# Graphcore (paths and commands: graphcore/guide.py) -------------------------------------
MNIST_WORKDIR = "/tutorials/simple_applications/pytorch/mnist"
POPTORCH_WHEEL = "$POPLAR_SDK_ROOT/poptorch-3.3.0+*.whl"


def graphcore_login(ctx: Context) -> list[Criterion]:
    logins = accepted_logins(ctx, ctx.nodes.login.get("graphcore", []))
    hops = accepted_logins(ctx, ctx.nodes.hop.get("graphcore", []), "publickey")
    return [
        Criterion("logged in to the Graphcore login node", bool(logins),
                  "ssh -F {ssh_config} {gc_login}",
                  f"sshd on {', '.join(logins)}" if logins else ""),
        Criterion("went on from there to an IPU host (the second step)", bool(hops),
                  "on {gc_login}: ssh {gc_node}",
                  f"sshd on {', '.join(hops)}" if hops else ""),
    ]


def graphcore_setup(ctx: Context) -> list[Criterion]:
    node = first(ctx.nodes.hop, "graphcore") or first(ctx.nodes.login, "graphcore")
    venv = in_home(ctx, node, f"test -x {GC_VENV}/bin/python")
    version = package_version(ctx, node, GC_VENV, "poptorch") if venv else ""
    cloned, at_tag = git_at(ctx, node, GC_EXAMPLES, gc_guide.GC_TAG)
    return [
        Criterion(f"a venv at {GC_VENV}", venv,
                  f"mkdir -p ~/venvs/graphcore && {gc_guide.GC_MAKE_VENV}"),
        Criterion("the Poplar SDK 3.3.0's poptorch wheel installed in it",
                  release_of(version) == "3.3.0",
                  f"{gc_guide.GC_ACTIVATE} && POPLAR_SDK_ROOT={gc_guide.GC_SDK_ROOT} && "
                  f"pip install {POPTORCH_WHEEL}"
                  + (f" (found poptorch {version})" if version else ""),
                  f"poptorch {version}" if version else ""),
        Criterion(f"the examples cloned at {GC_EXAMPLES}", cloned,
                  f"mkdir -p ~/graphcore && cd ~/graphcore && {gc_guide.GC_CLONE}"),
        Criterion(f"the examples checked out at {gc_guide.GC_TAG}", at_tag,
                  f"cd {GC_EXAMPLES} && git checkout {gc_guide.GC_TAG}"),
    ]


MNIST_BATCH_JOB = "submit-mnist-poptorch-job.sh"


def mnist_srun_jobs(jobs: list[SlurmJob]) -> list[SlurmJob]:
    """graphcore-mnist's jobs among a user's: srun (named after the program) in the MNIST
    directory."""
    return [j for j in jobs if j.workdir.endswith(MNIST_WORKDIR) and j.name.startswith("python")]


def mnist_batch_jobs(jobs: list[SlurmJob]) -> list[SlurmJob]:
    """graphcore-sbatch's jobs among a user's: the guide's batch script in the MNIST
    directory."""
    return [j for j in jobs if j.workdir.endswith(MNIST_WORKDIR) and j.name == MNIST_BATCH_JOB]


def graphcore_mnist(ctx: Context) -> list[Criterion]:
    jobs = mnist_srun_jobs(slurm_jobs(ctx, "graphcore"))
    done = [j for j in jobs if j.state == "COMPLETED"]
    node = first(ctx.nodes.hop, "graphcore") or first(ctx.nodes.login, "graphcore")
    cached = in_home(ctx, node, "ls ~/tmp/*.popef >/dev/null 2>&1")
    return [
        Criterion("mnist_poptorch.py ran to the end under srun, on an IPU", bool(done),
                  f"{gc_guide.GC_ACTIVATE} && cd {MNIST_DIR} && {gc_guide.MNIST_SRUN}"
                  + last_state([j.describe() for j in jobs], "srun job there"),
                  done[-1].describe() if done else ""),
        Criterion("its compiled graph kept in the executable cache ~/tmp", cached,
                  f"mkdir -p ~/tmp && {gc_guide.GC_CACHE}, then run it again"),
    ]


def graphcore_sbatch(ctx: Context) -> list[Criterion]:
    jobs = mnist_batch_jobs(slurm_jobs(ctx, "graphcore"))
    done = [j for j in jobs if j.state == "COMPLETED"]
    node = first(ctx.nodes.hop, "graphcore") or first(ctx.nodes.login, "graphcore")
    output = in_home(ctx, node, f"grep -q 'Accuracy on test set:' "
                                f"{MNIST_DIR}/mnist-poptorch-output.log")
    return [
        Criterion("submit-mnist-poptorch-job.sh ran to the end as a batch job on an IPU",
                  bool(done),
                  f"cd {MNIST_DIR}, write submit-mnist-poptorch-job.sh (#!/bin/sh, then "
                  f"python mnist_poptorch.py) and `{gc_guide.MNIST_SBATCH}`"
                  + last_state([j.describe() for j in jobs], "batch job"),
                  done[-1].describe() if done else ""),
        Criterion("its output file mnist-poptorch-output.log shows the test accuracy", output,
                  f"cat {MNIST_DIR}/mnist-poptorch-output.log once `squeue` no longer "
                  "lists the job; activate the venv before sbatch so the job inherits it"),
    ]


# SambaNova (paths and commands: sambanova/guide.py) -------------------------------------
LENET_WORKDIR = "/apps/starters/lenet"


LENET_BATCH_JOB = "submit-lenet-job.sh"


def lenet_srun_jobs(jobs: list[SlurmJob], home: str) -> list[SlurmJob]:
    """sambanova-lenet's jobs among a user's: srun (named after the program) in LeNet's
    directory of their home; snd's journal tells run from test."""
    return [j for j in jobs if j.workdir == f"{home}{LENET_WORKDIR}"
            and j.name.startswith("python")]


def lenet_batch_jobs(jobs: list[SlurmJob], home: str) -> list[SlurmJob]:
    """sambanova-sbatch's jobs among a user's: the guide's batch script in LeNet's
    directory."""
    return [j for j in jobs if j.workdir == f"{home}{LENET_WORKDIR}"
            and j.name == LENET_BATCH_JOB]


def journal_by_job(entries: dict[str, list[dict]]) -> dict[tuple[str, str], list[dict]]:
    """snd's journal entries of each node (node -> entries), by (node, job id)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for node, records in entries.items():
        for entry in records:
            found.setdefault((node, str(entry.get("job"))), []).append(entry)
    return found


def rdu_journal(ctx: Context, jobs: list[SlurmJob]) -> dict[tuple[str, str], list[dict]]:
    """What snd recorded for each job, by (node, job id): its RDUs and its sessions."""
    return journal_by_job({node: json_lines(ctx, node, SND_JOURNAL)
                           for node in sorted({j.node for j in jobs if j.node})})


def ran_on_rdus(jobs: list[SlurmJob], journal: dict, command: str) -> SlurmJob | None:
    """The latest completed job with a session whose command line holds `command`."""
    for job in reversed(jobs):
        if job.state == "COMPLETED" and any(
                e.get("event") == "session" and command in str(e.get("command", ""))
                for e in journal.get((job.node, job.job_id), [])):
            return job
    return None


def rdus_held(jobs: list[SlurmJob], journal: dict) -> dict[str, int]:
    """How many RDUs snd reserved for each of the jobs, by job id."""
    return {j.job_id: len(e.get("rdus") or []) for j in jobs
            for e in journal.get((j.node, j.job_id), []) if e.get("event") == "reserve"}


def sambanova_lenet(ctx: Context) -> list[Criterion]:
    node = first(ctx.nodes.hop, "sambanova") or first(ctx.nodes.login, "sambanova")
    copied = in_home(ctx, node, f"test -f {LENET}/lenet.py")
    compiled = in_home(ctx, node, f"test -s {LENET}/{PEF}")
    # srun jobs are named after their program (`python`); snd's journal tells run from test.
    jobs = lenet_srun_jobs(slurm_jobs(ctx, "sambanova"), ctx.home)
    journal = rdu_journal(ctx, jobs)
    criteria = [
        Criterion("the starters copied to ~/apps/starters", copied,
                  guide.one_line(sn_guide.SN_STARTERS)),
        Criterion(f"LeNet compiled to {LENET}/{PEF}", compiled,
                  f"on {{sn_node}}: {LENET_VENV} && cd {LENET} && {sn_guide.LENET_COMPILE}"),
    ]
    for step, command in (("run", sn_guide.LENET_RUN), ("test", sn_guide.LENET_TEST)):
        job = ran_on_rdus(jobs, journal, f"lenet.py {step}")
        criteria.append(Criterion(
            f"`lenet.py {step}` completed on the RDUs under srun", job is not None,
            f"cd {LENET} && {command}"
            + last_state([j.describe() for j in jobs], "srun job"),
            f"{job.describe()} on {job.node}" if job else ""))
    return criteria


def sambanova_sbatch(ctx: Context) -> list[Criterion]:
    jobs = lenet_batch_jobs(slurm_jobs(ctx, "sambanova"), ctx.home)
    done = [j for j in jobs if j.state == "COMPLETED"]
    held = rdus_held(done, rdu_journal(ctx, done))
    two = next((j for j in reversed(done) if held.get(j.job_id, 0) >= 2), None)
    node = first(ctx.nodes.hop, "sambanova") or first(ctx.nodes.login, "sambanova")
    output = in_home(ctx, node, f"grep -q 'Test Accuracy' {LENET}/pef/lenet/output.log")
    return [
        Criterion("submit-lenet-job.sh ran to the end as a batch job", bool(done),
                  f"cd {LENET}, write {sn_guide.LENET_JOB} (#!/bin/sh, then the compile and run "
                  f"lines) and `{sn_guide.LENET_SBATCH}`"
                  + last_state([j.describe() for j in jobs], "batch job"),
                  done[-1].describe() if done else ""),
        Criterion("the batch job held two RDUs (--gres=rdu:2)", two is not None,
                  f"ask Slurm for them: `{sn_guide.LENET_SBATCH}`"
                  + (f" (your last batch job held {held.get(done[-1].job_id, 0)} RDU(s))"
                     if done else ""),
                  f"{two.describe()}: RDUs held on {two.node}: {held[two.job_id]}" if two else ""),
        Criterion("pef/lenet/output.log shows the training run", output,
                  f"cat {LENET}/pef/lenet/output.log once `squeue` no longer lists the job"),
    ]


# data transfer and port forwarding -------------------------------------------
def data_transfer(ctx: Context) -> list[Criterion]:
    text = "the file `start` gave you copied with scp to your home on a login node"
    if ctx.payload is None:
        return [Criterion(text, False,
                          "run `aitestbed --name {cluster} exercise start data-transfer` first")]
    node = next(n for nodes in ctx.nodes.login.values() for n in nodes)
    rc, out = ctx.as_user(node, f"cat ~/{shlex.quote(ctx.payload_name)} 2>/dev/null")
    same = rc == 0 and out.strip() == ctx.payload.strip()
    return [Criterion(text, same,
                      ("~/{payload_name} is there but its content differs: copy it again, "
                       if rc == 0 else "")
                      + "scp -F {ssh_config} {payload} {login}:~/",
                      f"~/{ctx.payload_name} matches" if same else "")]



def _listener(ctx: Context, node: str) -> str:
    """The user's process listening on SERVER_PORT of node, or ''.

    ss shows a socket's process only to its owner (and to root with ptrace rights,
    which a container's root lacks): run as the user, a pid means it is theirs.
    """
    rc, out = ctx.as_user(node, f"ss -Hltnp 'sport = :{SERVER_PORT}' 2>/dev/null")
    found = re.search(r"pid=(\d+)", out)
    return found.group(1) if rc == 0 and found else ""


def port_forwarding(ctx: Context) -> list[Criterion]:
    nodes = ctx.nodes.hop.get("sambanova", [])
    serving = [n for n in nodes if _listener(ctx, n)]
    criteria = [Criterion(
        f"a server of yours (TensorBoard) listening on port {SERVER_PORT} of a "
        "SambaNova node", bool(serving),
        f"on {{sn_node}}: cd ~ && {guide.SERVER}",
        f"on {serving[0]}" if serving else "")]
    local = ctx.http_get(f"http://127.0.0.1:{LOCAL_PORT}/")
    remote = None
    if serving:
        _, remote = ctx.as_root(serving[0], "python3 -c 'import urllib.request as u; print(u."
                                            f"urlopen(\"http://localhost:{SERVER_PORT}/\", "
                                            "timeout=5).read().decode(), end=\"\")'")
    through = local is not None and remote is not None and local == remote
    criteria.append(Criterion(
        f"http://localhost:{LOCAL_PORT} on this machine reaches it through ssh", through,
        f"ssh -F {{ssh_config}} -N -f -L localhost:{LOCAL_PORT}:localhost:{LOCAL_PORT} "
        f"{{sn_login}}, then on {{sn_login}}: ssh -N -f -L "
        f"localhost:{LOCAL_PORT}:localhost:{SERVER_PORT} {{sn_node}}"
        + (" (something answers there, but not your server)" if local is not None else ""),
        f"127.0.0.1:{LOCAL_PORT} serves what {serving[0]} serves" if through else ""))
    return criteria
