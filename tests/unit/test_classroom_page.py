"""The instructor's page: what it reads (one root command per node, samples recorded on a
mini cluster), what it decides per learner and per system, how it renders (Flask's test
client) and how `serve` refuses a port in use."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from dataclasses import dataclass, field

import pytest
from aitestbed.classroom import snapshot, web
from aitestbed.classroom.roster import Load, Room, save_load, save_room
from aitestbed.classroom.snapshot import (
    FAILED,
    NOT_STARTED,
    PASSED,
    STARTED,
    Layout,
    Raw,
    Watcher,
    collect,
    summarize,
)
from aitestbed.exercises import catalog
from aitestbed.exercises.checks import Nodes
from aitestbed.host.errors import AitestbedError
from aitestbed.host.state import ClusterRecord, ClusterState

pytestmark = pytest.mark.unit

USER, UID = "learner", 10001
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
EXERCISES = catalog.available(list(LAYOUT.systems))
MNIST = f"/home/{USER}/graphcore/examples/tutorials/simple_applications/pytorch/mnist"
LENET = f"/home/{USER}/apps/starters/lenet"
US = snapshot.US

# Recorded on a mini cluster (`aitestbed --name cls`), trimmed to a few lines each. ---------
CLOCK = "1795745940"
SSHD_LOGIN = ("Accepted keyboard-interactive/pam for learner from 172.19.0.1 port 38822 ssh2\r\n")
SSHD_HOP = ("Accepted publickey for learner from 172.18.0.6 port 43072 ssh2: ED25519 "
            "SHA256:5Eb4fQKJ+zXcu5zNxfIa6CWRTjN/QuxxhG5orgphEHg\r\n")
PS = """\
    710 /usr/bin/tini -- /opt/aitestbed/venv/bin/aitestbed-node-init
    707 sshd: /usr/sbin/sshd -D -E /var/log/sshd.log [listener] 0 of 10-100 startups
    344 sshd: learner [priv]
    341 sshd: learner@notty
      0 ps -eo etimes=,args=
"""


def jobcomp(job_id: int, name: str, state: str, workdir: str, node: str = "gc-poplar-02",
            end: str = "2026-11-27T02:17:38", exit_code: str = "0:0", user: str = USER,
            uid: int = UID, gres: str = "gres/ipu=1") -> str:
    return (f"JobId={job_id} UserId={user}({uid}) GroupId={user}({uid}) Name={name} "
            f"JobState={state} Partition=p64 TimeLimit=UNLIMITED StartTime=2026-11-27T02:17:36 "
            f"EndTime={end} NodeList={node} NodeCnt=1 ProcCnt=1 WorkDir={workdir} "
            f"ReservationName= Tres=cpu=1,mem=515000M,node=1,billing=1,{gres} Account= "
            "QOS=normal WcKey= Cluster=unknown SubmitTime=2026-11-27T02:17:36 "
            f"EligibleTime=2026-11-27T02:17:36 DerivedExitCode={exit_code} "
            f"ExitCode={exit_code} \n")


GC_JOBCOMP = (
    jobcomp(1, "python3", "COMPLETED", MNIST)
    + jobcomp(2, "python3", "FAILED", MNIST, end="2026-11-27T02:17:39", exit_code="3:0"))


def squeue(job_id: int, state: str, reason: str, name: str, workdir: str, node: str = "",
           user: str = USER, uid: int = UID, partition: str = "p64",
           gres: str = "gres:ipu:16") -> str:
    return US.join((str(job_id), user, str(uid), state, reason, partition, gres, node, name,
                    workdir)) + "\n"


GC_SQUEUE = (squeue(4, "PENDING", "Resources", "wrap", f"/home/{USER}")
             + squeue(3, "RUNNING", "None", "submit-mnist-poptorch-job.sh", MNIST,
                      "gc-poplar-01"))
GC_NODES = (
    "NodeName=gc-poplar-01 Arch=x86_64 CoresPerSocket=64  CPUAlloc=1 CPUEfctv=128 CPUTot=128 "
    "CPULoad=5.63 AvailableFeatures=(null) ActiveFeatures=(null) Gres=ipu:16 "
    "NodeAddr=gc-poplar-01 NodeHostName=gc-poplar-01 Version=22.05.8 OS=Linux 6.18.44-fc-v595 "
    "#1 SMP PREEMPT_DYNAMIC @0  RealMemory=515000 AllocMem=0 FreeMem=18878 Sockets=2 Boards=1 "
    "State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=100 Owner=N/A MCS_label=N/A Partitions=p64  "
    "BootTime=2026-11-26T19:02:02 SlurmdStartTime=2026-11-27T02:12:54 "
    "LastBusyTime=2026-11-27T02:13:01 CfgTRES=cpu=128,mem=515000M,billing=128,gres/ipu=16 "
    "AllocTRES=cpu=1,gres/ipu=16 CapWatts=n/a CurrentWatts=0 AveWatts=0\n"
    "NodeName=gc-poplar-02 Arch=x86_64 CoresPerSocket=64  CPUAlloc=0 CPUEfctv=128 CPUTot=128 "
    "Gres=ipu:16 NodeAddr=gc-poplar-02 State=IDLE ThreadsPerCore=1 Partitions=p64 "
    "CfgTRES=cpu=128,mem=515000M,billing=128,gres/ipu=16 AllocTRES= CapWatts=n/a\n")
SN30_JOBCOMP = (
    jobcomp(2, "python3", "COMPLETED", LENET, node="sn30-r1-h1", gres="gres/rdu=1")
    + jobcomp(1, "submit-lenet-job.sh", "COMPLETED", LENET, node="sn30-r1-h1",
              end="2026-11-27T02:18:03", gres="gres/rdu=2"))
SN30_SQUEUE = (squeue(4, "PENDING", "Resources", "wrap", f"/home/{USER}",
                      partition="sambanova", gres="gres:rdu:8")
               + squeue(3, "RUNNING", "None", "wrap", f"/home/{USER}", "sn30-r1-h1",
                        partition="sambanova", gres="gres:rdu:8"))
SN30_NODES = ("NodeName=sn30-r1-h1 Arch=x86_64 CoresPerSocket=64 CPUAlloc=1 Gres=rdu:8 "
              "State=MIXED Partitions=sambanova AllocTRES=cpu=1,gres/rdu=8\n")
SN10_NODES = ("NodeName=sm-01 Gres=rdu:8 State=IDLE AllocTRES=\n"
              "NodeName=sm-02 Gres=rdu:8 State=DOWN* AllocTRES=\n")


def snd(job: int, event: str = "reserve", rdus=(0, 1), command: str = "") -> str:
    entry = {"at": "2026-11-27T02:18:02", "event": event, "job": str(job), "user": USER}
    if event == "reserve":
        entry["rdus"] = list(rdus)
    else:
        entry.update(command=command, tiles=["/XRDU_0/RDU_0/TILE_0"])
    return json.dumps(entry) + "\n"


SN30_JOURNAL = snd(1, rdus=(0, 1)) + snd(2, rdus=(2,))


def wsjob(name: str, job_type: str, phase: str | None, user: str = USER,
          created: str = "2026-11-27T02:19:55Z", systems=(), message: str = "",
          **spec) -> dict:
    """A WSJob as `kubectl get wsjobs -o json` lists it (fields trimmed)."""
    job = {"apiVersion": "jobs.cerebras.com/v1", "kind": "WSJob",
           "metadata": {"name": name, "namespace": "job-operator", "creationTimestamp": created,
                        "labels": {"name": "t1", "user": user}},
           "spec": {"user": {"gid": 20031, "uid": 20031, "username": user},
                    "jobType": job_type, "numWafers": 1, "release": "2.1.1", **spec}}
    if phase:
        job["status"] = {"phase": phase, "systems": list(systems), "message": message,
                         "node": systems[0] if systems else "cer-mgmt-01",
                         "completionTime": "2026-11-27T02:20:04Z"}
    return job


def kubectl(*jobs: dict) -> str:
    return json.dumps({"apiVersion": "v1", "items": list(jobs), "kind": "List",
                       "metadata": {"resourceVersion": ""}}, indent=4)


def audit(user: str) -> str:
    return json.dumps({"kind": "Event", "verb": "list", "stage": "ResponseComplete",
                       "user": {"username": user, "groups": ["cerebras-users"]},
                       "objectRef": {"resource": "wsjobs", "namespace": "job-operator",
                                     "apiGroup": "jobs.cerebras.com"},
                       "responseStatus": {"code": 200},
                       "requestReceivedTimestamp": "2026-11-27T02:30:00.000000Z"}) + "\n"


@dataclass
class FakeCluster:
    """A probe answering the page's one command per node from recorded section outputs;
    a node in `down` raises as NodeProbe does for a container that is gone."""

    sections: dict[str, dict[str, str | tuple[int, str]]] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    def set(self, node: str, **sections) -> FakeCluster:
        self.sections.setdefault(node, {}).update(sections)
        return self

    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        self.calls.append((node, command, user))
        if node in self.down:
            raise AitestbedError(f"node {node} of cluster 'unit' has no container: bring the "
                                 "cluster up with `aitestbed --name unit up`")
        known = self.sections.get(node, {})
        out = []
        for name in re.findall(r"echo '@@aitestbed:(\w+)'", command):
            answer = CLOCK + "\n" if name == "clock" else known.get(name, "")
            rc, text = answer if isinstance(answer, tuple) else (0, answer)
            out.append(f"@@aitestbed:{name}\n{text}\n@@aitestbed:rc {rc}\n")
        return 0, "".join(out)


def recorded() -> FakeCluster:
    """The practice user's state on the mini cluster after a few jobs."""
    return (FakeCluster()
            .set("cer-login-01", sshd=SSHD_LOGIN, ps=PS)
            .set("gc-login-01", sshd=SSHD_LOGIN, ps="")
            .set("sambanova", sshd="", ps="")
            .set("gc-poplar-02", sshd=SSHD_HOP)
            .set("gc-slurmctld", jobcomp=GC_JOBCOMP, squeue=GC_SQUEUE, nodes=GC_NODES)
            .set("sn30-slurmctld", jobcomp=SN30_JOBCOMP, squeue=SN30_SQUEUE, nodes=SN30_NODES)
            .set("sn10-slurmctld", jobcomp="", squeue="", nodes=SN10_NODES)
            .set("sn30-r1-h1", snd=SN30_JOURNAL)
            .set("cer-mgmt-01", wsjobs=kubectl(), audit=""))


def room(*names: str, uid: int = 20001) -> Room:
    return Room(prefix="learner", project="workshop", project_gid=20000,
                systems=list(LAYOUT.systems),
                learners={n: (UID if n == USER else uid + i) for i, n in enumerate(names)},
                created="2026-11-27T02:00:00+00:00")


def page_of(cluster: FakeCluster, learners=(USER,), records=None, load=None, **raw_extra):
    raw = collect("unit", LAYOUT, cluster, clock=lambda: 1795745950.0)
    for key, value in raw_extra.items():
        setattr(raw, key, value)
    return summarize(raw, room(*learners), load, records or {}, EXERCISES)


def cells(page, user: str = USER) -> dict[str, tuple[str, str]]:
    row = next(r for r in page.rows if r.user == user)
    return {c.exercise: (c.status, c.note) for c in row.cells}


# collection -------------------------------------------------------------------------
def test_one_root_command_per_node_whatever_the_room():
    cluster = recorded()
    collect("unit", LAYOUT, cluster)
    nodes = [node for node, _, _ in cluster.calls]
    assert sorted(nodes) == sorted(LAYOUT.reads()) and len(nodes) == len(set(nodes))
    assert all(user is None for _, _, user in cluster.calls)  # as root, never as a learner
    assert not any("learner" in command for _, command, _ in cluster.calls)


def test_the_sections_each_node_is_asked_for():
    reads = LAYOUT.reads()
    assert reads["gc-login-01"] == ("clock", "sshd", "ps")
    assert reads["gc-poplar-02"] == ("clock", "sshd")  # graphcore-login's second step
    assert reads["sn10-slurmctld"] == ("clock", "jobcomp", "squeue", "nodes")
    assert reads["sm-02"] == ("clock", "snd")
    assert reads["cer-mgmt-01"] == ("clock", "wsjobs", "audit")


def test_the_recorded_outputs_parse():
    raw = collect("unit", LAYOUT, recorded())
    assert raw.errors == []
    assert raw.logins["gc-poplar-02"] == [("publickey", USER)]
    assert raw.logins["cer-login-01"] == [("keyboard-interactive/pam", USER)]
    assert raw.sessions["cer-login-01"] == [(USER, float(CLOCK) - 344)]
    assert [j.job_id for j in raw.finished["graphcore"]] == ["1", "2"]
    queued = raw.queue["graphcore"]
    assert [(j.job_id, j.state, j.fields["Reason"], j.workdir) for j in queued] == [
        ("4", "PENDING", "Resources", f"/home/{USER}"), ("3", "RUNNING", "None", MNIST)]
    assert queued[0].fields["UserId"] == f"{USER}({UID})"
    [busy, idle] = raw.slurm_nodes["graphcore"]
    assert (busy.name, busy.state, busy.total, busy.used) == (
        "gc-poplar-01", "MIXED", {"ipu": 16}, {"ipu": 16})
    assert (idle.used, idle.busy) == ({}, False)
    assert raw.journals["sn30-r1-h1"][0]["rdus"] == [0, 1]
    assert raw.wsjobs == []


def test_split_sections_marks_a_cut_output_as_failed():
    out = "@@aitestbed:clock\n1\n@@aitestbed:rc 0\n@@aitestbed:jobcomp\nJobId=1 Name=x"
    assert snapshot.split_sections(out) == {"clock": (0, "1"), "jobcomp": (1, "JobId=1 Name=x")}


def test_squeue_lines_with_another_shape_are_skipped():
    assert snapshot.parse_squeue("garbage\n" + US.join("abc") + "\n", "graphcore") == []


def test_a_node_down_is_an_error_line_and_the_rest_is_read():
    cluster = recorded()
    cluster.down.add("gc-slurmctld")
    raw = collect("unit", LAYOUT, cluster)
    assert raw.errors == ["gc-slurmctld: not read (node gc-slurmctld of cluster 'unit' has no "
                          "container: bring the cluster up with `aitestbed --name unit up`)"]
    assert "graphcore" not in raw.finished and raw.finished["sambanova"]
    page = summarize(raw, room(USER), None, {}, EXERCISES)
    assert page.errors == raw.errors
    assert cells(page)["first-login"][0] == PASSED


def test_a_failing_section_is_reported_with_its_first_line():
    cluster = recorded().set("sn30-slurmctld", squeue=(
        1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"))
    raw = collect("unit", LAYOUT, cluster)
    assert raw.errors == ["sn30-slurmctld: squeue failed (exit 1): slurm_load_jobs error: "
                          "Unable to contact slurm controller (connect failure)"]


def test_kubectl_answering_garbage_is_an_error_not_a_crash():
    raw = collect("unit", LAYOUT, recorded().set("cer-mgmt-01", wsjobs="<html>oops"))
    assert raw.errors == ["cer-mgmt-01: wsjobs: kubectl's answer is not JSON"]
    assert raw.wsjobs is None
    page = summarize(raw, room(USER), None, {}, EXERCISES)
    assert page.panels[0].notes == ["the wsjobs were not read"]


def test_bad_lines_everywhere_do_not_break_the_page():
    cluster = (recorded()
               .set("gc-slurmctld", jobcomp="JobId=\nnonsense\n", squeue="x\x1fy\n",
                    nodes="NodeName=\nState=\n")
               .set("sn30-r1-h1", snd="{\"job\": 1, \"event\": \"session\"}\n[1]\n{torn")
               .set("cer-mgmt-01", wsjobs=json.dumps({"items": [1, {"metadata": {}}]}),
                    audit="{\"user\": \"x\"}\nnot json\n"))
    for answer in ("[]", '{"items": null}', '{"items": 3}', ""):
        raw = collect("unit", LAYOUT, recorded().set("cer-mgmt-01", wsjobs=answer))
        assert raw.wsjobs in (None, []), answer
    for answer in ("", "[1]", '{"Jobs": [1]}', '{"Jobs": {"1.pbs": 2}}'):
        raw = collect("unit", GROQ_LAYOUT, FakeCluster().set("groq-r01-control", qstat=answer))
        assert raw.pbs_jobs in (None, {}), answer
    page = page_of(cluster)
    assert page.rows and web.make_app(fixed(page)).test_client().get("/").status_code == 200


# decisions ---------------------------------------------------------------------------
def test_the_practice_users_recorded_state():
    page = page_of(recorded())
    got = cells(page)
    assert got["first-login"] == (PASSED, "sshd on cer-login-01, gc-login-01 accepted them")
    assert got["graphcore-login"] == (PASSED, "sshd on gc-login-01, gc-poplar-02")
    assert got["graphcore-mnist"] == (PASSED, "job 1 (python3) COMPLETED")
    assert got["graphcore-sbatch"] == (STARTED, "job 3 (submit-mnist-poptorch-job.sh) RUNNING")
    assert got["sambanova-sbatch"] == (PASSED,
                                       "job 1 (submit-lenet-job.sh) COMPLETED held 2 RDUs")
    assert got["sambanova-lenet"][0] == STARTED  # a job in LeNet's directory, no run yet
    assert got["cerebras-fc-mnist"] == (NOT_STARTED, "")
    row = page.rows[0]
    assert (row.jobs["graphcore"].running, row.jobs["graphcore"].queued) == (1, 1)
    assert (row.jobs["sambanova"].running, row.jobs["sambanova"].queued) == (1, 1)
    assert row.last_failure == "graphcore: job 2 (python3) FAILED, exit code 3"
    assert row.passed == 4


def test_the_checks_passcode_rule_holds_on_the_page():
    """A key login on a node that asks for a passcode is not the first login."""
    cluster = (recorded().set("cer-login-01", sshd=SSHD_HOP, ps="")
               .set("gc-login-01", sshd=SSHD_HOP))
    assert cells(page_of(cluster))["first-login"] == (NOT_STARTED, "")
    assert cells(page_of(cluster))["graphcore-login"][0] == STARTED  # the hop alone


def test_a_failed_job_is_red_until_a_later_one_runs_or_completes():
    cluster = recorded().set("gc-slurmctld", jobcomp=jobcomp(
        2, "python3", "FAILED", MNIST, exit_code="1:0"), squeue="")
    assert cells(page_of(cluster))["graphcore-mnist"] == (
        FAILED, "job 2 (python3) FAILED, exit code 1")
    cluster.set("gc-slurmctld", squeue=squeue(5, "RUNNING", "None", "python", MNIST,
                                              "gc-poplar-02"))
    assert cells(page_of(cluster))["graphcore-mnist"] == (STARTED, "job 5 (python) RUNNING")
    cluster.set("gc-slurmctld", squeue="", jobcomp=jobcomp(
        2, "python3", "FAILED", MNIST, exit_code="0:9") + jobcomp(
        5, "python", "COMPLETED", MNIST, end="2026-11-27T03:00:00"))
    assert cells(page_of(cluster))["graphcore-mnist"] == (PASSED, "job 5 (python) COMPLETED")


def test_the_signal_that_killed_a_job_is_its_reason():
    cluster = recorded().set("gc-slurmctld", jobcomp=jobcomp(
        7, "submit-mnist-poptorch-job.sh", "TIMEOUT", MNIST, exit_code="0:15"), squeue="")
    page = page_of(cluster)
    assert cells(page)["graphcore-sbatch"] == (
        FAILED, "job 7 (submit-mnist-poptorch-job.sh) TIMEOUT, signal 15")
    assert page.rows[0].last_failure.startswith("graphcore: job 7")


def test_another_users_jobs_are_not_the_learners():
    cluster = recorded().set("gc-slurmctld", jobcomp=jobcomp(
        1, "python3", "COMPLETED", MNIST, user="learner02", uid=20002), squeue="")
    page = page_of(cluster, learners=(USER, "learner02"))
    assert cells(page)["graphcore-mnist"] == (NOT_STARTED, "")
    assert cells(page, "learner02")["graphcore-mnist"][0] == PASSED
    # the same name with another uid is another user (jobcomp's UserId=name(uid))
    page = summarize(collect("unit", LAYOUT, cluster), room(USER, "learner02", uid=20005),
                     None, {}, EXERCISES)
    assert cells(page, "learner02")["graphcore-mnist"][0] == NOT_STARTED


def test_lenet_needs_its_run_and_its_test_on_the_rdus():
    run = "python lenet.py run --pef=pef/lenet/lenet.pef"
    test = "python lenet.py test --pef=pef/lenet/lenet.pef"
    journal = (snd(5, rdus=(0,)) + snd(5, "session", command=run)
               + snd(6, rdus=(0,)) + snd(6, "session", command=test))
    srun = (jobcomp(5, "python", "COMPLETED", LENET, node="sn30-r1-h1")
            + jobcomp(6, "python", "COMPLETED", LENET, node="sn30-r1-h1",
                      end="2026-11-27T02:30:00"))
    cluster = recorded().set("sn30-slurmctld", jobcomp=srun, squeue="").set(
        "sn30-r1-h1", snd=journal)
    assert cells(page_of(cluster))["sambanova-lenet"] == (
        PASSED, "run: job 5 (python) COMPLETED, test: job 6 (python) COMPLETED")
    cluster.set("sn30-r1-h1", snd=snd(5, "session", command=run))
    assert cells(page_of(cluster))["sambanova-lenet"] == (
        STARTED, "`lenet.py run` done, not yet `lenet.py test`")


def test_a_batch_job_on_one_rdu_is_not_the_exercise():
    cluster = recorded().set("sn30-r1-h1", snd=snd(1, rdus=(0,)))
    assert cells(page_of(cluster))["sambanova-sbatch"] == (
        STARTED, "job 1 (submit-lenet-job.sh) COMPLETED held 1 RDU(s), not two")


def test_cerebras_fc_mnist_and_cancel():
    compiled = wsjob("wsjob-a", "compile", "SUCCEEDED", created="2026-11-27T02:19:51Z")
    trained = wsjob("wsjob-b", "execute", "SUCCEEDED", systems=["cer-cs2-01"])
    cancelled = wsjob("wsjob-c", "execute", "CANCELLED", created="2026-11-27T02:21:00Z",
                      cancelReason=f"canceled by {USER}")
    cluster = recorded().set("cer-mgmt-01", wsjobs=kubectl(compiled, trained, cancelled),
                             audit=audit(USER) + audit("learner02"))
    got = cells(page_of(cluster))
    assert got["cerebras-fc-mnist"] == (
        PASSED, "wsjob-a (compile) and wsjob-b (execute) SUCCEEDED")
    assert got["cerebras-cancel"] == (PASSED, "listed their jobs; cancelled wsjob-c")
    cluster.set("cer-mgmt-01", audit="")
    assert cells(page_of(cluster))["cerebras-cancel"][0] == STARTED


def test_a_failed_execute_wsjob_is_red_and_a_running_one_amber():
    compiled = wsjob("wsjob-a", "compile", "SUCCEEDED", created="2026-11-27T02:19:51Z")
    failed = wsjob("wsjob-b", "execute", "FAILED",
                   message="data_dir ./mnist does not exist")
    cluster = recorded().set("cer-mgmt-01", wsjobs=kubectl(compiled, failed))
    page = page_of(cluster)
    assert cells(page)["cerebras-fc-mnist"] == (
        FAILED, "wsjob wsjob-b (execute) FAILED: data_dir ./mnist does not exist")
    assert page.rows[0].last_failure == (
        "cerebras: wsjob wsjob-b (execute) FAILED: data_dir ./mnist does not exist")
    running = wsjob("wsjob-c", "execute", "RUNNING", created="2026-11-27T02:25:00Z",
                    systems=["cer-cs2-02"])
    queued = wsjob("wsjob-d", "execute", None, user="learner02",
                   created="2026-11-27T02:26:00Z")
    cluster.set("cer-mgmt-01", wsjobs=kubectl(compiled, failed, running, queued))
    page = page_of(cluster, learners=(USER, "learner02"))
    assert cells(page)["cerebras-fc-mnist"] == (STARTED, "wsjob-c RUNNING")
    panel = page.panels[0]
    assert (panel.system, panel.unit, panel.accelerators_in_use, panel.accelerators,
            panel.running, panel.queued) == ("cerebras", "CS-2", 1, 2, 1, 1)
    assert [(n.name, n.state) for n in panel.nodes] == [("cer-cs2-01", "FREE"),
                                                        ("cer-cs2-02", "IN USE")]
    assert [(j.name, j.user, j.phase) for j in panel.wsjobs] == [
        ("wsjob-c", USER, "RUNNING"), ("wsjob-d", "learner02", "QUEUEING")]
    assert page.rows[1].jobs["cerebras"].queued == 1


def test_the_record_passes_home_only_exercises_and_says_started():
    records = {USER: {"started": {"data-transfer": "2026-11-27T02:00:00+00:00",
                                  "port-forwarding": "2026-11-27T02:01:00+00:00"},
                      "passed": {"data-transfer": "2026-11-27T02:05:00+00:00",
                                 "graphcore-mnist": "2026-11-27T01:00:00+00:00"}}}
    got = cells(page_of(recorded(), records=records))
    assert got["data-transfer"] == (PASSED, "`exercise check` passed at 2026-11-27T02:05:00+00:00")
    assert got["port-forwarding"] == (STARTED, "`exercise start` at 2026-11-27T02:01:00+00:00")
    assert got["cerebras-setup"][0] == NOT_STARTED and "home" in got["cerebras-setup"][1]
    assert got["graphcore-mnist"][0] == PASSED


def test_a_corrupt_record_is_as_no_record():
    got = cells(page_of(recorded(), records={USER: {"passed": None, "started": "x"}}))
    assert got["data-transfer"][0] == NOT_STARTED


def test_the_systems_panels():
    page = page_of(recorded())
    graphcore, sambanova = page.panels[1], page.panels[2]
    assert (graphcore.unit, graphcore.nodes_in_use, graphcore.accelerators_in_use,
            graphcore.accelerators, graphcore.running, graphcore.queued) == (
        "IPU", 1, 16, 32, 1, 1)
    assert (sambanova.unit, sambanova.accelerators_in_use, sambanova.accelerators) == (
        "RDU", 8, 24)
    assert sambanova.notes == ["down or drained: sm-02"]


def test_load_users_come_after_the_learners_marked_as_load():
    load = Load(level="light", users={"load01": 20031, "load02": 20032}, started="")
    cluster = recorded().set("gc-slurmctld", squeue=GC_SQUEUE + squeue(
        9, "RUNNING", "None", "big1", "/home/load01", "gc-poplar-02", user="load01",
        uid=20031))
    page = page_of(cluster, learners=(USER, "learner02"), load=load)
    assert [(r.user, r.load) for r in page.rows] == [
        (USER, False), ("learner02", False), ("load01", True), ("load02", True)]
    assert page.rows[2].cells == [] and page.rows[2].jobs["graphcore"].running == 1
    assert "2 load user(s) (light)" in page.heading


def test_columns_count_passes_and_mark_home_only_and_begun():
    r = room(USER, "learner02")
    r.exercises = {"first-login": "2026-11-27T02:00:00+00:00"}
    raw = collect("unit", LAYOUT, recorded())
    page = summarize(raw, r, None, {}, EXERCISES)
    first = page.columns[0]
    assert (first.name, first.passed, first.begun, first.home_only) == (
        "first-login", 1, "2026-11-27T02:00:00+00:00", False)
    assert {c.name for c in page.columns if c.home_only} == set(snapshot.HOME_ONLY)


# login times ---------------------------------------------------------------------------
def test_login_times_are_when_a_cycle_first_saw_them():
    lines = {"gc-login-01": [("keyboard-interactive/pam", USER)]}
    first = snapshot.stamp({}, lines, 100.0, first=True)
    assert first == {"gc-login-01": [None]}
    lines["gc-login-01"].append(("keyboard-interactive/pam", "learner02"))
    second = snapshot.stamp(first, lines, 105.0, first=False)
    assert second == {"gc-login-01": [None, 105.0]}
    # the node was recreated: a shorter log, all of it new
    assert snapshot.stamp(second, {"gc-login-01": [("publickey", USER)]}, 110.0,
                          first=False) == {"gc-login-01": [110.0]}
    # a node not read this cycle keeps what was seen
    assert snapshot.stamp(second, {}, 110.0, first=False) == second


def test_last_login_from_stamps_sessions_or_before_the_page():
    raw = collect("unit", LAYOUT, recorded().set("cer-login-01", ps=""))
    raw.login_seen = snapshot.stamp({}, raw.logins, raw.taken, first=True)
    page = summarize(raw, room(USER, "learner02"), None, {}, EXERCISES)
    assert [(r.last_login, r.login_note) for r in page.rows] == [
        (None, "before the page started"), (None, "never")]
    raw.login_seen["gc-login-01"] = [1795745000.0]
    assert summarize(raw, room(USER), None, {}, EXERCISES).rows[0].last_login == 1795745000.0
    raw = collect("unit", LAYOUT, recorded())  # a session still open on cer-login-01
    row = summarize(raw, room(USER), None, {}, EXERCISES).rows[0]
    assert (row.last_login, row.login_note) == (float(CLOCK) - 344, "cer-login-01")


# the watcher ---------------------------------------------------------------------------
def fixed(page) -> Watcher:
    """A watcher whose every snapshot is `page`."""
    watcher = Watcher("unit", lambda previous: (Raw("unit", LAYOUT, page.taken), page))
    watcher.refresh()
    return watcher


def watcher_on(cluster: FakeCluster, learners=("learner01",), records=None) -> Watcher:
    def source(previous):
        raw = collect("unit", LAYOUT, cluster)
        raw.login_seen = snapshot.stamp(previous.login_seen if previous else {}, raw.logins,
                                        raw.taken, first=previous is None)
        return raw, summarize(raw, room(*learners), None, records or {}, EXERCISES, 0.5)
    return Watcher("unit", source, interval=0.5)


def test_a_learner_who_logs_in_is_green_at_the_next_refresh():
    cluster = recorded()
    watcher = watcher_on(cluster)
    assert cells(watcher.refresh(), "learner01")["first-login"][0] == NOT_STARTED
    cluster.set("gc-login-01", sshd=SSHD_LOGIN + SSHD_LOGIN.replace(USER, "learner01"))
    page = watcher.refresh()
    assert cells(page, "learner01")["first-login"] == (PASSED,
                                                       "sshd on gc-login-01 accepted them")
    assert page.rows[0].login_note == "gc-login-01" and page.rows[0].last_login


def test_the_watcher_thread_refreshes_and_stops():
    watcher = watcher_on(recorded()).start()
    try:
        deadline = time.monotonic() + 10
        while watcher.cycles < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.cycles >= 2
    finally:
        watcher.stop()
    assert not any(t.name == "classroom-watcher" for t in threading.enumerate())


def test_a_failing_snapshot_keeps_the_last_page_and_says_why():
    calls = []

    def source(previous):
        calls.append(previous)
        if len(calls) > 1:
            raise RuntimeError("the engine went away\nwith a second line")
        raw = collect("unit", LAYOUT, recorded())
        return raw, summarize(raw, room(USER), None, {}, EXERCISES)

    watcher = Watcher("unit", source)
    good = watcher.refresh()
    kept = watcher.refresh()
    assert kept.rows == good.rows and kept.taken == good.taken
    assert kept.errors == ["snapshot failed: RuntimeError: the engine went away"]


def test_the_watcher_of_a_cluster_state(isolated_state):
    state = ClusterState("unit")
    state.save(ClusterRecord("unit", "mini", "", None, USER))
    state.common_dir.mkdir(parents=True)
    (state.common_dir / "accounts.json").write_text(json.dumps({"users": [
        {"name": USER, "uid": UID}]}))
    watcher = Watcher.for_cluster("unit", interval=1, probe=recorded())
    page = watcher.refresh()
    assert page.heading == "no classroom on this cluster: the practice user"
    assert [r.user for r in page.rows] == [USER] and page.errors == []
    assert cells(page)["first-login"][0] == PASSED
    (state.root / "exercises").mkdir()
    (state.root / "exercises" / "learner01.json").write_text(json.dumps(
        {"started": {}, "passed": {"data-transfer": "2026-11-27T02:05:00+00:00"}}))
    save_room(state.root, room("learner01", "learner02"))
    save_load(state.root, Load(level="light", users={"load01": 20031}, started=""))
    page = watcher.refresh()
    assert [(r.user, r.load) for r in page.rows] == [
        ("learner01", False), ("learner02", False), ("load01", True)]
    assert cells(page, "learner01")["data-transfer"][0] == PASSED
    assert page.heading.startswith("project workshop: 2 learner(s)")
    (state.root / "classroom" / "room.json").write_text("{not json")
    page = watcher.refresh()
    assert page.errors[0].startswith("cannot read ") and [r.user for r in page.rows] == [USER]


def test_the_watcher_of_a_cluster_that_does_not_exist():
    with pytest.raises(AitestbedError):
        Watcher.for_cluster("nosuch")


# the page -------------------------------------------------------------------------------
def client_for(page):
    return web.make_app(fixed(page), now=lambda: page.taken + 3).test_client()


def test_the_page_colours_the_cells_and_refreshes_itself():
    records = {USER: {"started": {"port-forwarding": "x"}, "passed": {}}}
    cluster = recorded().set("gc-slurmctld", jobcomp=jobcomp(
        2, "python3", "FAILED", MNIST, exit_code="3:0"), squeue="")
    response = client_for(page_of(cluster, records=records)).get("/")
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    html = response.text
    assert '<meta http-equiv="refresh" content="5">' in html
    assert "<script" not in html
    assert re.search(r'id="cell-learner-first-login" class="passed" data-status="passed"', html)
    assert re.search(r'id="cell-learner-graphcore-mnist" class="failed" data-status="failed" '
                     r'data-user="learner" data-exercise="graphcore-mnist" '
                     r'title="graphcore-mnist: failed — job 2 \(python3\) FAILED, exit code 3"',
                     html)
    assert 'id="cell-learner-port-forwarding" class="started"' in html
    assert 'id="cell-learner-cerebras-fc-mnist" class="todo"' in html
    assert "(3 s ago)" in html
    assert 'id="panel-graphcore"' in html and "1/2 nodes in use, 16/32 IPUs" in html


def test_load_rows_are_marked_and_greyed():
    load = Load(level="heavy", users={"load01": 20031}, started="")
    html = client_for(page_of(recorded(), load=load)).get("/").text
    row = html[html.index('id="row-load01"'):]
    row = row[:row.index("</tr>")]
    assert 'class="load"' in row and '<span class="tag">load</span>' in row
    assert "background load" in row


def test_what_learners_type_is_escaped():
    cluster = recorded().set("gc-slurmctld", jobcomp=jobcomp(
        2, "<script>alert(1)</script>", "FAILED", f"/home/{USER}"), squeue="")
    html = client_for(page_of(cluster)).get("/").text
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_collection_errors_and_a_stale_snapshot_show_on_the_page():
    cluster = recorded()
    cluster.down.add("cer-mgmt-01")
    page = page_of(cluster)
    html = web.make_app(fixed(page), now=lambda: page.taken + 600).test_client().get("/").text
    assert "cer-mgmt-01: not read (node cer-mgmt-01 of cluster" in html
    assert "stale" in html and "(10 min ago)" in html


def test_the_page_before_the_first_snapshot():
    watcher = Watcher("unit", lambda previous: (_ for _ in ()).throw(RuntimeError()))
    response = web.make_app(watcher).test_client().get("/")
    assert response.status_code == 200 and "taking the first snapshot" in response.text


def test_room_json_is_the_same_snapshot():
    page = page_of(recorded())
    data = client_for(page).get("/api/room.json").json
    assert data["age"] == 3.0 and data["cluster"] == "unit"
    row = data["rows"][0]
    assert row["user"] == USER and row["load"] is False
    assert {c["exercise"]: c["status"] for c in row["cells"]}["first-login"] == PASSED
    assert row["jobs"]["graphcore"] == {"running": 1, "queued": 1}
    assert [p["system"] for p in data["panels"]] == ["cerebras", "graphcore", "sambanova"]


def test_unknown_paths_are_404():
    assert client_for(page_of(recorded())).get("/nope").status_code == 404


# serving ----------------------------------------------------------------------------------
def test_a_port_in_use_is_one_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AitestbedError) as err:
            web.PageServer(fixed(page_of(recorded())), "127.0.0.1", port)
    assert str(err.value) == f"port 127.0.0.1:{port} is in use: choose another with --port"


def test_serve_on_a_port_in_use_starts_nothing(isolated_state, monkeypatch):
    state = ClusterState("unit")
    state.save(ClusterRecord("unit", "mini", "", None, USER))
    started = []
    monkeypatch.setattr(Watcher, "start", lambda self: started.append(self))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AitestbedError, match=f"port 127.0.0.1:{port} is in use"):
            web.serve("unit", port=port)
    assert started == []


@pytest.mark.parametrize("kwargs,message", [
    ({"port": 70000}, "--port 70000 is not a port number"),
    ({"interval": 0}, "--interval 0 is not a number of seconds above 0"),
    ({"interval": float("nan")}, "--interval nan is not"),
    ({"host": "no-such-host.invalid"}, "cannot listen on no-such-host.invalid:"),
])
def test_serve_refuses_bad_options_in_one_line(isolated_state, kwargs, message):
    state = ClusterState("unit")
    state.save(ClusterRecord("unit", "mini", "", None, USER))
    with pytest.raises(AitestbedError, match=re.escape(message)) as err:
        web.serve("unit", **kwargs)
    assert "\n" not in str(err.value)


def test_the_page_server_serves_over_http():
    server = web.PageServer(watcher_on(recorded()), "127.0.0.1", 0).start()
    try:
        deadline = time.monotonic() + 10
        while server.watcher.cycles < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        with urllib.request.urlopen(server.url, timeout=10) as response:
            html = response.read().decode()
        assert 'id="row-learner01"' in html
        with urllib.request.urlopen(server.url + "api/room.json", timeout=10) as response:
            assert json.load(response)["rows"][0]["user"] == "learner01"
    finally:
        server.stop()


# the GroqRack (PBS) ---------------------------------------------------------------------
# `qstat -f -F json` as PBS prints it (attribute names and nesting of PBS's JSON output, as
# tests/unit/test_tspd.py records them); the values are this test's.
def pbs_job(owner: str, state: str, vnode: str = "", place: str = "excl") -> dict:
    job = {"Job_Name": "STDIN", "Job_Owner": f"{owner}@groq-login-01", "job_state": state,
           "queue": "workq", "server": "groq-pbs",
           "Resource_List": {"ncpus": 1, "nodect": 1, "place": place, "select": "1"},
           "euser": owner, "egroup": owner}
    if vnode:
        job.update(exec_host=f"{vnode}/0", exec_vnode=f"({vnode}:ncpus=1)")
    return job


GROQ_LAYOUT = Layout(
    nodes=Nodes(login={"graphcore": ["gc-login-03"], "groq": ["groq-login-01"]},
                hop={"graphcore": ["gc-poplar-02"]}, controllers={"graphcore": ["gc-slurmctld"]},
                management=[], mfa=frozenset({"gc-login-03", "groq-login-01"})),
    systems=("graphcore", "groq"), pbs=("groq-r01-control",),
    groq_nodes=("groq-r01-gn-01", "groq-r01-gn-02"))


def test_the_groqrack_panel_and_its_jobs():
    assert GROQ_LAYOUT.reads()["groq-r01-control"] == ("clock", "qstat")
    qstat = json.dumps({"timestamp": 1760000000, "pbs_version": "23.06.06",
                        "pbs_server": "groq-pbs", "Jobs": {
                            "71.groq-pbs": pbs_job(USER, "R", "groq-r01-gn-01"),
                            "72.groq-pbs": pbs_job(USER, "Q"),
                            "73.groq-pbs": pbs_job("load01", "H")}}, indent=4)
    cluster = (FakeCluster().set("groq-r01-control", qstat=qstat)
               .set("groq-login-01", sshd=SSHD_LOGIN))
    raw = collect("unit", GROQ_LAYOUT, cluster)
    assert [n for n, _, _ in cluster.calls if n == "groq-r01-control"] == ["groq-r01-control"]
    page = summarize(raw, room(USER), Load("light", {"load01": 20031}, ""), {},
                     catalog.available(list(GROQ_LAYOUT.systems)))
    groq = page.panels[1]
    assert (groq.system, groq.unit, groq.accelerators_in_use, groq.accelerators,
            groq.nodes_in_use, groq.running, groq.queued) == ("groq", "GroqCard", 8, 16, 1, 1, 2)
    assert (page.rows[0].jobs["groq"].running, page.rows[0].jobs["groq"].queued) == (1, 1)
    assert page.rows[1].jobs["groq"].queued == 1
    assert cells(page)["first-login"][0] == PASSED
    html = client_for(page).get("/").text
    assert "1/2 nodes in use, 8/16 GroqCards; jobs: 1 running, 2 queued" in html


def test_pbs_down_is_an_error_line():
    cluster = FakeCluster().set("groq-r01-control", qstat=(
        2, "Connection refused\nqstat: cannot connect to server groq-pbs (errno=111)\n"))
    raw = collect("unit", GROQ_LAYOUT, cluster)
    assert raw.errors == ["groq-r01-control: qstat failed (exit 2): Connection refused"]
    page = summarize(raw, room(USER), None, {}, [])
    assert page.panels[1].notes == ["PBS's jobs were not read"]


def test_served_wide_the_page_refuses_the_clusters_own_networks():
    """D11: with --host 0.0.0.0 the nodes and jobs reach the host through their networks'
    gateways; requests from those subnets get 403, the rest the page."""
    import ipaddress  # noqa: PLC0415

    page = page_of(recorded())
    client = web.make_app(fixed(page), refused=[ipaddress.ip_network("172.20.0.0/16")]
                          ).test_client()
    for path in ("/", "/api/room.json"):
        node = client.get(path, environ_base={"REMOTE_ADDR": "172.20.0.5"})
        assert node.status_code == 403 and node.text == web.REFUSED
        laptop = client.get(path, environ_base={"REMOTE_ADDR": "192.0.2.10"})
        assert laptop.status_code == 200
