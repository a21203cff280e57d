"""Slurm on SambaNova SN30 and SN10: rdu GRES, the docs' multi-node scripts, PMI2."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.presubmit

FILES = Path(__file__).parent / "files"


@pytest.fixture(scope="module")
def pmi2_ring(cluster) -> str:
    text = (FILES / "pmi2_ring.py").read_text()
    rc, out = cluster.run("sambanova", f"cat > ~/pmi2_ring.py <<'EOF'\n{text}EOF")
    assert rc == 0, out
    return "python3 ~/pmi2_ring.py"


def test_the_login_node_submits_to_the_sn30_scheduler(cluster):
    rc, out = cluster.run("sambanova", "sinfo")
    assert rc == 0, out
    assert re.search(r"^sambanova\*\s+up\s+infinite\s+1\s+idle\s+sn30-r1-h1$", out, re.M), out


def test_sn10_nodes_have_their_own_scheduler_and_submit_themselves(cluster):
    rc, out = cluster.run("sambanova", "ssh sm-01 sinfo")
    assert rc == 0, out
    assert re.search(r"^sambanova\*\s+up\s+infinite\s+2\s+idle\s+sm-\[01-02\]$", out, re.M), out
    rc, out = cluster.run("sambanova", "ssh sm-01 'srun --nodelist=sm-02 hostname'")
    assert rc == 0 and out.strip() == "sm-02", out


def test_sinfo_gres_columns_as_in_the_docs(cluster):
    rc, out = cluster.run("sambanova", "sinfo -O AllocNodes,GresUsed,Gres,NodeList")
    assert rc == 0, out
    assert out.split()[:4] == ["ALLOCNODES", "GRES_USED", "GRES", "NODELIST"]
    assert re.search(r"rdu:8\s+sn30-r1-h1", out), out


SND_JOBS = "python3 -c 'import json; from aitestbed.sambanova.snd.client import SndClient; " \
           "print(json.dumps(SndClient().jobs()))'"


def test_rdu_gres_gives_the_job_its_rdus_in_snd_and_a_plain_job_gets_one(cluster):
    rc, out = cluster.run("sambanova", "cd ~ && sbatch --wait --gres=rdu:2 -o rdu-%j.out --wrap "
                                       f"\"{SND_JOBS}; echo JOB=\\$SLURM_JOB_ID\" >/dev/null && "
                                       "cat $(ls -t rdu-*.out | head -n1)")
    assert rc == 0, out
    records, job = out.rsplit("JOB=", 1)
    held = json.loads(records)[job.strip()]
    assert held["user"] == cluster.user and len(held["rdus"]) == 2
    rc, out = cluster.run("sambanova", f"srun bash -c \"{SND_JOBS}; echo JOB=\\$SLURM_JOB_ID\"")
    assert rc == 0, out
    records, job = out.rsplit("JOB=", 1)
    assert len(json.loads(records)[job.strip()]["rdus"]) == 1, out
    deadline = time.monotonic() + 20  # the epilog runs just after the job ends
    while True:
        rc, after = cluster.run("sambanova", f"ssh sn30-r1-h1 \"{SND_JOBS}\"")
        assert rc == 0, after
        if job.strip() not in json.loads(after) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert job.strip() not in json.loads(after), after


def test_rdu_over_request_is_refused_by_slurm(cluster):
    rc, out = cluster.run("sambanova", "sbatch --gres=rdu:9 --wrap true")
    assert rc != 0
    assert "Batch job submission failed: Requested node configuration is not available" in out


def test_srun_mpi_pmi2_across_two_nodes(cluster, pmi2_ring):
    rc, out = cluster.run("sambanova", f"ssh sm-01 'cd ~ && srun --mpi=pmi2 --nodes 2 "
                                       f"--ntasks-per-node 2 {pmi2_ring}'")
    assert rc == 0, out
    lines = sorted(ln for ln in out.splitlines() if ln.startswith("rank "))
    assert len(lines) == 4, out
    for line in lines:
        assert line.endswith("sees sm-01,sm-01,sm-02,sm-02"), out


def test_the_unet_multi_node_batch_script_shape(cluster, pmi2_ring):
    """The docs' `sbatch --gres=rdu:1 --tasks-per-node 8 --nodes 2 --nodelist sm-02,sm-01
    --cpus-per-task=16 ./unet_batch.sh` whose body runs `srun --mpi=pmi2 python ...`."""
    script = "#! /bin/bash -x\\nset -e\\nsrun --mpi=pmi2 " + pmi2_ring + "\\n"
    rc, out = cluster.run("sambanova", (
        f"ssh sm-01 'cd ~ && printf \"{script}\" > unet_batch.sh && chmod +x unet_batch.sh && "
        "sbatch --wait -J unet -o %x-%j-%A.out --gres=rdu:1 --tasks-per-node 8 --nodes 2 "
        "--nodelist sm-02,sm-01 --cpus-per-task=16 ./unet_batch.sh'"))
    assert rc == 0, out
    job = re.search(r"Submitted batch job (\d+)", out).group(1)
    rc, log = cluster.run("sambanova", f"cat ~/unet-{job}-{job}.out")
    assert rc == 0, log
    assert len([ln for ln in log.splitlines() if ln.startswith("rank ")]) == 16, log
    assert "of 16 on sm-02" in log and "of 16 on sm-01" in log


def test_gpt_style_single_node_tasks(cluster):
    rc, out = cluster.run("sambanova", "srun --ntasks 16 --gres=rdu:8 --ntasks-per-node 16 "
                                       "--nodes 1 hostname | sort | uniq -c")
    assert rc == 0, out
    assert re.search(r"16 sn30-r1-h1", out), out
