"""The exercises' checks on faked cluster state: a correct learner passes, a wrong one gets
the hint; the CLI's list, start and check on a cluster state directory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from aitestbed.cli import cli
from aitestbed.exercises import catalog, checks
from aitestbed.exercises.checks import Context, Nodes
from aitestbed.exercises.session import Session
from aitestbed.host.state import ClusterRecord, ClusterState
from click.testing import CliRunner

pytestmark = pytest.mark.unit

USER, UID = "learner", 10001
NODES = Nodes(
    login={"cerebras": ["cer-login-01"], "graphcore": ["gc-login-01"],
           "sambanova": ["sambanova"]},
    hop={"graphcore": ["gc-poplar-02"], "sambanova": ["sn30-r1-h1", "sm-01"]},
    controllers={"graphcore": ["gc-slurmctld"],
                 "sambanova": ["sn10-slurmctld", "sn30-slurmctld"]},
    management=["cer-mgmt-01"],
    mfa=frozenset({"cer-login-01", "gc-login-01", "sambanova"}))
HOME = f"/home/{USER}"
MNIST = f"{HOME}/graphcore/examples/tutorials/simple_applications/pytorch/mnist"
LENET = f"{HOME}/apps/starters/lenet"


@dataclass
class FakeProbe:
    """Answers commands whose text contains a fragment, on a node; anything else fails."""

    rules: list[tuple[str, str, int, str]] = field(default_factory=list)
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    def on(self, node: str, fragment: str, out: str = "", rc: int = 0) -> FakeProbe:
        self.rules.append((node, fragment, rc, out))
        return self

    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        self.calls.append((node, command, user))
        for rule_node, fragment, rc, out in reversed(self.rules):
            if rule_node == node and fragment in command:
                return rc, out
        return 1, ""


def context(probe: FakeProbe, **extra) -> Context:
    return Context(probe, USER, UID, NODES, **extra)


def jobcomp(job_id: int, name: str, state: str, workdir: str,
            start: str = "2025-01-01T10:00:05", user: str = f"{USER}({UID})",
            node: str = "gc-poplar-02") -> str:
    return (f"JobId={job_id} UserId={user} GroupId={USER}({UID}) Name={name} JobState={state} "
            f"Partition=p64 TimeLimit=UNLIMITED StartTime={start} EndTime=2025-01-01T10:01:00 "
            f"NodeList={node} NodeCnt=1 ProcCnt=1 WorkDir={workdir} ReservationName= "
            "Tres=cpu=1,mem=515000M,node=1,billing=1 Account= QOS= WcKey= Cluster=graphcore "
            "SubmitTime=2025-01-01T10:00:00 EligibleTime=2025-01-01T10:00:00 "
            "DerivedExitCode=0:0 ExitCode=0:0\n")


def wsjob(name: str, job_type: str, phase: str, user: str = USER, **spec) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": f"2025-01-01T10:00:0{len(name) % 9}Z"},
            "spec": {"user": {"username": user}, "jobType": job_type, **spec},
            "status": {"phase": phase}}


def kubectl(*jobs: dict) -> str:
    return json.dumps({"items": list(jobs)})


def todo(criteria) -> list:
    return [c for c in criteria if not c.done]


# first login ----------------------------------------------------------------
def test_first_login_passes_on_a_passcode_login():
    probe = FakeProbe().on("gc-login-01", f"Accepted keyboard-interactive/pam for {USER} from ")
    [criterion] = checks.first_login(context(probe))
    assert criterion.done and "gc-login-01" in criterion.evidence
    assert any("/var/log/sshd.log" in cmd for _, cmd, _ in probe.calls)


def test_first_login_needs_the_passcode_where_the_node_asks_for_one():
    probe = FakeProbe().on("gc-login-01", f"Accepted publickey for {USER} from ")
    [criterion] = checks.first_login(context(probe))
    assert not criterion.done
    assert "passcode {user}" in criterion.hint and "Password:" in criterion.hint


def test_a_login_node_without_mfa_takes_the_key_login():
    nodes = Nodes(login={"graphcore": ["gc-login-01"]}, hop={}, controllers={}, management=[])
    probe = FakeProbe().on("gc-login-01", f"Accepted publickey for {USER} from ")
    assert checks.first_login(Context(probe, USER, UID, nodes))[0].done


# Cerebras -------------------------------------------------------------------
def cerebras_setup_probe(version: str = "2.1.1", same_head: bool = True) -> FakeProbe:
    head = "abc\nabc\n" if same_head else "abc\ndef\n"
    return (FakeProbe()
            .on("cer-login-01", "stat -c %a ~", "755\n")
            .on("cer-login-01", "test -x ~/R_2.1.1/venv_cerebras_pt/bin/python")
            .on("cer-login-01", "m.version(\"cerebras_pytorch\")", f"{version}\n")
            .on("cer-login-01", "test -d ~/R_2.1.1/modelzoo/.git")
            .on("cer-login-01", "git rev-parse HEAD \"Release_2.1.1^{commit}\"", head))


def test_cerebras_setup_passes_for_the_guides_steps():
    assert not todo(checks.cerebras_setup(context(cerebras_setup_probe())))


def test_cerebras_setup_wrong_version_and_branch_get_their_hints():
    missing = todo(checks.cerebras_setup(context(cerebras_setup_probe("2.0.3", False))))
    assert [c.text for c in missing] == ["cerebras_pytorch 2.1.1 installed in it",
                                         "the modelzoo checked out at Release_2.1.1"]
    assert "pip install cerebras_pytorch==2.1.1 (found 2.0.3)" in missing[0].hint
    assert "git checkout Release_2.1.1" in missing[1].hint


def test_cerebras_setup_for_a_learner_who_did_nothing():
    probe = FakeProbe().on("cer-login-01", "stat -c %a ~", "700\n")
    missing = todo(checks.cerebras_setup(context(probe)))
    assert len(missing) == 5
    assert missing[0].hint == "chmod a+xr ~/"
    assert "/software/cerebras/python3.8/bin/python3.8 -m venv venv_cerebras_pt" in missing[1].hint
    assert "git clone https://github.com/Cerebras/modelzoo.git" in missing[3].hint


def test_fc_mnist_passes_when_both_wsjobs_succeeded():
    probe = (FakeProbe()
             .on("cer-login-01", "grep -q /software/cerebras/dataset/fc_mnist")
             .on("cer-mgmt-01", "kubectl get wsjobs", kubectl(
                 wsjob("wsjob-a", "compile", "SUCCEEDED"), wsjob("wsjob-b", "execute", "SUCCEEDED"),
                 wsjob("wsjob-c", "execute", "FAILED", user="someone"))))
    criteria = checks.cerebras_fc_mnist(context(probe))
    assert not todo(criteria)
    assert criteria[2].evidence == "wsjob-b"


def test_fc_mnist_reports_the_failed_execute_job_and_the_run_command():
    failed = wsjob("wsjob-b", "execute", "FAILED")
    failed["status"]["message"] = "data_dir ./mnist does not exist"
    probe = (FakeProbe()
             .on("cer-mgmt-01", "kubectl get wsjobs", kubectl(
                 wsjob("wsjob-a", "compile", "SUCCEEDED"), failed,
                 wsjob("wsjob-c", "execute", "SUCCEEDED", user="someone"))))
    missing = todo(checks.cerebras_fc_mnist(context(probe)))
    assert [c.text.split(" (")[0] for c in missing] == [
        "configs/params.yaml reads the MNIST data set from /software",
        "the model trained on a CS-2"]
    assert "python run.py CSX --job_labels name=pt_smoketest" in missing[1].hint
    assert "(your last execute job ended FAILED: data_dir ./mnist does not exist)" in \
        missing[1].hint


def audit(user: str, verb: str = "list", code: int = 200, resource: str = "wsjobs") -> str:
    """One line of the API server's audit log."""
    return json.dumps({"kind": "Event", "verb": verb, "stage": "ResponseComplete",
                       "user": {"username": user, "groups": ["cerebras-users"]},
                       "objectRef": {"resource": resource, "namespace": "job-operator",
                                     "apiGroup": "jobs.cerebras.com"},
                       "responseStatus": {"code": code},
                       "requestReceivedTimestamp": "2025-01-01T10:00:00.000000Z"}) + "\n"


def test_cancel_needs_a_listing_and_a_job_the_learner_cancelled():
    cancelled = wsjob("wsjob-x", "execute", "CANCELLED", cancelReason=f"canceled by {USER}")
    probe = (FakeProbe().on("cer-mgmt-01", "kubectl get wsjobs", kubectl(cancelled))
             .on("cer-mgmt-01", "/var/log/kubernetes/audit", audit(USER)))
    listed, cancel = checks.cerebras_cancel(context(probe))
    assert listed.done and listed.evidence == "last at 2025-01-01T10:00:00.000000Z"
    assert cancel.done and cancel.evidence == "wsjob-x CANCELLED"
    by_staff = wsjob("wsjob-y", "execute", "CANCELLED", cancelReason="canceled by admin")
    probe = (FakeProbe().on("cer-mgmt-01", "kubectl get wsjobs",
                            kubectl(by_staff, wsjob("wsjob-z", "execute", "SUCCEEDED")))
             .on("cer-mgmt-01", "/var/log/kubernetes/audit",  # others', refused, not a list
                 audit("other") + audit(USER, code=403) + audit(USER, verb="get")))
    listed, cancel = checks.cerebras_cancel(context(probe))
    assert not listed.done and "csctl get jobs" in listed.hint
    assert not cancel.done
    assert "csctl get jobs" in cancel.hint and "csctl cancel job <NAME>" in cancel.hint


# Graphcore ------------------------------------------------------------------
def test_graphcore_two_step_login():
    probe = (FakeProbe()
             .on("gc-login-01", f"Accepted keyboard-interactive/pam for {USER} ")
             .on("gc-poplar-02", f"Accepted publickey for {USER} "))
    assert not todo(checks.graphcore_login(context(probe)))
    probe = FakeProbe().on("gc-login-01", f"Accepted keyboard-interactive/pam for {USER} ")
    [missing] = todo(checks.graphcore_login(context(probe)))
    assert missing.hint == "on {gc_login}: ssh {gc_node}"


def test_graphcore_setup():
    probe = (FakeProbe()
             .on("gc-poplar-02", "test -x ~/venvs/graphcore/poptorch33_env/bin/python")
             .on("gc-poplar-02", "m.version(\"poptorch\")", "3.3.0+113432_960e9c294b\n")
             .on("gc-poplar-02", "test -d ~/graphcore/examples/.git")
             .on("gc-poplar-02", "git rev-parse HEAD \"v3.3.0^{commit}\"", "a\na\n"))
    assert not todo(checks.graphcore_setup(context(probe)))
    missing = todo(checks.graphcore_setup(context(FakeProbe())))
    assert len(missing) == 4
    assert "virtualenv ~/venvs/graphcore/poptorch33_env" in missing[0].hint
    assert "pip install $POPLAR_SDK_ROOT/poptorch-3.3.0+" in missing[1].hint


def test_graphcore_mnist_needs_a_completed_srun_job_in_the_mnist_directory():
    probe = (FakeProbe()
             .on("gc-slurmctld", "jobcomp.log",
                 jobcomp(7, "python", "FAILED", MNIST)
                 + jobcomp(8, "python", "COMPLETED", MNIST)
                 + jobcomp(9, "python", "COMPLETED", MNIST, user="other(10002)"))
             .on("gc-poplar-02", "ls ~/tmp/*.popef"))
    criteria = checks.graphcore_mnist(context(probe))
    assert not todo(criteria)
    assert criteria[0].evidence == "job 8 (python) COMPLETED"


def test_graphcore_mnist_without_ipus_fails_and_says_so():
    """poptorch fails without an IPU (srun with no --ipus): the job ends FAILED."""
    probe = FakeProbe().on("gc-slurmctld", "jobcomp.log",
                           jobcomp(7, "python", "FAILED", MNIST)
                           + jobcomp(8, "python", "COMPLETED", HOME)  # elsewhere
                           + jobcomp(9, "python", "FAILED", MNIST))
    missing = todo(checks.graphcore_mnist(context(probe)))
    assert len(missing) == 2
    assert "srun --ipus=1 python mnist_poptorch.py" in missing[0].hint
    assert "(your last srun job there ended job 9 (python) FAILED)" in missing[0].hint
    assert "export POPTORCH_CACHE_DIR=~/tmp" in missing[1].hint


def test_graphcore_sbatch():
    probe = (FakeProbe()
             .on("gc-slurmctld", "jobcomp.log",
                 jobcomp(11, "submit-mnist-poptorch-job.sh", "COMPLETED", MNIST))
             .on("gc-poplar-02", "mnist-poptorch-output.log"))
    assert not todo(checks.graphcore_sbatch(context(probe)))
    missing = todo(checks.graphcore_sbatch(context(FakeProbe())))
    assert "sbatch --ipus=1 --output=mnist-poptorch-output.log" in missing[0].hint
    assert "cat " in missing[1].hint


# SambaNova ------------------------------------------------------------------
def sn_job(job_id: int, name: str, state: str, workdir: str = LENET,
           node: str = "sn30-r1-h1") -> str:
    return jobcomp(job_id, name, state, workdir, node=node)


def reserved(job_id: int, rdus: int) -> str:
    return json.dumps({"event": "reserve", "job": str(job_id), "user": USER,
                       "rdus": list(range(rdus))}) + "\n"


def session(job_id: int, command: str) -> str:
    return json.dumps({"event": "session", "job": str(job_id), "user": USER,
                       "command": command, "tiles": ["/XRDU_0/RDU_0/TILE_0"]}) + "\n"


RUN = "python lenet.py run --pef=pef/lenet/lenet.pef"
TEST = "python lenet.py test --pef=pef/lenet/lenet.pef"


def lenet_probe(records: list[str], journal: list[str] = ()) -> FakeProbe:
    return (FakeProbe()
            .on("sn30-r1-h1", "test -f ~/apps/starters/lenet/lenet.py")
            .on("sn30-r1-h1", "test -s ~/apps/starters/lenet/pef/lenet/lenet.pef")
            .on("sn30-slurmctld", "jobcomp.log", "".join(records))
            .on("sn30-r1-h1", "/var/lib/snd/journal.jsonl", "".join(journal)))


def test_lenet_compile_run_and_test():
    probe = lenet_probe([sn_job(1, "python", "COMPLETED"), sn_job(2, "python", "COMPLETED"),
                         sn_job(3, "submit-lenet-job.sh", "COMPLETED"),
                         sn_job(4, "python", "COMPLETED")],
                        [reserved(2, 1), session(2, RUN), reserved(4, 1), session(4, TEST)])
    criteria = checks.sambanova_lenet(context(probe))
    assert not todo(criteria)
    assert criteria[2].evidence == "job 2 (python) COMPLETED on sn30-r1-h1"
    assert criteria[3].evidence == "job 4 (python) COMPLETED on sn30-r1-h1"


def test_lenet_run_twice_is_not_a_test():
    probe = lenet_probe([sn_job(1, "python", "COMPLETED"), sn_job(2, "python", "COMPLETED"),
                         sn_job(3, "python", "COMPLETED")],
                        [session(2, RUN), session(3, RUN)])
    [missing] = todo(checks.sambanova_lenet(context(probe)))
    assert missing.text == "`lenet.py test` completed on the RDUs under srun"
    assert "srun python lenet.py test --pef=\"pef/lenet/lenet.pef\"" in missing.hint


def test_lenet_compiled_but_the_test_failed():
    probe = lenet_probe([sn_job(1, "python", "COMPLETED"), sn_job(2, "python", "COMPLETED"),
                         sn_job(3, "python", "FAILED"),
                         sn_job(4, "python", "COMPLETED", HOME)],  # not in the lenet directory
                        [session(2, RUN), session(3, TEST), session(4, TEST)])
    [missing] = todo(checks.sambanova_lenet(context(probe)))
    assert "srun python lenet.py test --pef=\"pef/lenet/lenet.pef\"" in missing.hint
    assert "(your last srun job ended job 3 (python) FAILED)" in missing.hint


def test_lenet_for_a_learner_who_did_nothing():
    missing = todo(checks.sambanova_lenet(context(FakeProbe())))
    assert len(missing) == 4
    assert "cp -r /opt/sambaflow/apps/starters apps/starters" in missing[0].hint
    assert "srun python lenet.py compile -b=1" in missing[1].hint
    assert "srun python lenet.py run" in missing[2].hint and "your last" not in missing[2].hint


def test_lenet_sbatch_needs_the_batch_job_two_rdus_and_its_output():
    probe = FakeProbe().on("sn30-slurmctld", "jobcomp.log",
                           sn_job(5, "submit-lenet-job.sh", "FAILED"))
    missing = todo(checks.sambanova_sbatch(context(probe)))
    assert len(missing) == 3
    assert "sbatch --gres=rdu:2 --output=pef/lenet/output.log submit-lenet-job.sh" in \
        missing[0].hint
    assert "ended job 5 (submit-lenet-job.sh) FAILED" in missing[0].hint
    probe.on("sn30-r1-h1", "pef/lenet/output.log")
    probe.on("sn10-slurmctld", "jobcomp.log",  # SN10's scheduler counts too
             sn_job(6, "submit-lenet-job.sh", "COMPLETED", node="sm-01"))
    probe.on("sm-01", "/var/lib/snd/journal.jsonl", reserved(6, 1))  # no --gres=rdu:2
    [missing] = todo(checks.sambanova_sbatch(context(probe)))
    assert "(your last batch job held 1 RDU(s))" in missing.hint
    probe.on("sm-01", "/var/lib/snd/journal.jsonl", reserved(5, 2) + reserved(6, 2))
    criteria = checks.sambanova_sbatch(context(probe))
    assert not todo(criteria)
    assert criteria[1].evidence == ("job 6 (submit-lenet-job.sh) COMPLETED: "
                                    "RDUs held on sm-01: 2")


def test_jobcomp_parsing():
    [job] = checks.parse_jobcomp(jobcomp(3, "python", "COMPLETED", MNIST))
    assert (job.job_id, job.name, job.state, job.workdir, job.end) == (
        "3", "python", "COMPLETED", MNIST, "2025-01-01T10:01:00")


# data transfer and port forwarding -------------------------------------------
def test_data_transfer_compares_the_content():
    token = "aitestbed data-transfer exercise for learner: 1234\n"
    probe = FakeProbe().on("cer-login-01", "cat ~/learner-payload.txt", token)
    ctx = context(probe, payload=token, payload_name="learner-payload.txt")
    assert checks.data_transfer(ctx)[0].done
    probe.on("cer-login-01", "cat ~/learner-payload.txt", "something else\n")
    [criterion] = checks.data_transfer(ctx)
    assert not criterion.done and "content differs" in criterion.hint
    assert "scp -F {ssh_config} {payload} {login}:~/" in criterion.hint
    [criterion] = checks.data_transfer(context(FakeProbe()))
    assert not criterion.done and "exercise start data-transfer" in criterion.hint


def forwarding_probe() -> FakeProbe:
    return (FakeProbe()
            .on("sn30-r1-h1", "ss -Hltnp", 'LISTEN 0 5 0.0.0.0:6006 0.0.0.0:* '
                                            'users:(("python3",pid=4242,fd=3))\n')
            .on("sn30-r1-h1", "urlopen(\"http://localhost:6006/\"", "<html>listing</html>"))


def test_port_forwarding_reaches_the_learners_server():
    ctx = context(forwarding_probe(), http_get=lambda url: "<html>listing</html>")
    criteria = checks.port_forwarding(ctx)
    assert not todo(criteria)
    assert criteria[0].evidence == "on sn30-r1-h1"


def test_port_forwarding_without_the_tunnel():
    ctx = context(forwarding_probe(), http_get=lambda url: None)
    [missing] = todo(checks.port_forwarding(ctx))
    assert "-N -f -L localhost:16006:localhost:16006 {sn_login}" in missing.hint
    assert "localhost:16006:localhost:6006 {sn_node}" in missing.hint
    ctx = context(forwarding_probe(), http_get=lambda url: "another server")
    [missing] = todo(checks.port_forwarding(ctx))
    assert "not your server" in missing.hint


def test_port_forwarding_without_a_server():
    missing = todo(checks.port_forwarding(context(FakeProbe(), http_get=lambda url: None)))
    assert len(missing) == 2
    assert "tensorboard --logdir /logs --port 6006" in missing[0].hint


def test_port_forwarding_to_another_users_server():
    """ss shows a socket's process to its owner only: the check runs it as the learner."""
    probe = FakeProbe().on("sn30-r1-h1", "ss -Hltnp", "LISTEN 0 5 0.0.0.0:6006 0.0.0.0:*\n")
    missing = todo(checks.port_forwarding(context(probe, http_get=lambda url: "listing")))
    assert len(missing) == 2
    assert ("sn30-r1-h1", "ss -Hltnp 'sport = :6006' 2>/dev/null", USER) in probe.calls


# catalog, session and CLI ---------------------------------------------------
def test_every_exercise_has_steps_and_a_unique_name():
    names = [e.name for e in catalog.EXERCISES]
    assert len(names) == len(set(names))
    assert all(e.steps and e.system in ("all", "cerebras", "graphcore", "sambanova")
               for e in catalog.EXERCISES)


def test_the_rehearsal_scripts_every_exercise_once():
    from aitestbed.exercises import rehearse
    names = [e.name for e in catalog.EXERCISES]
    assert list(rehearse.SCRIPTS) == names
    staged = [n for stage in rehearse.STAGES for chain in stage for n in chain]
    assert sorted(staged) == sorted(names)


def test_the_rehearsal_onboards_with_an_id_nobody_has():
    from aitestbed.exercises import rehearse
    assert rehearse.free_uid({"users": []}) == 20001
    accounts = {"users": [{"name": "a", "uid": 20001, "gid": 20001}],
                "groups": [{"name": "graphcore", "gid": 20002}],
                "projects": [{"name": "P", "gid": 20003}]}
    assert rehearse.free_uid(accounts) == 20004


def test_the_report_gives_the_wall_time_in_minutes_and_seconds():
    from aitestbed.exercises import rehearse
    assert rehearse.minutes_and_seconds(354.2) == "5 min 54 s"
    assert rehearse.minutes_and_seconds(59.6) == "1 min 00 s"


def test_fill_leaves_shell_braces_alone():
    assert catalog.fill("ssh {gc_node} 'echo ${HOME} {x}'", {"gc_node": "gc-poplar-02"}) == \
        "ssh gc-poplar-02 'echo ${HOME} {x}'"


@pytest.fixture
def cluster_state():
    state = ClusterState("unit")
    state.save(ClusterRecord("unit", "mini", "", None, USER))
    state.common_dir.mkdir(parents=True)
    (state.common_dir / "accounts.json").write_text(json.dumps({"users": [
        {"name": USER, "uid": UID}, {"name": "newhire", "uid": 20001, "active": True},
        {"name": "gone", "uid": 20002, "active": False}]}))
    return state


def invoke(*args: str, probe: FakeProbe | None = None, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr("aitestbed.exercises.session.NodeProbe", lambda name: probe)
    return CliRunner().invoke(cli, ["--name", "unit", "exercise", *args])


def test_list_shows_the_exercises_of_the_cluster(cluster_state):
    result = invoke("list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["NAME", "SYSTEM", "STATUS", "TITLE"]
    assert len(lines) == 1 + len(catalog.EXERCISES)


def test_start_prints_the_steps_with_this_clusters_names(cluster_state):
    result = invoke("start", "graphcore-login")
    assert result.exit_code == 0, result.output
    assert f"ssh -F {cluster_state.ssh_config_path} gc-login-01" in result.output
    assert "ssh gc-poplar-02   (from gc-login-01" in result.output
    record = json.loads((cluster_state.root / "exercises" / f"{USER}.json").read_text())
    assert "graphcore-login" in record["started"]
    assert "started" in invoke("list").output


def test_start_data_transfer_writes_a_file_to_copy(cluster_state):
    result = invoke("start", "data-transfer", "--user", "newhire")
    assert result.exit_code == 0, result.output
    payload = cluster_state.root / "exercises" / "newhire-payload.txt"
    assert f"scp -F {cluster_state.ssh_config_path} {payload} " in result.output
    assert "newhire" in payload.read_text()
    assert "--user newhire" in result.output


def test_check_exit_codes_and_hints(cluster_state, monkeypatch):
    probe = FakeProbe().on("gc-login-01", f"Accepted keyboard-interactive/pam for {USER} from ")
    result = invoke("check", "graphcore-login", probe=probe, monkeypatch=monkeypatch)
    assert result.exit_code == 1, result.output
    assert "  done  logged in to the Graphcore login node" in result.output
    assert "        next: on gc-login-01: ssh gc-poplar-02" in result.output
    probe.on("gc-poplar-02", f"Accepted publickey for {USER} from ")
    result = invoke("check", "graphcore-login", probe=probe, monkeypatch=monkeypatch)
    assert result.exit_code == 0 and "2/2 done: PASSED" in result.output
    assert "passed" in invoke("list").output


@pytest.mark.parametrize("args, message", [
    (["check", "nosuch"], "no exercise 'nosuch'"),
    (["check", "first-login", "--user", "nobody"], "no user 'nobody' on cluster 'unit'"),
    (["check", "first-login", "--user", "gone"], "user 'gone' was offboarded"),
    (["check"], "give one exercise NAME or --all"),
    (["start", "nosuch"], "no exercise 'nosuch'"),
])
def test_bad_input_is_refused_clearly(cluster_state, args, message):
    from aitestbed.host.errors import AitestbedError
    result = invoke(*args)
    assert result.exit_code != 0
    assert isinstance(result.exception, AitestbedError) and message in str(result.exception)


def test_an_unknown_cluster_is_refused():
    from aitestbed.host.errors import AitestbedError
    with pytest.raises(AitestbedError, match="cluster 'unit' does not exist"):
        Session("unit")


def test_check_all_for_a_learner_who_did_nothing(cluster_state, monkeypatch):
    result = invoke("check", "--all", probe=FakeProbe(), monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert f"0/{len(catalog.EXERCISES)} exercises passed" in result.output
    assert result.output.count("next: ") >= len(catalog.EXERCISES)
