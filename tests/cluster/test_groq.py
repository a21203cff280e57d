"""The GroqRack as ALCF's docs show it (profile alcf-2026-mini, SYSTEMS=groq): the login
path, the real OpenPBS (qsub, qstat, qdel, qhold, the .o/.e files, place=excl, a job
queued while every node is busy, bad requests with PBS's own messages), the GroqCards
a job holds (tspd, tsp-ctl, lspci) and GroqFlow. Reference: groq.md §1-§6.

Set AITESTBED_TEST_CLUSTER_GROQ to run against an existing cluster instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid

import pytest
from aitestbed.groq import guide as groq_guide
from aitestbed.node import guide

from .conftest import Cluster

pytestmark = pytest.mark.presubmit

PROFILE = "alcf-2026-mini"
LOGIN = "groq-login-01"
NODES = ("groq-r01-gn-01", "groq-r01-gn-02")
JOB = re.compile(r"^(\d+)\.groq-r01-control$", re.M)


@pytest.fixture(scope="module")
def testbed():
    existing = os.environ.get("AITESTBED_TEST_CLUSTER_GROQ")
    name = existing or f"cigq-{uuid.uuid4().hex[:6]}"
    os.environ["AITESTBED_USER"] = "learner"
    c = Cluster(name, "learner")
    if not existing:
        c.cli("up", "--profile", PROFILE, "--systems", "groq", timeout=1800)
    try:
        result = c.log_in(LOGIN)
        assert result.returncode == 0, result.stderr
        yield c
    finally:
        c.log_out(LOGIN)
        if not existing:
            c.cli("destroy", check=False)


def on_node(testbed, script: str, node: str = NODES[0], timeout: float = 300):
    return testbed.hop(LOGIN, node, script, timeout=timeout)


def wait_for(testbed, script: str, pattern: str, timeout: float = 90, node: str = NODES[0]):
    """Run script on a GroqNode until its output matches pattern; the last output."""
    deadline = time.monotonic() + timeout
    while True:
        rc, out = on_node(testbed, script, node)
        if re.search(pattern, out, re.M) or time.monotonic() > deadline:
            return out
        time.sleep(2)


def submit(testbed, script: str, args: str, name: str = "run.sh", node: str = NODES[0]) -> str:
    rc, out = on_node(testbed, f"mkdir -p ~/pbs && cd ~/pbs && cat > {name} <<'EOF'\n"
                               f"{script}\nEOF\nchmod +x {name}\nqsub {args} {name}", node)
    match = JOB.search(out)
    assert rc == 0 and match, out
    return match.group(1)


def test_the_login_path_and_the_rack(testbed):
    """`ssh ALCFUserID@groq.ai.alcf.anl.gov` lands on a login node; from there any GroqNode;
    qstat works on a login node, qsub does not (running-a-model-or-program.md)."""
    result = testbed.ssh(groq_guide.GROQ_HOST, "hostname")
    assert result.returncode == 0 and result.stdout.strip() == LOGIN, result.stderr
    rc, out = testbed.run(LOGIN, "qstat -B; echo sleep 1 | qsub; echo rc=$?")
    assert re.search(r"^groq-r01-control +0 +\d+ .* Active", out, re.M), out
    assert "qsub: Access from host not allowed, or unknown host" in out and "rc=0" not in out
    rc, out = on_node(testbed, "hostname; pbsnodes -a")
    assert out.startswith("groq-r01-gn-01\n"), out
    assert out.count("resources_available.groq_accelerator = 8") == 2, out
    assert re.search(r"^groq-r01-gn-02\n +Mom = groq-r01-gn-02", out, re.M), out


def test_a_batch_job_the_docs_way_holds_the_nodes_eight_cards(testbed):
    """qsub -l select=1,place=excl run.sh; the job sees its node's eight GroqCards
    (lspci -n, what GroqFlow counts); its output lands in run.sh.o<id>/.e<id>, mode 0600."""
    rc, out = on_node(testbed, "lspci -n | grep -c 1de0:0000; tsp-ctl status | grep -c Unlocked")
    assert out.split() == ["0", "8"], out  # outside a job: no card
    job = submit(testbed, "#!/bin/bash\nhostname\nlspci -n | grep -c 1de0:0000\n"
                          "tsp-ctl status | grep -ac 'Device Unlocked'\necho oops >&2",
                 groq_guide.EXCL)
    out = wait_for(testbed, f"qstat -x {job}", rf"^{job}\.groq-r01-contr\* +run\.sh +learner "
                                                r"+\S+ F workq")
    assert re.search(rf"^{job}\.groq-r01-contr\* +run\.sh +learner", out, re.M), out
    rc, out = on_node(testbed, f"cd ~/pbs; stat -c '%a %U %n' run.sh.o{job} run.sh.e{job}; "
                               f"cat run.sh.o{job} run.sh.e{job}")
    lines = out.splitlines()
    assert lines[:2] == [f"600 learner run.sh.o{job}", f"600 learner run.sh.e{job}"], out
    assert lines[2] in NODES and lines[3:] == ["8", "8", "oops"], out


@pytest.mark.slow("three exclusive jobs fill the rack and the third queues (queueing under load)")
def test_place_excl_keeps_jobs_apart_and_the_third_waits(testbed):
    """Two exclusive jobs run on different nodes; a third queues (Q) until one ends;
    qhold holds it (H), qrls releases it, qdel removes it."""
    jobs = [submit(testbed, "#!/bin/bash\nsleep 25", groq_guide.EXCL, f"excl{i}.sh")
            for i in range(3)]
    out = wait_for(testbed, "qstat -f -F json | python3 -c 'import json,sys; "
                            "d=json.load(sys.stdin)[\"Jobs\"]; print(\"\\n\".join("
                            "k.split(\".\")[0]+\" \"+v[\"job_state\"]+\" \""
                            "+v.get(\"exec_host\",\"-\") for k,v in d.items()))'",
                   rf"^{jobs[1]} R ")
    states = dict(line.split(" ", 1) for line in out.splitlines() if line[:1].isdigit())
    assert states[jobs[0]].startswith("R ") and states[jobs[1]].startswith("R "), out
    hosts = {states[j].split()[1].split("/")[0] for j in jobs[:2]}
    assert hosts == set(NODES), out
    assert states[jobs[2]] == "Q -", out
    rc, out = on_node(testbed, f"qstat -f {jobs[2]} | grep comment; qhold {jobs[2]}; "
                               f"qstat {jobs[2]} | tail -1; qrls {jobs[2]}; qdel {jobs[2]}; "
                               f"qstat -x {jobs[2]} | tail -1")
    assert "comment = Not Running: Not enough free nodes available" in out, out
    assert re.search(rf"^{jobs[2]}\.\S+ +excl2\.sh +learner +\S+ H workq", out, re.M), out
    assert re.search(rf"^{jobs[2]}\.\S+ +excl2\.sh +learner +\S+ F workq", out, re.M), out
    on_node(testbed, f"qdel {jobs[0]} {jobs[1]}")


def test_a_forged_pbs_jobid_gets_no_card(testbed):
    """The attack: outside any job (a plain ssh session on the node where the user's job
    runs) set PBS_JOBID to that job and ask for its cards. tspd knows a process's job by
    its session, which PBS made for the job: the forged variable gives nothing."""
    job = submit(testbed, "#!/bin/bash\nsleep 60", groq_guide.EXCL, "hold.sh")
    wait_for(testbed, f"qstat {job}", rf"^{job}\.\S+ +hold\.sh +learner +\S+ R ")
    rc, out = on_node(testbed, f"qstat -f {job} | grep exec_host")
    node = re.search(r"exec_host = (groq-r01-gn-0\d)", out).group(1)
    rc, out = on_node(testbed, f"PBS_JOBID={job}.groq-r01-control lspci -n | grep -c 1de0; "
                               f"PBS_JOBID={job}.groq-r01-control tsp-ctl clear", node)
    on_node(testbed, f"qdel {job}")
    assert out.splitlines()[0] == "0", out
    assert "No device to clear: no GroqCard of this node is yours" in out, out


def test_bad_requests_get_pbs_own_messages(testbed):
    rc, out = on_node(testbed, "cd ~/pbs; qsub -l select=one run.sh; echo rc=$?; "
                               "qdel 99999; echo rc=$?; qsub -l walltime=forever run.sh; "
                               "echo rc=$?; qstat 99999; echo rc=$?")
    assert "qsub: Illegal attribute or resource value" in out, out
    assert "qdel: Unknown Job Id 99999.groq-r01-control" in out, out
    assert "qstat: Unknown Job Id 99999.groq-r01-control" in out, out
    assert "rc=0" not in out, out


# running-a-model-or-program.md's job script, in its short form (the conda block of the
# docs falls through to `conda activate groqflow` when ~/miniconda3 does not exist): the
# hello-world example, estimate_performance, the chips it used, and BERT-tiny (50 samples).
GROQFLOW_JOB = "#!/bin/bash\n" + guide.script(
    groq_guide.GROQFLOW_HELLO, groq_guide.ESTIMATE_PERFORMANCE,
    groq_guide.chips_used("hello_world"),
    groq_guide.proof_point("natural_language_processing/bert", "bert_tiny.py",
                           environment="BERT_TINY_NUM_TEST=50")) + "\n"


def test_groqflow_the_docs_way_in_a_pbs_job(testbed):
    """git clone groqflow, then a job that activates the environment and runs the
    hello-world example, estimate_performance and the BERT-tiny proof point on the
    node's GroqChips; outside a job the same run finds no chip."""
    rc, out = on_node(testbed, guide.one_line("cd ~", groq_guide.GROQFLOW_SETUP,
                                              f"ls {groq_guide.GROQFLOW}", "conda info --envs",
                                              quiet=True))
    assert rc == 0 and "proof_points" in out and "groqflow" in out.split("# conda")[1], out
    rc, out = on_node(testbed, f"{guide.one_line(groq_guide.GROQFLOW_HELLO)}; echo rc=$?",
                      node=NODES[1])
    assert 'Building "hello_world"' in out and "✓ Assembling model" in out, out
    assert "Trying to execute a model compiled for 1 GroqChip processors but this machine " \
           "only has 0 GroqChip processors available." in out and "rc=1" in out, out
    job = submit(testbed, GROQFLOW_JOB, groq_guide.EXCL, "run_groqflow.sh")
    wait_for(testbed, f"qstat -x {job}", rf"^{job}\.\S+ +run_groqflow\.sh +learner +\S+ F ",
             timeout=300)
    rc, out = on_node(testbed, f"cat ~/pbs/run_groqflow.sh.o{job}")
    # built outside the job (no chip is needed to build), run in it: the cache is shared
    assert 'Woohoo! Build "hello_world" (build_name auto-selected) found in cache. ' \
           'Loading it!' in out, out
    assert "Example hello_world.py finished" in out, out
    assert re.search(r"Your build's estimated performance is:\n\d+\.\d{7} seconds\n"
                     r"[\d.]+ inferences per second", out), out
    assert "num_chips_used: 1" in out, out
    table = re.search(r"^\|  groq  \|  (\d+\.\d\d)%  \|  +0\.05  +\|  +19328\.60  +\|  +0\.03 ",
                      out, re.M)
    assert table and float(table.group(1)) >= 85, out
    assert re.search(r"Proof point \S+/bert_tiny\.py finished!", out), out


def test_an_unsupported_op_gets_groqflows_error(testbed):
    script = ("import torch\nfrom groqflow import groqit\n\n"
              "class Det(torch.nn.Module):\n    def forward(self, x):\n"
              "        return torch.linalg.det(x)\n\n"
              "groqit(Det(), {'x': torch.rand(3, 3)}, build_name='det')\n")
    rc, out = on_node(testbed, f"{groq_guide.GROQFLOW_ACTIVATE}; cd ~; "
                               f"cat > det.py <<'EOF'\n{script}"
                               "EOF\npython det.py; echo rc=$?")
    assert "× Checking for Op support" in out, out
    assert "You model contains ONNX operation(s) that are not supported by Groq Compiler" in out
    assert "Det" in out and "rc=1" in out, out


def test_an_interactive_job_the_docs_way(testbed):
    """qsub -IV -l walltime=... -l select=1,place=excl: a shell on a GroqNode holding its
    eight cards, in the job's environment."""
    # qsub -I wants a terminal, as a user's ssh session has (script(1) gives it one).
    rc, out = on_node(testbed, "printf 'hostname\\nlspci -n | grep -c 1de0:0000\\n"
                               "echo PBS_JOBID=$PBS_JOBID\\nexit\\n' | script -qec "
                               f"'{groq_guide.qsub_interactive('00:05:00')}' /dev/null",
                      timeout=120)
    out = out.replace("\r", "")
    assert re.search(r"qsub: waiting for job \d+\.groq-r01-control to start", out), out
    assert re.search(r"qsub: job \d+\.groq-r01-control ready", out), out
    assert re.search(r"^groq-r01-gn-0[12]\n.*\n8\n.*\nPBS_JOBID=\d+\.groq-r01-control$", out,
                     re.M), out
    assert re.search(r"qsub: job \d+\.groq-r01-control completed", out), out


@pytest.mark.slow("restarts the PBS server's container (restart)")
def test_queued_jobs_survive_a_restart_of_the_pbs_server(testbed):
    """PBS's promise: a held job and the job history are in the server's datastore (a
    volume), so a restart of the server's container keeps them."""
    job = submit(testbed, "#!/bin/bash\nhostname", "-h", "held.sh")
    subprocess.run(["docker", "restart", "-t", "20", testbed.container("groq-r01-control")],
                   check=True, capture_output=True, timeout=120)
    out = wait_for(testbed, f"qstat {job}", rf"^{job}\.\S+ +held\.sh +learner +\S+ H workq",
                   timeout=120)
    assert re.search(rf"^{job}\.\S+ +held\.sh +learner +\S+ H workq", out, re.M), out
    rc, out = on_node(testbed, f"qrls {job}; sleep 1")
    out = wait_for(testbed, f"qstat -x {job}", rf"^{job}\.\S+ +held\.sh +learner +\S+ F ")
    assert re.search(rf"^{job}\.\S+ +held\.sh +learner +\S+ F workq", out, re.M), out
