"""Slurm on the Graphcore POD64: p64, --ipus in every form, V-IPU partitions."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from aitestbed.host.driver import wait_for

pytestmark = pytest.mark.presubmit

LOGIN = "gc-login-01"
FILES = Path(__file__).parent / "files"


@pytest.fixture(scope="module")
def vipu_query(cluster) -> str:
    """A script in the user's home that prints the job's partition from the V-IPU server."""
    text = (FILES / "vipu_query.py").read_text()
    rc, out = cluster.run(LOGIN, f"cat > ~/vipu_query.py <<'EOF'\n{text}EOF")
    assert rc == 0, out
    return "python3 ~/vipu_query.py"


def vipu_partitions(cluster) -> list[dict]:
    out = cluster.host("gc-slurmctld").check_output(
        "/opt/aitestbed/venv/bin/python -c 'import json; "
        "from aitestbed.graphcore.vipu.client import VipuClient; "
        "print(json.dumps(VipuClient(host=\"localhost\").partitions()))'")
    return json.loads(out)


def test_sinfo_shows_the_default_p64_partition_idle(cluster):
    rc, out = cluster.run(LOGIN, "sinfo")
    assert rc == 0, out
    assert re.search(r"^p64\*\s+up\s+infinite\s+2\s+idle\s+gc-poplar-\[01-02\]$", out, re.M), out


def test_opt_slurm_bin_srun_runs_the_documented_command(cluster):
    rc, out = cluster.run(LOGIN, "/opt/slurm/bin/srun --ipus=1 hostname")
    assert rc == 0, out
    assert "gc-poplar-02" in out  # users' nodes first; gc-poplar-01 gets the overflow


def test_srun_ipus_gets_a_vipu_partition_with_exactly_its_ipus(cluster, vipu_query):
    rc, out = cluster.run(LOGIN, f"srun --ipus=2 sh -c 'echo SLURM_IPUS=$SLURM_IPUS; {vipu_query}'")
    assert rc == 0, out
    partition = json.loads(out.splitlines()[-1])
    assert "SLURM_IPUS=2" in out
    assert partition["name"] == f"slurm_{partition['job_id']}"
    assert len(partition["ipus"]) == 2 and partition["state"] == "PS_ACTIVE"
    assert partition["user"] == cluster.user


def test_the_partition_is_removed_at_job_end(cluster):
    rc, out = cluster.run(LOGIN, "srun --ipus=1 sh -c 'echo $IPUOF_VIPU_API_PARTITION_ID'")
    assert rc == 0, out
    name = out.strip().splitlines()[-1]
    wait_for(lambda: not any(p["name"] == name for p in vipu_partitions(cluster)), 10, 0.2,
             f"{name} to be removed")


def test_a_job_without_ipus_has_no_partition(cluster):
    rc, out = cluster.run(LOGIN, "srun env")
    assert rc == 0, out
    assert "IPUOF_VIPU_API_PARTITION_ID" not in out


@pytest.mark.parametrize("submit, expected", [
    ("sbatch --wait --ipus=2 -o ipus-{tag}.out --wrap 'echo $SLURM_IPUS'", "2"),
    ("printf '#!/bin/sh\\n#SBATCH --ipus=3\\necho $SLURM_IPUS\\n' > s-{tag}.sh && "
     "sbatch --wait -o ipus-{tag}.out s-{tag}.sh", "3"),
    ("printf '#!/bin/sh\\n#SBATCH --ipus=3\\necho $SLURM_IPUS\\n' > s-{tag}.sh && "
     "sbatch --wait --ipus=1 -o ipus-{tag}.out s-{tag}.sh", "1"),
    ("salloc --ipus=2 srun sh -c 'echo $SLURM_IPUS' > ipus-{tag}.out", "2"),
], ids=["sbatch-option", "sbatch-directive", "command-line-overrides-script", "salloc"])
def test_every_ipus_form_allocates_that_many_ipus(cluster, submit, expected):
    tag = f"{time.monotonic_ns()}"
    rc, out = cluster.run(LOGIN, f"cd ~ && {submit.format(tag=tag)}")
    assert rc == 0, out
    rc, out = cluster.run(LOGIN, f"cat ~/ipus-{tag}.out")
    assert out.strip() == expected


@pytest.mark.parametrize("command, message", [
    ("srun --ipus=0 true", "Invalid --ipus specification: '0'"),
    ("srun --ipus=abc true", "Invalid --ipus specification: 'abc'"),
    ("sbatch --ipus=-1 --wrap true", "Invalid --ipus specification: '-1'"),
    ("srun --ipus=17 true",
     "srun: error: Unable to allocate resources: Requested node configuration is not available"),
    ("sbatch --ipus=17 --wrap true",
     "sbatch: error: Batch job submission failed: Requested node configuration is not available"),
    ("srun --ipus=1 --gres=ipu:1 true", "--ipus and --gres=ipu cannot be used together"),
    ("sbatch --gres=ipu:2 --wrap true", "request IPUs with --ipus=N"),
    ("srun -p nosuch true", "Invalid partition name specified"),
    ("srun --nodelist=gc-poplar-09 true", "Invalid node name specified"),
    ("srun --bogus-flag true", "srun: unrecognized option '--bogus-flag'"),
])
def test_bad_requests_get_slurms_message_and_fail(cluster, command, message):
    rc, out = cluster.run(LOGIN, command)
    assert rc != 0
    assert message in out


def test_gres_is_never_oversubscribed(cluster):
    rc, out = cluster.run(LOGIN, "for i in 1 2 3 4 5; do sbatch --parsable --ipus=16 -o /dev/null "
                                 "--wrap 'sleep 60'; done")
    assert rc == 0, out
    jobs = out.split()
    try:
        deadline = time.monotonic() + 20
        while True:
            rc, states = cluster.run(LOGIN, f"squeue -h -j {','.join(jobs)} -o '%T %r'")
            if states.count("RUNNING") == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert states.count("RUNNING") == 2, states
        assert states.count("PENDING Resources") + states.count("PENDING Priority") == 3, states
        rc, nodes = cluster.run(LOGIN, "scontrol show node -d | grep GresUsed")
        assert nodes.count("GresUsed=ipu:16") == 2, nodes
        assert sum(len(p["ipus"]) for p in vipu_partitions(cluster)) == 32
    finally:
        cluster.run(LOGIN, f"scancel {' '.join(jobs)}")


def test_output_lands_in_the_submit_directory_on_the_shared_home(cluster):
    rc, out = cluster.run(LOGIN, "mkdir -p ~/mnist && cd ~/mnist && "
                                 "printf '#!/bin/sh\\nhostname\\n' "
                                 "> submit-mnist-poptorch-job.sh && sbatch --wait --ipus=1 "
                                 "--output=mnist-poptorch-output.log submit-mnist-poptorch-job.sh")
    assert rc == 0, out
    rc, out = cluster.run(LOGIN, "cat ~/mnist/mnist-poptorch-output.log")
    assert rc == 0 and out.strip().startswith("gc-poplar-0"), out


def test_a_user_cannot_cancel_another_users_job(cluster):
    other = cluster.host(LOGIN).check_output(
        "sbatch --parsable -o /dev/null --wrap 'sleep 60'").strip()  # root's job
    try:
        rc, out = cluster.run(LOGIN, f"scancel {other}")
        assert rc != 0
        assert f"Kill job error on job id {other}: Access/permission denied" in out
        rc, out = cluster.run(LOGIN, f"squeue -h -j {other} -o %T")
        assert out.strip() in ("PENDING", "CONFIGURING", "RUNNING")  # still there, untouched
    finally:
        cluster.host(LOGIN).run(f"scancel {other}")
