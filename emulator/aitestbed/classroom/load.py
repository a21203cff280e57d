"""Other users' jobs on each system (`aitestbed load start [--level light|busy]`, `load stop`).

At ALCF a learner is never alone: squeue lists other people's jobs, some running on the
IPUs or RDUs for hours, some pending with `(Resources)` or `(Priority)`, and `csctl get
jobs` shows someone's training on the CS-2. `load start` makes that happen here with
ordinary accounts and ordinary jobs:

- load users load01.. (uids above the learners') are onboarded by one run of the account
  playbook (room.onboard), and recorded in classroom/load.json (roster.Load), which the
  instructor's page reads to mark them;
- on each Slurm cluster (Graphcore's POD, SambaNova's SN30 and SN10) they submit batch
  jobs from the node a user submits from (`sbatch` in a login shell, as the user): each
  job holds its IPUs (`--ipus=N`) or RDUs (`--gres=rdu:N`) for a few minutes, asleep,
  and at its end submits itself again, so the load lasts until `load stop`;
- on the Cerebras CS-2 they run the guide's fc_mnist (`python run.py CSX` in the guide's
  venv, set up as the guide does) one run after another, in the background on the login
  node, with AITESTBED_TIME_SCALE at 1 or 2: each run's compile and execute wsjobs take
  the documented wall time or twice it, so the CS-2 is held for minutes.

Levels (plan(), pure):
  light  about half of each Slurm cluster's accelerators held, and one job waiting for the
         whole cluster (`(Resources)`); light jobs are submitted --nice, so everyone
         else's jobs start before them. One fc_mnist run on the CS-2 every few minutes.
  busy   every accelerator held, and a queue of three more jobs (`(Resources)`, then
         `(Priority)`) at everyone's priority: a learner's job waits its turn. Two users'
         fc_mnist runs back to back on the CS-2 (the cluster runs one execute job at a time).

`load stop` cancels every load job (Slurm, wsjobs), kills what the load users still run
on any node, offboards them (room.offboard) and removes their homes and load.json.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from aitestbed.cerebras import guide as cs_guide
from aitestbed.cerebras.cs3 import inventory_settings
from aitestbed.classroom import room as classroom_room
from aitestbed.classroom import roster
from aitestbed.classroom.roster import ClassroomError, Load
from aitestbed.exercises.probe import NodeProbe, Probe
from aitestbed.host.cluster import Cluster
from aitestbed.host.inventory import Topology
from aitestbed.host.state import ClusterState
from aitestbed.node import guide
from aitestbed.node.login import as_login_line

LEVELS = ("light", "busy")
PREFIX = "load"
USERS = {"light": 4, "busy": 6}  # at most; fewer when the cluster has fewer jobs to share
# light: the load's jobs yield to everyone's (larger nice, lower priority); the job that
# waits for the whole cluster yields to the load's other jobs too, so it keeps waiting.
NICE_LIGHT = 100
NICE_WAITING = 200
# Minutes each run of a Slurm job holds its accelerators (cycled through by the jobs).
MINUTES = {"light": (6, 8, 5, 9, 7), "busy": (4, 5, 3, 6)}
SPARE_MINUTES = 5  # --time is the run plus this, as users round up
# Cerebras: the runs' AITESTBED_TIME_SCALE and the pause between one run and the next.
CS_TIME_SCALE = {"light": 1, "busy": 2}
CS_PAUSE = {"light": 180, "busy": 10}
CS_RELEASE = "2.1.1"  # the release whose guide workflow (cs_guide.CS_SETUP) the load follows
GRES = {"graphcore": "ipu", "sambanova": "rdu"}
JOBS_DIR = "jobs"  # in the load user's home: the batch scripts and their logs
CS_SCRIPT = "cerebras-runs.sh"
FORMER = "load-users.json"  # in classroom/: every user the load made (name -> uid)
CS_LOG = "cerebras-runs.log"

# Names of the jobs, as people's work looks in squeue and csctl.
NAMES = {
    "graphcore": ("bert-large-pretrain", "gpt2-medium-ft", "resnet50-imagenet",
                  "vit-base-finetune", "gnn-ogbn-arxiv", "mnist-sweep", "gpt-j-infer",
                  "yolov4-coco"),
    "sn30": ("Gpt1.5B_run.sh", "llama2_7b_ft.sh", "bert_large_pretrain.sh",
             "unet_train.sh", "gpt13b_compile.sh", "lenet_sweep.sh", "transformer_lm.sh"),
    "sn10": ("unet_batch.sh", "lenet_sweep.sh", "bert_base_ft.sh", "logreg_hpo.sh",
             "gpt2_small.sh", "resnet_compile.sh"),
    "cerebras": ("mnist_lr_sweep", "fc_mnist_hpo", "mnist_baseline"),
}


# what the cluster holds ---------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmCluster:
    """One Slurm cluster's accelerators: per compute node, and where its users submit."""

    name: str  # graphcore, sn30, sn10
    system: str  # graphcore, sambanova
    gres: str  # ipu, rdu
    per_node: tuple[int, ...]  # accelerators of each compute node
    submit: str  # the node its users submit from (a login node, else a compute node)

    @property
    def total(self) -> int:
        return sum(self.per_node)


@dataclass(frozen=True)
class Appliance:
    """The Cerebras cluster: its systems, how many execute jobs run at once, its release."""

    systems: int
    max_execute: int
    release: str
    login: str


@dataclass(frozen=True)
class Capacity:
    slurm: tuple[SlurmCluster, ...] = ()
    cerebras: Appliance | None = None
    notes: tuple[str, ...] = ()  # what the load leaves alone, and why


def capacity(topology: Topology) -> Capacity:
    """What the inventory says each system holds (the GRES counts of its Slurm nodes, the
    CS-2 systems), and where its users submit."""
    slurm: list[SlurmCluster] = []
    notes: list[str] = []
    for system in ("graphcore", "sambanova"):
        gres = GRES[system]
        clusters: dict[str, list[int]] = {}
        for node in topology.nodes:
            count = (topology.hostvars[node.name].get("slurm_gres") or {}).get(gres)
            if node.system == system and node.slurm_cluster and count:
                clusters.setdefault(node.slurm_cluster, []).append(int(count))
        for name, per_node in clusters.items():
            slurm.append(SlurmCluster(name=name, system=system, gres=gres,
                                      per_node=tuple(per_node),
                                      submit=_submit_node(topology, system, name)))
    cerebras = None
    systems = [n for n in topology.nodes if n.system == "cerebras" and n.node_class == "cs2"]
    managers = [n for n in topology.nodes if "kube-apiserver" in n.services]
    logins = [n for n in topology.nodes if n.system == "cerebras" and n.node_class == "login"]
    if systems and managers and logins:
        settings = inventory_settings(topology.hostvars[managers[0].name])
        if settings["release"] == CS_RELEASE:
            cerebras = Appliance(systems=len(systems), max_execute=settings["max_execute"],
                                 release=settings["release"], login=logins[0].name)
        else:
            notes.append(f"cerebras: the load runs the Release {CS_RELEASE} guide's fc_mnist; "
                         f"this cluster runs Release {settings['release']}: no load there")
    if any(n.system == "groq" for n in topology.nodes):
        notes.append("groq: no load (the GroqRack's PBS queue is left alone)")
    return Capacity(slurm=tuple(slurm), cerebras=cerebras, notes=tuple(notes))


def _submit_node(topology: Topology, system: str, cluster: str) -> str:
    """The login node that submits to `cluster`, else its first compute node users reach
    (SambaNova's SN10 jobs are submitted from sm-01, as the guide does)."""
    compute = [n for n in topology.nodes if n.slurm_cluster == cluster
               and n.node_class not in ("slurmctld", "login")]
    logins = [n for n in topology.nodes if n.system == system and n.node_class == "login"
              and n.slurm_cluster in ("", cluster)]
    # A login node without slurm_cluster submits to its system's only cluster.
    clusters = {n.slurm_cluster for n in topology.nodes if n.system == system and n.slurm_cluster}
    for node in logins:
        if node.slurm_cluster == cluster or len(clusters) == 1:
            return node.name
    reachable = [n for n in compute if n.ssh_allow_groups]
    return (reachable or compute)[0].name


# what the load runs (pure) --------------------------------------------------------------
@dataclass(frozen=True)
class LoadJob:
    """One of the load's jobs. Slurm: a batch job holding `count` accelerators on each of
    `nodes` nodes for `minutes`, submitting itself again at its end. Cerebras: fc_mnist
    runs on `count` CS-2 systems one after another, `pause` seconds apart."""

    system: str  # graphcore, sambanova, cerebras
    where: str  # the Slurm cluster (graphcore, sn30, sn10), or "cerebras"
    name: str  # the job's name (Slurm), its label name=... (wsjobs)
    count: int  # IPUs or RDUs per node; CS-2 systems (--num_csx)
    submit: str  # the node the user submits from
    user: str = ""
    gres: str = ""
    nodes: int = 1
    minutes: int = 0
    nice: int = 0
    waits: bool = False  # planned to wait in the queue from the start
    time_scale: float = 0
    pause: int = 0

    @property
    def held(self) -> int:
        return self.count * self.nodes

    def request(self) -> list[str]:
        """The sbatch options of a Slurm job (its #SBATCH lines)."""
        options = [f"--job-name={self.name}"]
        if self.nodes > 1:
            options.append(f"--nodes={self.nodes}")
        # Graphcore's IPUs are asked for with --ipus (--gres=ipu is refused there).
        options.append(f"--ipus={self.count}" if self.gres == "ipu"
                       else f"--gres={self.gres}:{self.count}")
        options.append(f"--time={_hhmm(self.minutes + SPARE_MINUTES)}")
        if self.nice:
            options.append(f"--nice={self.nice}")
        return options


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise ClassroomError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


def _sizes(per_node: int, level: str, total: int, nodes: int) -> tuple[list[int], list[int]]:
    """The accelerators of the running jobs and of the waiting ones, on one Slurm cluster.

    Sizes are halves and quarters of a node (each at least 1), in decreasing order, so
    the running ones fill nodes without leaving holes however Slurm places them."""
    half, quarter = max(per_node // 2, 1), max(per_node // 4, 1)
    if level == "light":
        target, running = total // 2, []
        for size in _cycle((quarter, half, quarter)):
            if sum(running) >= max(target, 1):
                break
            running.append(min(size, max(target - sum(running), 1)))
        return sorted(running, reverse=True), []
    running = []
    for node in range(nodes):
        running += [half, per_node - half] if node % 2 == 0 else \
            [half, quarter, per_node - half - quarter]
    return sorted((s for s in running if s), reverse=True), [per_node, half, quarter]


def _cycle(values: tuple):
    while True:
        yield from values


def _names(names: tuple[str, ...]):
    """The names in turn; a second round adds _2 before the extension, and so on, so no two
    jobs of a cluster share a name (nor a script)."""
    round_ = 1
    while True:
        for name in names:
            stem, dot, ext = name.rpartition(".") if name.endswith(".sh") else (name, "", "")
            yield name if round_ == 1 else f"{stem}_{round_}{dot}{ext}"
        round_ += 1


def plan(level: str, systems_present: list[str], capacity: Capacity,
         prefix: str = PREFIX) -> list[LoadJob]:
    """The load's jobs at `level` on the systems present, their users assigned."""
    check_level(level)
    jobs: list[LoadJob] = []
    minutes = _cycle(MINUTES[level])
    for cluster in capacity.slurm:
        if cluster.system not in systems_present or not cluster.per_node:
            continue
        per_node, nodes = max(cluster.per_node), len(cluster.per_node)
        names = _names(NAMES.get(cluster.name) or NAMES["sn30"])
        running, waiting = _sizes(per_node, level, cluster.total, nodes)
        common = {"system": cluster.system, "where": cluster.name, "submit": cluster.submit,
                  "gres": cluster.gres}
        nice = NICE_LIGHT if level == "light" else 0
        jobs += [LoadJob(name=next(names), count=size, minutes=next(minutes), nice=nice,
                         **common) for size in running]
        if level == "light":  # one job for the whole cluster: it waits for Resources
            jobs.append(LoadJob(name=next(names), count=per_node, nodes=nodes,
                                minutes=next(minutes), nice=NICE_WAITING, waits=True,
                                **common))
        jobs += [LoadJob(name=next(names), count=size, minutes=next(minutes), waits=True,
                         **common) for size in waiting]
    appliance = capacity.cerebras
    if appliance is not None and "cerebras" in systems_present:
        runs = 1 if level == "light" else 2
        for index in range(runs):
            jobs.append(LoadJob(system="cerebras", where="cerebras",
                                name=NAMES["cerebras"][index % len(NAMES["cerebras"])],
                                count=1 if index == 0 else appliance.systems,
                                submit=appliance.login, time_scale=CS_TIME_SCALE[level],
                                pause=CS_PAUSE[level]))
    users = load_names(prefix, min(USERS[level], len(jobs)))
    return [replace(job, user=users[i % len(users)]) for i, job in enumerate(jobs)]


def load_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(1, count + 1)]


def user_systems(jobs: list[LoadJob]) -> dict[str, list[str]]:
    """Each load user's systems (those of its jobs), in the jobs' order."""
    found: dict[str, list[str]] = {}
    for job in jobs:
        systems = found.setdefault(job.user, [])
        if job.system not in systems:
            systems.append(job.system)
    return found


def choose_uids(names: list[str], users: dict[str, dict], projects: dict[str, dict],
                system_groups: dict[str, int], former: dict[str, int]) -> dict[str, int]:
    """name -> uid for the load users. A name the load made before (`former`, kept in
    load-users.json) gets its uid again; a new one a free uid of the learners' range. A
    name the cluster has for anyone else (a user, even offboarded, or a group) is refused:
    the load never takes over someone's account or home."""
    for name in names:
        if name in users and name not in former:
            raise ClassroomError(f"the user {name!r} already exists on this cluster and was "
                                 "not made by `load start`: the load's users are named "
                                 f"{PREFIX}01..; the load cannot run beside that account")
        if name in projects or name in system_groups:
            raise ClassroomError(f"{name!r} is the name of a group on this cluster: the load's "
                                 "users cannot be made")
    taken = {int(u["uid"]) for u in users.values()} | {int(u.get("gid", u["uid"]))
                                                       for u in users.values()}
    taken |= {int(p["gid"]) for p in projects.values()} | set(system_groups.values())
    uids = {name: int(users[name]["uid"]) for name in names if name in users}
    fresh = roster.free_ids(taken, len(names) - len(uids)) if len(uids) < len(names) else []
    return {name: uids[name] if name in uids else fresh.pop(0) for name in names}


def _former_path(state_root: Path) -> Path:
    return roster.room_dir(state_root) / FORMER


def former_users(state_root: Path) -> dict[str, int]:
    """The users `load start` has made on this cluster (name -> uid), stopped or not."""
    try:
        data = json.loads(_former_path(state_root).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ClassroomError(f"cannot read {_former_path(state_root)}: {err}") from None
    return {str(k): int(v) for k, v in data.items()}


def _remember(state_root: Path, users: dict[str, int]) -> None:
    path = _former_path(state_root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**former_users(state_root), **users}, indent=2,
                              sort_keys=True) + "\n")
    tmp.replace(path)


# what the users type ---------------------------------------------------------------------
def script_path(job: LoadJob) -> str:
    return f"/home/{job.user}/{JOBS_DIR}/{job.where}/{job.name}.sbatch"


def job_script(job: LoadJob) -> str:
    """A batch script that holds its accelerators for job.minutes, then submits itself
    again (the next run of the same work); `load stop` cancels it."""
    path = script_path(job)
    return "\n".join([
        "#!/bin/bash", *(f"#SBATCH {o}" for o in job.request()),
        f"#SBATCH --output={path.removesuffix('.sbatch')}.log", "#SBATCH --open-mode=append",
        f"# aitestbed load: holds its {job.gres.upper()}s for {job.minutes} minutes, then "
        "queues its next run (until `aitestbed load stop`).",
        'echo "$(date "+%F %T") run $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
        f"sleep {job.minutes * 60}",
        f"sbatch {path}", ""])


def submit_command(job: LoadJob) -> str:
    """What the user types (in a login shell): write the script, submit it, print the id."""
    path = script_path(job)
    return (f"mkdir -p {path.rpartition('/')[0]} && cat > {path} <<'EOF_LOAD'\n"
            f"{job_script(job)}EOF_LOAD\nsbatch --parsable {path}")


def cerebras_script(job: LoadJob) -> str:
    """The guide's set-up (once), then fc_mnist on the CS-2, run after run."""
    run = cs_guide.cs_run(job.name).replace("--num_csx=1", f"--num_csx={job.count}")
    return "\n".join([
        "#!/bin/bash",
        f"# aitestbed load: fc_mnist on the CS-2 (AITESTBED_TIME_SCALE={job.time_scale:g}), "
        f"a run {job.pause} s after the last one ended, until `aitestbed load stop`.",
        "cd ~",
        f"if ! [ -x {cs_guide.CS_VENV}/bin/python ] || ! [ -d {cs_guide.CS_MODELZOO}/.git ]; then",
        "(", guide.script("set -e", cs_guide.CS_SETUP, quiet=True), ") || exit 1",
        "fi",
        cs_guide.CS_ACTIVATE,
        f"cd {cs_guide.FC_MNIST}",
        cs_guide.CS_SET_DATA_DIR,
        "while :; do",
        "  export MODEL_DIR=model_dir",
        '  rm -rf "$MODEL_DIR"',
        f"  AITESTBED_TIME_SCALE={job.time_scale:g} {run}",
        f"  sleep {job.pause}",
        "done", ""])


def cerebras_command(job: LoadJob) -> str:
    """Write the runs' script and start it in the background, as a user does with nohup;
    print its pid."""
    path = f"/home/{job.user}/{CS_SCRIPT}"
    return (f"cat > {path} <<'EOF_LOAD'\n{cerebras_script(job)}EOF_LOAD\n"
            f"setsid nohup bash {path} > /home/{job.user}/{CS_LOG} 2>&1 < /dev/null &\n"
            "echo $!")


def as_user(user: str, command: str) -> str:
    """`command` in the user's login shell, run by root on a node (`runuser -l`)."""
    return as_login_line(user, command)


# the requests -------------------------------------------------------------------------------
def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class LoadRun:
    """The load of one cluster, as the CLI drives it."""

    cluster: str
    probe: Probe | None = None
    state: ClusterState = field(init=False)
    topology: Topology = field(init=False)

    def __post_init__(self) -> None:
        opened = Cluster.open(self.cluster)
        self.state, self.topology = opened.state, opened.topology
        if self.probe is None:
            self.probe = NodeProbe(self.cluster)

    def _run(self, node: str, command: str, what: str) -> str:
        rc, out = self.probe.run(node, command)
        if rc:
            raise ClassroomError(f"{what} failed on {node}: {out.strip()[-300:]} (`aitestbed "
                                 f"--name {self.cluster} load stop` removes what was started)")
        return out

    def start(self, level: str, on_step: Callable[[str], None] = lambda s: None) -> Load:
        check_level(level)
        root = self.state.root
        with roster.exclusive(root, "load start"):
            running = roster.load_load(root)
            if running is not None:
                raise ClassroomError(
                    f"the load is already running on cluster {self.cluster!r} at level "
                    f"{running.level} (since {running.started}, users "
                    f"{_span(list(running.users))}): `aitestbed --name {self.cluster} load stop`"
                    " first")
            found = capacity(self.topology)
            jobs = plan(level, list(self.topology.systems), found)
            for note in found.notes:
                on_step(note)
            if not jobs:
                raise ClassroomError(f"cluster {self.cluster!r} has no Graphcore, SambaNova or "
                                     "Cerebras CS-2 system to put a load on")
            for node in sorted({job.submit for job in jobs}):
                self._run(node, "true", "reaching the node")  # the cluster is up
            systems = user_systems(jobs)
            registry = self.state.registry()
            uids = choose_uids(list(systems), registry.users, registry.projects,
                               dict(self.topology.common_vars["system_groups"]),
                               former_users(root))
            load = Load(level=level, users=uids, started=_now(), jobs={})
            _remember(root, uids)
            roster.save_load(root, load)  # from here `load stop` removes what was made
            on_step(f"onboarding {len(uids)} load users ({_span(list(uids))}) with one run of "
                    "the onboarding playbook")
            classroom_room.onboard(self.state, {
                "accounts": [{"name": name, "uid": uid, "systems": systems[name]}
                             for name, uid in uids.items()], "projects": []}, list(uids))
            slurm = [job for job in jobs if job.system != "cerebras"]
            if slurm:
                on_step(f"submitting {len(slurm)} Slurm jobs as the load users")
            for job in slurm:
                out = self._run(job.submit, as_user(job.user, submit_command(job)),
                                f"{job.user}'s sbatch of {job.name}")
                load.jobs.setdefault(job.where, []).append(out.strip().splitlines()[-1]
                                                           .split(";")[0])
                roster.save_load(root, load)
            for job in (j for j in jobs if j.system == "cerebras"):
                on_step(f"starting {job.user}'s fc_mnist runs on the CS-2 (the guide's set-up "
                        "first, in the background)")
                out = self._run(job.submit, as_user(job.user, cerebras_command(job)),
                                f"starting {job.user}'s fc_mnist runs")
                load.jobs.setdefault("cerebras", []).append(
                    f"{job.user}: fc_mnist runs name={job.name} (pid "
                    f"{out.strip().splitlines()[-1]} on {job.submit})")
                roster.save_load(root, load)
            return load

    def stop(self, on_step: Callable[[str], None] = lambda s: None) -> dict:
        root = self.state.root
        with roster.exclusive(root, "load stop"):
            load = roster.load_load(root)
            if load is None:
                return {"stopped": False,
                        "message": f"no load is running on cluster {self.cluster!r}"}
            users = list(load.users)
            on_step(f"cancelling the jobs of {_span(users)} and ending their processes")
            cancelled = self._cancel_slurm(users)
            uids = ",".join(str(uid) for uid in load.users.values())
            for node in self.topology.nodes:  # the fc_mnist loops, a run's last sbatch, ...
                self.probe.run(node.name, f"pkill -KILL -U {uids}; true")
            for name, ids in self._cancel_slurm(users).items():  # submitted meanwhile
                cancelled[name] |= ids
            wsjobs = self._cancel_wsjobs(users)
            # Their homes hold only the load's scripts, logs and venvs: removed (before the
            # offboarding, which would otherwise archive them when the policy says so).
            node = classroom_room.home_node(self.topology)
            self._run(node, " && ".join(f"rm -rf --one-file-system /home/{u}" for u in users),
                      "removing the load users' homes")
            on_step(f"offboarding {_span(users)} with one run of the offboarding playbook")
            classroom_room.offboard(self.state, users)
            roster.save_load(root, None)
            counts = {name: len(ids) for name, ids in cancelled.items()}
            return {"stopped": True, "level": load.level, "users": users,
                    "slurm_jobs": counts, "wsjobs": wsjobs,
                    "message": stop_message(load.level, users, counts, wsjobs)}

    def _cancel_slurm(self, users: list[str]) -> dict[str, set[str]]:
        """Cancel the users' Slurm jobs on each controller: cluster -> the jobs' ids."""
        cancelled = {}
        listed = ",".join(users)
        for node in self.topology.nodes:
            if node.node_class != "slurmctld":
                continue
            rc, out = self.probe.run(node.name, f"squeue -h -u {listed} -o %i")
            ids = out.split() if rc == 0 else []
            if ids:
                self.probe.run(node.name, " ; ".join(f"scancel --user {u}" for u in users))
            cancelled[node.slurm_cluster] = set(ids)
        return cancelled

    def _cancel_wsjobs(self, users: list[str]) -> int:
        count = 0
        for node in self.topology.nodes:
            if "kube-apiserver" in node.services:
                rc, out = self.probe.run(node.name, "/opt/aitestbed/venv/bin/python -m "
                                         "aitestbed.cerebras.cancel_wsjobs " + " ".join(users))
                count += out.count("cancelled")
        return count


def start(cluster: str, level: str, on_step: Callable[[str], None] = lambda s: None,
          probe: Probe | None = None) -> Load:
    """`aitestbed load start --level LEVEL`: the load users onboarded, their jobs
    submitted; the Load recorded in load.json. A ClassroomError says why not."""
    return LoadRun(cluster, probe).start(level, on_step)


def stop(cluster: str, on_step: Callable[[str], None] = lambda s: None,
         probe: Probe | None = None) -> dict:
    """`aitestbed load stop`. {"stopped": False, "message": ...} when no load runs; else
    {"stopped": True, "level", "users", "slurm_jobs": {cluster: n}, "wsjobs": n,
    "message"}."""
    return LoadRun(cluster, probe).stop(on_step)


# what the CLI prints ---------------------------------------------------------------------
def describe(load: Load) -> list[str]:
    """Lines saying what the load runs (from load.json)."""
    lines = [f"load at level {load.level} since {load.started}: users "
             f"{_span(list(load.users))}"]
    for where, ids in load.jobs.items():
        if where == "cerebras":
            lines += [f"  cerebras: {entry}" for entry in ids]
        else:
            lines.append(f"  {where}: {len(ids)} Slurm jobs submitted ({_span(ids)}), each "
                         "submitting its next run at its end")
    return lines


def stop_message(level: str, users: list[str], cancelled: dict[str, int], wsjobs: int) -> str:
    jobs = ", ".join(f"{n} on {where}" for where, n in cancelled.items()) or "none"
    return (f"stopped the {level} load: Slurm jobs cancelled: {jobs}; wsjobs cancelled: "
            f"{wsjobs}; users {_span(users)} offboarded and their homes removed")


def _span(names: list[str]) -> str:
    if not names:
        return "none"
    return f"{names[0]}..{names[-1]}" if len(names) > 2 else ", ".join(names)
