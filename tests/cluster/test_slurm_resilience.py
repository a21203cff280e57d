"""The queue survives a controller restart; a dead compute node fails its jobs."""

from __future__ import annotations

import time

import docker
import pytest
from aitestbed.host.driver import wait_for

pytestmark = pytest.mark.slow("restarts the controller and kills a node under running jobs "
                              "(faults)")

LOGIN = "gc-login-01"
POLL = 1.0  # seconds between two looks


def job_states(cluster, jobs: list[str]) -> dict[str, str]:
    rc, out = cluster.run(LOGIN, f"squeue -h -t all -j {','.join(jobs)} -o '%i %T'")
    return dict(line.split() for line in out.splitlines() if line.strip())


def controller_job_states(cluster, jobs: list[str]) -> dict[str, str]:
    """The jobs' states as the controller reports them, read in its container (no ssh)."""
    result = docker.from_env().containers.get(cluster.container("gc-slurmctld")).exec_run(
        ["squeue", "-h", "-t", "all", "-j", ",".join(jobs), "-o", "%i %T"])
    out = result.output.decode()
    assert result.exit_code == 0, out
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_a_controller_restart_keeps_queued_and_running_jobs(cluster):
    rc, out = cluster.run(LOGIN, "sbatch --parsable --ipus=1 -o /dev/null --wrap 'sleep 120'; "
                                 "sbatch --parsable --hold --ipus=1 -o /dev/null --wrap true")
    running, held = out.split()
    try:
        wait_for(lambda: job_states(cluster, [running]).get(running) == "RUNNING", 20, POLL,
                 "RUNNING")
        docker.from_env().containers.get(cluster.container("gc-slurmctld")).restart()
        wait_for(lambda: cluster.run(LOGIN, "scontrol ping")[1].count("is UP"), 60,
                 POLL, "the controller")
        assert job_states(cluster, [running, held]) == {running: "RUNNING", held: "PENDING"}
        rc, out = cluster.run(LOGIN, f"scontrol show job {held}")
        assert "Reason=JobHeldUser" in out
    finally:
        cluster.run(LOGIN, f"scancel {running} {held}")


def test_a_crash_keeps_what_slurmctld_saved_five_seconds_before(cluster):
    """F1: slurmctld saves its state at most every 5 s (SAVE_MAX_WAIT, compiled into
    Slurm 22.05), so a `kill -9` loses jobs accepted in the last seconds (docs/slurm.md
    says which). Jobs accepted 7 s before the crash are all there after runit restarts
    it, and the running one was not started again."""
    rc, out = cluster.run(LOGIN, "sbatch --parsable --ipus=1 -o /dev/null --wrap 'sleep 120'; "
                                 "sbatch --parsable --hold -o /dev/null --wrap true; "
                                 "sbatch --parsable --hold -o /dev/null --wrap true")
    assert rc == 0, out
    jobs = out.split()
    try:
        wait_for(lambda: job_states(cluster, jobs[:1]).get(jobs[0]) == "RUNNING", 20, POLL,
                 "RUNNING")
        started = cluster.run(LOGIN, f"squeue -h -j {jobs[0]} -o %S")[1].strip()
        time.sleep(7)
        controller = docker.from_env().containers.get(cluster.container("gc-slurmctld"))
        assert controller.exec_run(["pkill", "-9", "-x", "slurmctld"]).exit_code == 0
        wait_for(lambda: "is UP" in cluster.run(LOGIN, "scontrol ping")[1], 60, POLL,
                 "the controller")
        assert controller_job_states(cluster, jobs) == {
            jobs[0]: "RUNNING", jobs[1]: "PENDING", jobs[2]: "PENDING"}
        assert cluster.run(LOGIN, f"squeue -h -j {jobs[0]} -o %S")[1].strip() == started
    finally:
        cluster.run(LOGIN, f"scancel {' '.join(jobs)}")


def sinfo_state(cluster, node: str) -> str:
    return cluster.run(LOGIN, f"sinfo -h -N -n {node} -o %t")[1].strip()


def test_a_killed_compute_node_goes_down_and_its_jobs_fail_or_requeue(cluster):
    """A job that did not ask for --requeue ends NODE_FAIL and never runs again (Slurm's
    default JobRequeue=1 would re-run it); one with --requeue is requeued."""
    marks = "~/resilience-ran"
    rc, out = cluster.run(LOGIN, f"rm -f {marks}.*; "
                                 "sbatch --parsable --requeue -w gc-poplar-01 -o /dev/null "
                                 f"--wrap 'echo ran >> {marks}.$SLURM_JOB_ID; sleep 300'; "
                                 "sbatch --parsable -w gc-poplar-01 -o /dev/null "
                                 f"--wrap 'echo ran >> {marks}.$SLURM_JOB_ID; sleep 300'")
    requeued, failed = out.split()
    try:
        wait_for(lambda: set(job_states(cluster, [requeued, failed]).values()) == {"RUNNING"},
                 20, POLL, "both jobs RUNNING")
        wait_for(lambda: cluster.run(LOGIN, f"cat {marks}.{failed}")[0] == 0, 20, POLL,
                 "the job's first line")
        docker.from_env().containers.get(cluster.container("gc-poplar-01")).kill()
        killed = time.monotonic()
        wait_for(lambda: job_states(cluster, [failed]).get(failed) == "NODE_FAIL", 90,
                 POLL, "NODE_FAIL")
        node = wait_for(lambda: "State=DOWN" in (out := cluster.run(
            LOGIN, "scontrol show node gc-poplar-01")[1]) and out, 30, POLL, "the node DOWN")
        assert "Reason=Not responding" in node
        # sinfo says so too (the review saw `mixed*` for 2 minutes after the node was DOWN).
        wait_for(lambda: sinfo_state(cluster, "gc-poplar-01") == "down*", 10, POLL, "sinfo down*")
        assert time.monotonic() - killed < 60
        rc, out = cluster.run(LOGIN, f"scontrol show job {requeued}")
        assert "JobState=PENDING" in out and "Restarts=1" in out, out
        rc, out = cluster.run(LOGIN, f"scontrol show job {failed}")
        assert "JobState=NODE_FAIL" in out and "Restarts=0" in out, out
    finally:
        cluster.run(LOGIN, f"scancel {requeued} {failed}")
        cluster.cli("up")
    wait_for(lambda: sinfo_state(cluster, "gc-poplar-01") == "idle", 15, POLL, "the node idle")
    rc, out = cluster.run(LOGIN, f"cat {marks}.{failed}; rm -f {marks}.*")
    assert out.split() == ["ran"]  # its script ran once
    assert job_states(cluster, [failed]) == {failed: "NODE_FAIL"}


def test_down_then_up_settles_the_jobs_that_were_running_at_once(cluster):
    """A7: the jobs that ran when the cluster stopped leave RUNNING as `up` returns (they
    showed RUNNING with no process for about a minute): NODE_FAIL, or requeued."""
    rc, out = cluster.run(LOGIN, "sbatch --parsable --requeue --ipus=1 -o /dev/null "
                                 "--wrap 'sleep 600'; sbatch --parsable --ipus=1 -o /dev/null "
                                 "--wrap 'sleep 600'")
    requeued, failed = out.split()
    try:
        wait_for(lambda: set(job_states(cluster, [requeued, failed]).values()) == {"RUNNING"},
                 30, POLL, "both jobs RUNNING")
        cluster.cli("down")
        cluster.cli("up")
        # The first look once `up` has returned (on the controller, before any login):
        # neither job is RUNNING any more.
        states = controller_job_states(cluster, [requeued, failed])
        assert "RUNNING" not in states.values(), states
        assert states[failed] == "NODE_FAIL", states
        cluster.log_in_everywhere()  # `up` restarted the login nodes' sshd
        rc, out = cluster.run(LOGIN, f"scontrol show job {requeued}")
        assert "Restarts=1" in out and "JobState=RUNNING" not in out, out
        # The nodes marked down are back in service as their slurmd registered.
        wait_for(lambda: all(line.split()[1] in ("idle", "mix", "alloc") for line in cluster.run(
            LOGIN, "sinfo -h -N -o '%N %t' -p p64")[1].splitlines()), 15, POLL,
            "the nodes in service")
    finally:
        cluster.run(LOGIN, f"scancel {requeued} {failed}")
