"""The Cerebras Wafer-Scale Cluster as a user meets it: the guide's blocks on cer-login-01.

The appliance (Kubernetes API, scheduler, agents) runs on cer-mgmt-01 and the
two CS-2 hosts; every job here goes through it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from aitestbed.cerebras import guide as cs_guide
from aitestbed.host.driver import wait_for
from aitestbed.node import guide

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

LOGIN = "cer-login-01"
POLL = 0.5  # seconds between two looks at a job
MGMT = "cer-mgmt-01"
FC_MNIST = cs_guide.FC_MNIST
VENV = cs_guide.CS_ACTIVATE
# The guide's run, with $(whoami) as a user types it.
RUN = cs_guide.cs_run("pt_smoketest")
# The guide's set-up, from scratch on a cluster reused with AITESTBED_TEST_CLUSTER, then
# the data set in configs/params.yaml.
SETUP_2_1_1 = guide.script(cs_guide.CS_HOME, "rm -rf venv_cerebras_pt modelzoo",
                           cs_guide.CS_VENV_SETUP, cs_guide.CS_MODELZOO_SETUP,
                           f"cd {cs_guide.FC_MNIST}", cs_guide.CS_SET_DATA_DIR)


def csctl_jobs(cluster, *args: str) -> list[dict]:
    rc, out = cluster.run(LOGIN, f"csctl get jobs -a -o json {' '.join(args)}")
    assert rc == 0, out
    return json.loads(out)["items"]


def job_named(cluster, name: str) -> dict:
    return next(j for j in csctl_jobs(cluster) if j["metadata"]["name"] == name)


def start_run(cluster, name: str, args: str = "", scale: float = 0.2) -> None:
    """A documented run in the background, its output in ~/<name>.log, its PID in ~/<name>.pid."""
    command = (f"{VENV} && cd {FC_MNIST} && export MODEL_DIR=model_{name} && "
               f"rm -rf $MODEL_DIR && AITESTBED_TIME_SCALE={scale} "
               f"{RUN.replace('pt_smoketest', name)} {args}")
    rc, out = cluster.run(LOGIN, f"nohup bash -c {shlex.quote(command)} > ~/{name}.log 2>&1 "
                                 f"< /dev/null & echo $! > ~/{name}.pid")
    assert rc == 0, out


def execute_job_of(cluster, label: str, phase: str | None = None) -> dict | None:
    for job in csctl_jobs(cluster, "-l", f"name={label}"):
        current = (job.get("status") or {}).get("phase")  # none until the scheduler saw it
        if job["spec"]["jobType"] == "execute" and phase in (None, current):
            return job
    return None


def run_log(cluster, name: str) -> str:
    return cluster.run(LOGIN, f"cat ~/{name}.log")[1]


@pytest.fixture(scope="module")
def release_2_1_1(cluster):
    """The guide's venv, install, clone and checkout, once for the module."""
    rc, out = cluster.run(LOGIN, SETUP_2_1_1, timeout=300)
    assert rc == 0, out
    return out


def test_setup_blocks_of_the_guide(release_2_1_1):
    assert "Release_2.1.1" in release_2_1_1
    assert re.search(r"Successfully installed cerebras[-_]pytorch-2\.1\.1", release_2_1_1)


@pytest.fixture(scope="module")
def smoketest(cluster, release_2_1_1):
    """The guide's fc_mnist run, exactly as documented (default time scale)."""
    rc, out = cluster.run(LOGIN, guide.one_line(cs_guide.CS_ENTER, cs_guide.CS_FRESH_MODEL_DIR,
                                                cs_guide.CS_SMOKETEST) + "; exit ${PIPESTATUS[0]}",
                          timeout=300)
    assert rc == 0, out
    return out


def test_fc_mnist_runs_on_the_wafer_scale_cluster(smoketest):
    lines = smoketest.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING):   ", ln)
               for ln in lines if ln.strip()), smoketest
    for expected in ["Compiling the model. This may take a few minutes.",
                     "Initiating a new compile wsjob against the cluster server.",
                     "Ingress is ready: Job ingress ready, poll ingress success.",
                     "Compile was successful!",
                     "Initiating a new execute wsjob against the cluster server.",
                     "Preparing to execute using 1 CSX", "Beginning appliance run",
                     "Training completed successfully!"]:
        assert expected in smoketest
    assert re.search(r"compile job id: wsjob-[a-z0-9]{22}, remote log path: "
                     r"/n1/wsjob/workdir/job-operator/wsjob-[a-z0-9]{22}", smoketest)
    steps = re.findall(r"\| Train Device=CSX, Step=(\d+), Loss=([\d.]+), Rate=[\d.]+ "
                       r"samples/sec, GlobalRate=[\d.]+ samples/sec", smoketest)
    assert [int(s) for s, _ in steps] == list(range(50, 1001, 50))
    assert re.search(r"Processed 4000 sample\(s\) in [\d.]+ seconds\.", smoketest)


def test_tensorboard_reads_the_runs_summaries_in_model_dir(cluster, smoketest):
    """The modelzoo writes TensorBoard event files in <model_dir>/train; TensorBoard's own
    reader, on the login node, finds the loss of each logged step (50 to 1000)."""
    reader = ("from tensorboard.backend.event_processing.event_accumulator import "
              "EventAccumulator\n"
              "run = EventAccumulator('model_dir/train')\nrun.Reload()\n"
              "print(sorted(run.Tags()['scalars']))\n"
              "print([s.step for s in run.Scalars('loss')])")
    rc, out = cluster.run(LOGIN, f"cd {FC_MNIST} && python3 -c {shlex.quote(reader)} "
                                 "2>/dev/null && tensorboard --version 2>/dev/null")
    assert rc == 0, out
    tags, steps, version = out.strip().splitlines()[-3:]
    assert tags == "['avg_samples_per_sec', 'local_samples_per_sec', 'loss']"
    assert steps == str(list(range(50, 1001, 50)))
    assert version == "2.13.0"


def test_the_run_leaves_its_model_dir_and_log(cluster, smoketest):
    rc, out = cluster.run(LOGIN, f"cd {FC_MNIST} && ls model_dir && ls -l model_dir/cerebras_logs "
                                 "&& test -s mytest.log")
    assert rc == 0, out
    assert "checkpoint_1000.mdl" in out and "latest ->" in out


def test_csctl_lists_both_jobs_with_the_documented_columns(cluster, smoketest):
    compile_id = re.search(r"compile job id: (wsjob-\w+)", smoketest).group(1)
    execute_id = re.search(r"execute job id: (wsjob-\w+)", smoketest).group(1)
    rc, out = cluster.run(LOGIN, "csctl get jobs")
    assert rc == 0, out
    assert out.splitlines()[0].split() == ["NAME", "AGE", "DURATION", "PHASE", "SYSTEMS", "USER",
                                           "LABELS", "DASHBOARD"]
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    # The appliance adds user=<name> to the job's own labels (`name=pt_smoketest,user=username`).
    labels = f"name=pt_smoketest,user={cluster.user}"
    assert rows[compile_id][3:6] == ["SUCCEEDED", cluster.user, labels]
    assert rows[execute_id][3:7] == ["SUCCEEDED", "cer-cs2-01", cluster.user, labels]
    assert rows[execute_id][7].startswith("https://grafana.cerebras1.lab.alcf.anl.gov/d/")


def test_label_a_job_and_find_it_with_grep(cluster, smoketest):
    name = csctl_jobs(cluster, "-l", "name=pt_smoketest")[-1]["metadata"]["name"]
    rc, out = cluster.run(LOGIN, f"csctl label job {name} testlabel=test")
    assert (rc, out.strip()) == (0, f"job/{name} was patched")
    rc, out = cluster.run(LOGIN, 'csctl get jobs | grep "testlabel=test"')
    assert rc == 0 and out.startswith(name), out
    # The guide's row: `... cer-cs2-02 username testlabel=test,user=username`.
    assert f"name=pt_smoketest,testlabel=test,user={cluster.user}" in out.split(), out
    rc, out = cluster.run(LOGIN, f"csctl label job {name} testlabel-")
    assert rc == 0 and "testlabel" not in json.dumps(job_named(cluster, name)["metadata"])


def test_log_export_gives_the_jobs_logs(cluster, smoketest):
    name = csctl_jobs(cluster, "-l", "name=pt_smoketest")[-1]["metadata"]["name"]
    rc, out = cluster.run(LOGIN, f"cd /tmp && csctl log-export {name} && "
                                 f"tar tzf {name}.tar.gz && rm {name}.tar.gz")
    assert rc == 0, out
    assert f"{name}/workload.log" in out and f"{name}/result.json" in out


def test_the_api_server_audits_users_listing_their_jobs_and_nothing_else(cluster):
    """`csctl get jobs` leaves a record (the exercises read it); the appliance's polling
    does not."""
    rc, out = cluster.run(LOGIN, "csctl get jobs")
    assert rc == 0, out
    log = cluster.host(MGMT).check_output("cat /var/log/kubernetes/audit.log")
    events = [json.loads(line) for line in log.splitlines()]
    assert any(e["verb"] == "list" and e["user"]["username"] == cluster.user
               and e["objectRef"]["resource"] == "wsjobs" for e in events)
    assert all("cerebras-users" in e["user"].get("groups", []) and e["verb"] == "list"
               for e in events)
    assert cluster.host(MGMT).file("/var/log/kubernetes").mode == 0o700


def test_csctl_help_and_version(cluster):
    rc, out = cluster.run(LOGIN, "csctl -h")
    assert rc == 0 and out.startswith("Cerebras cluster command line tool.")
    assert "  log-export         Gather and download logs." in out
    rc, out = cluster.run(LOGIN, "csctl cancel -h; csctl -v")
    assert rc == 0 and "usage: csctl cancel" in out and "csctl version 2.1.1" in out


@pytest.mark.slow("times a cancel of a running job against a two-second bound (timing)")
def test_cancel_stops_a_running_job_within_two_seconds(cluster, release_2_1_1):
    start_run(cluster, "cancelme", scale=0.3)
    job = wait_for(lambda: execute_job_of(cluster, "cancelme", "RUNNING"), 120, POLL,
                   "the execute job to run")
    name = job["metadata"]["name"]
    rc, out = cluster.run(LOGIN, f"csctl cancel job {name}")
    assert (rc, out.strip()) == (0, "Job canceled successfully")
    cancelled = time.monotonic()
    wait_for(lambda: job_named(cluster, name)["status"]["phase"] == "CANCELLED", 5, POLL,
             "CANCELLED")
    assert time.monotonic() - cancelled <= 2.5  # 2 s, plus one csctl round trip
    log = wait_for(lambda: (lambda t: t if "failed due to" in t else None)(
        run_log(cluster, "cancelme")), 30, POLL, "the client to report")
    assert f"Job {name} failed due to: canceled by {cluster.user}" in log
    rc, out = cluster.run(LOGIN, f"csctl cancel job {name}")
    assert rc == 1 and "has already ended (CANCELLED)" in out


@pytest.mark.slow("two runs back to back, a 2-CSX job then a queued 1-CSX one (load)")
def test_jobs_queue_first_come_first_served(cluster, release_2_1_1):
    """A two-system job, then a one-system job: the second waits for the first."""
    start_run(cluster, "two_csx", "--num_csx=2", scale=0.3)
    wait_for(lambda: execute_job_of(cluster, "two_csx"), 120, POLL, "the 2-CSX execute job")
    start_run(cluster, "one_csx", scale=0.3)
    second = wait_for(lambda: execute_job_of(cluster, "one_csx"), 120, POLL,
                      "the 1-CSX execute job")
    first = execute_job_of(cluster, "two_csx")
    assert first["status"]["systems"] == ["cer-cs2-01", "cer-cs2-02"]
    for name in ("two_csx", "one_csx"):
        wait_for(lambda n=name: "Training completed successfully!" in run_log(cluster, n), 240,
                 POLL, f"{name} to finish")
    first, second = job_named(cluster, first["metadata"]["name"]), job_named(
        cluster, second["metadata"]["name"])
    assert second["status"]["startTime"] >= first["status"]["completionTime"]
    assert "Preparing to execute using 2 CSX" in run_log(cluster, "two_csx")
    assert re.search(r"current job status: Queueing, msg: job is queueing\. Job queue status: "
                     r"current job is top of queue but likely blocked by running jobs, "
                     r"1 execute job\(s\) running using 2 system\(s\)",
                     run_log(cluster, "one_csx"))


def test_a_user_cannot_cancel_or_label_another_users_job(cluster):
    """Enforced by the API server: csctl and a direct API call are both refused."""
    admin = cluster.host(MGMT)
    manifest = json.dumps({
        "apiVersion": "jobs.cerebras.com/v1", "kind": "WSJob",
        "metadata": {"name": "wsjob-someoneelsesjob000000", "namespace": "job-operator"},
        "spec": {"user": {"username": "someone"}, "jobType": "compile", "numWafers": 1,
                 "workdir": "/n1/wsjob/workdir/job-operator/x", "release": "none",
                 "request": "{}"}})
    admin.check_output(f"echo {shlex.quote(manifest)} | kubectl apply -f -")
    # Its release is not installed, so it fails at once; then staff mark it running
    # somewhere no agent looks, to have another user's live job to try.
    wait_for(lambda: job_named(cluster, "wsjob-someoneelsesjob000000").get("status", {})
             .get("phase") == "FAILED", 30, POLL, "the job to fail")
    admin.check_output("kubectl patch wsjob -n job-operator wsjob-someoneelsesjob000000 "
                       "--subresource=status --type=merge "
                       """-p '{"status": {"phase": "RUNNING", "node": "nowhere"}}'""")
    try:
        rc, out = cluster.run(LOGIN, "csctl cancel job wsjob-someoneelsesjob000000")
        assert rc == 1
        assert "belongs to someone: only its owner may change or cancel it" in out
        rc, out = cluster.run(LOGIN, "csctl label job wsjob-someoneelsesjob000000 a=b")
        assert rc == 1 and "only its owner" in out
        direct = ("python3 -c 'from aitestbed.cerebras import config, kubeapi; "
                  "usernode = config.load_usernode_config(); "
                  "api = kubeapi.KubeApi(config.user_credentials(usernode)); "
                  "api.patch_job(\"wsjob-someoneelsesjob000000\", "
                  "{\"spec\": {\"cancelRequested\": True}})'")
        rc, out = cluster.run(LOGIN, direct)
        assert rc != 0 and "ApiError" in out and "belongs to someone" in out
    finally:
        admin.run("kubectl delete wsjob -n job-operator wsjob-someoneelsesjob000000")


@pytest.mark.slow("kills the scheduler and the agent mid-job (fault)")
def test_killed_scheduler_and_agent_leave_nothing_stuck(cluster, release_2_1_1):
    start_run(cluster, "survivor", scale=0.3)
    job = wait_for(lambda: execute_job_of(cluster, "survivor", "RUNNING"), 120, POLL, "RUNNING")
    cluster.host(MGMT).check_output("sv kill wsjob-controller")
    cluster.host(job["status"]["node"]).check_output("sv kill wsjob-agent")
    wait_for(lambda: "Training completed successfully!" in run_log(cluster, "survivor"), 180,
             POLL, "the run to finish")
    done = wait_for(lambda: (lambda j: j if j["status"]["phase"] == "SUCCEEDED" else None)(
        job_named(cluster, job["metadata"]["name"])), 30, POLL, "SUCCEEDED")
    assert done["status"]["systems"] == job["status"]["systems"]
    # nothing is held: no job is left active
    active = [j for j in csctl_jobs(cluster) if j["status"].get("phase") in
              ("SCHEDULED", "RUNNING")]
    assert active == []


@pytest.mark.slow("restarts the management node's container mid-run (fault, F7)")
def test_a_run_survives_a_restart_of_the_management_node(cluster, release_2_1_1):
    """F7: `docker restart` of cer-mgmt-01 while a run waits on its job. The restarted API
    server refuses (403) what RBAC allows until it is ready; the client asks /readyz and
    tries again instead of giving the run up."""
    import docker  # noqa: PLC0415

    start_run(cluster, "restarted", scale=0.5)
    wait_for(lambda: "job id" in run_log(cluster, "restarted").lower(), 240, POLL,
             "the run's compile job")
    docker.from_env().containers.get(cluster.container(MGMT)).restart(timeout=10)
    wait_for(lambda: "Training completed successfully!" in run_log(cluster, "restarted")
             or "Error" in run_log(cluster, "restarted"), 600, POLL, "the run to end")
    log = run_log(cluster, "restarted")
    assert "Training completed successfully!" in log, log[-3000:]
    assert "forbidden" not in log, log[-3000:]


@pytest.mark.slow("kills the client mid-job and waits out the 30 s heartbeat timeout (fault)")
def test_a_job_whose_client_died_is_cancelled(cluster, release_2_1_1):
    # Half the real pace: the execute job (about 85 s of device time) still runs when the
    # 30 s without heartbeats are up; the compile waits 30 s, not 60.
    start_run(cluster, "orphan", scale=0.5)
    job = wait_for(lambda: execute_job_of(cluster, "orphan", "RUNNING"), 240, POLL, "RUNNING")
    cluster.run(LOGIN, "pkill -9 -f 'name=orphan'")
    cancelled = wait_for(lambda: (lambda j: j if j["status"]["phase"] == "CANCELLED" else None)(
        job_named(cluster, job["metadata"]["name"])), 60, POLL, "CANCELLED")
    assert cancelled["status"]["message"] == "the client stopped sending heartbeats"


@pytest.mark.parametrize("change, message", [
    ("--mount_dirs /home/", "FileNotFoundError"),
    ("--python_paths /tmp", "ModuleNotFoundError: No module named 'modelzoo'"),
])
def test_documented_configuration_errors(cluster, release_2_1_1, change, message):
    flag = change.split()[0]
    command = re.sub(rf"{flag} [^-]+", change + " ", RUN)
    rc, out = cluster.run(LOGIN, f"{VENV} && cd {FC_MNIST} && export MODEL_DIR=model_bad && "
                                 f"{command}", timeout=300)
    assert rc == 1, out
    assert message in out and "Traceback" not in out


def test_compile_only_with_validate_only_is_refused(cluster, release_2_1_1):
    rc, out = cluster.run(LOGIN, f"{VENV} && cd {FC_MNIST} && export MODEL_DIR=m && {RUN} "
                                 "--compile_only --validate_only")
    assert rc == 2 and "not allowed with argument" in out


@pytest.mark.parametrize("command, message", [
    ("python run.py CSX -p nope.yaml -m train", "nope.yaml"),
    ("python run.py CSX -p configs/params.yaml -m fly", "invalid choice: 'fly'"),
    ("python run.py TPU -p configs/params.yaml -m train", "invalid choice: 'TPU'"),
    ("csctl cancel job wsjob-doesnotexist", "job wsjob-doesnotexist not found"),
    ("csctl label job wsjob-doesnotexist a=b=c", "invalid label value"),
    ("csctl --namespace default get jobs", "you may not use namespace 'default'"),
    ("csctl get widgets", 'unknown resource type "widgets"'),
])
def test_bad_input_gets_a_clear_message(cluster, release_2_1_1, command, message):
    rc, out = cluster.run(LOGIN, f"{VENV} && cd {FC_MNIST} && {command}")
    assert rc != 0 and message in out, out
    assert "Traceback" not in out


def test_the_manifests_apply_to_a_kubernetes_api_server(cluster):
    """deploy/wsjob with the scheduler's Deployment, checked by the API server (dry run)."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run(["docker", "cp", str(root / "deploy" / "wsjob"),
                    f"{cluster.container(MGMT)}:/tmp/wsjob-manifests"], check=True)
    result = cluster.host(MGMT).run("kubectl apply --dry-run=server -k "
                                    "/tmp/wsjob-manifests/scheduler")
    assert result.rc == 0, result.stderr
    assert "deployment.apps/wsjob-scheduler created (server dry run)" in result.stdout
    assert "rolebinding.rbac.authorization.k8s.io/wsjob-scheduler created" in result.stdout


@pytest.mark.slow("takes the session cluster down and up (restart)")
def test_jobs_survive_down_and_up(cluster, smoketest):
    """The API's data is on the management node's own volume."""
    before = {j["metadata"]["name"] for j in csctl_jobs(cluster)}
    cluster.cli("down")
    cluster.cli("up")
    cluster.log_in_everywhere()
    assert before <= {j["metadata"]["name"] for j in csctl_jobs(cluster)}
