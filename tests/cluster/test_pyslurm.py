"""pyslurm's API agrees with squeue/scontrol, inside the cluster and from the host."""

from __future__ import annotations

import importlib
import json

import pytest
from aitestbed.host.driver import wait_for

pytestmark = pytest.mark.presubmit

LOGIN = "gc-login-01"
REPORT = """
import json, pyslurm
jobs = pyslurm.Jobs.load()
print(json.dumps({
    "jobs": {str(i): [j.state, j.user_name, j.partition, j.gres_per_node] for i, j in jobs.items()},
    "nodes": {n: [v.state, v.configured_gres] for n, v in pyslurm.Nodes.load().items()},
    "default": [p.name for p in pyslurm.Partitions.load().values() if p.is_default],
}))
"""


@pytest.fixture
def running_job(cluster):
    rc, out = cluster.run(LOGIN, "sbatch --parsable --ipus=2 -J pyslurm-check -o /dev/null "
                                 "--wrap 'sleep 60'")
    assert rc == 0, out
    job = out.strip()
    wait_for(lambda: cluster.run(LOGIN, f"squeue -h -j {job} -o %T")[1].strip() == "RUNNING",
             30, 0.2, f"job {job} to start")
    yield job
    cluster.run(LOGIN, f"scancel {job}")


@pytest.mark.parametrize("python", ["python3", "/opt/aitestbed/venv/bin/python"])
def test_pyslurm_in_the_cluster_agrees_with_squeue_and_scontrol(cluster, running_job, python):
    rc, out = cluster.run(LOGIN, f"{python} - <<'EOF'\n{REPORT}\nEOF")
    assert rc == 0, out
    report = json.loads(out)
    rc, squeue = cluster.run(LOGIN, f"squeue -h -j {running_job} -o '%T %u %P'")
    state, user, partition = squeue.split()
    assert report["jobs"][running_job][:3] == [state, user, partition]
    assert report["jobs"][running_job][3] == {"ipu": 2}
    assert report["nodes"]["gc-poplar-02"][1] == {"ipu": 16}
    assert report["default"] == ["p64"]


def test_pyslurm_from_the_host_submits_loads_and_cancels(cluster, monkeypatch):
    monkeypatch.setenv("AITESTBED_CLUSTER", cluster.name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no Slurm commands on the host
    pyslurm = importlib.import_module("pyslurm")
    job_id = pyslurm.JobSubmitDescription(
        name="from-host", script="#!/bin/sh\nsleep 60\n", standard_output="/dev/null").submit()
    try:
        job = pyslurm.Job.load(job_id)
        rc, out = cluster.run(LOGIN, f"scontrol show job {job_id}")
        assert "JobName=from-host" in out and f"UserId={cluster.user}(" in out
        assert job.name == "from-host" and job.user_name == cluster.user
        assert job.partition == "p64" and job.working_directory == f"/home/{cluster.user}"
        assert job_id in pyslurm.Jobs.load()
        pyslurm.Job(job_id).cancel()
        # COMPLETING for a moment (its processes are being ended), then CANCELLED
        wait_for(lambda: pyslurm.Job.load(job_id).state == "CANCELLED", 30, 0.5,
                 "the job CANCELLED")
    finally:
        cluster.run(LOGIN, f"scancel {job_id}")
    with pytest.raises(pyslurm.RPCError, match="Invalid job id specified"):
        pyslurm.Job.load(999999)
    assert pyslurm.Partition.load("p64").total_nodes == 2
    with pytest.raises(pyslurm.RPCError, match="Partition 'nosuch' doesn't exist"):
        pyslurm.Partition.load("nosuch")
