"""The queue survives a controller restart; a dead compute node fails its jobs."""

from __future__ import annotations

import docker
from aitestbed.host.driver import wait_for

LOGIN = "gc-login-01"
POLL = 1.0  # seconds between two looks


def job_states(cluster, jobs: list[str]) -> dict[str, str]:
    rc, out = cluster.run(LOGIN, f"squeue -h -t all -j {','.join(jobs)} -o '%i %T'")
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


def test_a_killed_compute_node_goes_down_and_its_jobs_fail_or_requeue(cluster):
    rc, out = cluster.run(LOGIN, "sbatch --parsable --requeue -w gc-poplar-01 -o /dev/null "
                                 "--wrap 'sleep 300'; sbatch --parsable --no-requeue "
                                 "-w gc-poplar-01 -o /dev/null --wrap 'sleep 300'")
    requeued, failed = out.split()
    try:
        wait_for(lambda: set(job_states(cluster, [requeued, failed]).values()) == {"RUNNING"},
                 20, POLL, "both jobs RUNNING")
        docker.from_env().containers.get(cluster.container("gc-poplar-01")).kill()
        wait_for(lambda: job_states(cluster, [failed]).get(failed) == "NODE_FAIL", 90,
                 POLL, "NODE_FAIL")
        node = wait_for(lambda: "State=DOWN" in (out := cluster.run(
            LOGIN, "scontrol show node gc-poplar-01")[1]) and out, 30, POLL, "the node DOWN")
        assert "Reason=Not responding" in node
        rc, out = cluster.run(LOGIN, f"scontrol show job {requeued}")
        assert "JobState=PENDING" in out and "Restarts=1" in out, out
    finally:
        cluster.run(LOGIN, f"scancel {requeued} {failed}")
        cluster.cli("up")
    rc, out = cluster.run(LOGIN, "sinfo -h -N -n gc-poplar-01 -o %t")
    assert out.strip() == "idle", out
