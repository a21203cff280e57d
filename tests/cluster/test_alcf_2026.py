"""The testbed as ALCF's current docs show it (profile alcf-2026-mini, Cerebras and
Graphcore): their Cerebras blocks, run as a user on the user node (reference:
alcf-testbed-2026.md §2.2-2.8, 2.11), and the Graphcore POD behind its renamed login
node (§3). A cluster of its own, brought up for this module.

Set AITESTBED_TEST_CLUSTER_2026 to run against an existing alcf-2026 cluster instead.
"""

from __future__ import annotations

import os
import re
import uuid

import pytest
from aitestbed.cerebras import csctl
from aitestbed.cerebras import guide as cs_guide
from aitestbed.node import guide

from .conftest import Cluster

pytestmark = pytest.mark.presubmit

PROFILE = "alcf-2026-mini"
LOGIN = "cer-login-04"
GC_LOGIN = "gc-login-03"
USERNODE = cs_guide.CS3_USER_NODES[0]
GPT3 = cs_guide.GPT3.path
# customizing-environment.md, as a user types it (deactivate and rm -r complain, harmlessly,
# on a first install).
SETUP = "\n" + guide.script(cs_guide.CS3_SETUP) + "\n"
# running-a-model-or-program.md
RUN = "\n" + guide.script(cs_guide.CS3_ENTER, cs_guide.cs3_run(cs_guide.GPT3),
                          cs_guide.CS3_JOB_IDS) + "\n"
# running-a-model-or-program.md, restart from a checkpoint (max_steps raised to 800 first)
RESTART = "\n" + guide.script(cs_guide.CS3_ENTER, f"cd {GPT3}", cs_guide.CS3_MORE_STEPS,
                              cs_guide.CS3_RESTART) + "\n"
JOB_ID = re.compile(r"INFO:   Job id: (wsjob-[a-z0-9]+), workflow id: (wflow-[a-z0-9]+), "
                    r"namespace: job-operator, remote log path: "
                    r"/n1/wsjob/workdir/job-operator/wsjob-[a-z0-9]+$", re.M)


@pytest.fixture(scope="module")
def testbed():
    existing = os.environ.get("AITESTBED_TEST_CLUSTER_2026")
    name = existing or f"ci26-{uuid.uuid4().hex[:6]}"
    os.environ["AITESTBED_USER"] = "learner"
    c = Cluster(name, "learner")
    if not existing:
        c.cli("up", "--profile", PROFILE, "--systems", "cerebras,graphcore", timeout=1800)
    try:
        for host in (LOGIN, GC_LOGIN):
            result = c.log_in(host)
            assert result.returncode == 0, result.stderr
        yield c
    finally:
        for host in (LOGIN, GC_LOGIN):
            c.log_out(host)
        if not existing:
            c.cli("destroy", check=False)


def on_usernode(testbed, script: str, timeout: float = 600) -> tuple[int, str]:
    return testbed.hop(LOGIN, USERNODE, script, timeout=timeout)


def test_the_login_path_of_the_docs(testbed):
    """`ssh ALCFUserID@cerebras.alcf.anl.gov`, then `ssh cer-usn-01`; the prompt's name."""
    result = testbed.ssh(cs_guide.CS3_HOST, "hostname")
    assert result.returncode == 0 and result.stdout.strip() == LOGIN, result.stderr
    rc, out = on_usernode(testbed, "hostname; stat -c %a ~")
    assert rc == 0 and out.split()[:2] == ["cer-anl-net001-us-sr01", "700"], out


def test_graphcore_behind_its_renamed_login_node(testbed):
    """getting-started.md: `ssh ALCFUserID@gc-login-03.ai.alcf.anl.gov`, then
    `ssh gc-poplar-02`; job-queuing-and-submission.md: sinfo's p64 and `srun --ipus=1`."""
    rc, out = testbed.run(GC_LOGIN, "hostname; sinfo")
    assert rc == 0 and out.startswith(f"{GC_LOGIN}\n"), out
    assert re.search(r"^p64\*\s+up\s+infinite\s+2\s+idle\s+gc-poplar-\[01-02\]$", out, re.M)
    rc, out = testbed.hop(GC_LOGIN, "gc-poplar-02", "srun --ipus=1 hostname")
    assert rc == 0 and re.search(r"^gc-poplar-0[12]$", out, re.M), out


def test_csctl_of_release_2_10(testbed):
    rc, out = on_usernode(testbed, "csctl -h")
    assert rc == 0 and out == csctl.USAGE_2026, out
    rc, out = on_usernode(testbed, "csctl --version; csctl get cluster; csctl get nodegroup")
    assert rc == 0 and out.startswith("csctl version 2.10.0\n"), out
    assert re.search(r"^cer-cs3-01 +system +CS-3 +ok", out, re.M), out
    assert re.search(r"^cer-mgmt-01 +node +management", out, re.M), out
    assert len(re.findall(r"^cer-anl-net001-mx-sr\d\d +node +memoryx", out, re.M)) == 24
    assert re.search(r"^nodegroup1 +12 +183Gi", out, re.M), out
    rc, out = on_usernode(testbed, "csctl get cluster --role bogus; csctl -v")
    assert rc != 0 and "invalid role: bogus" in out and "unknown shorthand flag" in out


@pytest.fixture(scope="module")
def gpt3(testbed):
    """The docs' venv and install, then their GPT-3 111M run (once for the module)."""
    rc, setup = on_usernode(testbed, SETUP, timeout=600)
    assert "Release_2.10.0" in setup, setup
    assert re.search(r"Successfully installed cerebras[-_]modelzoo-2\.10\.0 "
                     r"cerebras[-_]pytorch-2\.10\.0", setup), setup
    rc, out = on_usernode(testbed, RUN, timeout=900)
    assert rc == 0, out
    return out


def test_the_docs_gpt3_run(testbed, gpt3):
    jobs = list(dict.fromkeys(JOB_ID.findall(gpt3)))  # the log, then the docs' grep -B1
    assert len(jobs) == 2 and jobs[0][1] == jobs[1][1], gpt3  # compile + execute, one workflow
    assert "Initiating a new compile wsjob against the cluster server." in gpt3
    assert re.search(r"\| Train Device=CSX, Step=400, Loss=\d+\.\d{5}, Rate=[\d.]+ samples/sec, "
                     r"GlobalRate=[\d.]+ samples/sec, LoopTimeRemaining=0:00:00, "
                     r"TimeRemaining=0:00:00", gpt3), gpt3
    assert re.search(r"\| Eval Device=CSX, GlobalStep=400, Batch=100, Loss=", gpt3)
    assert "Saved checkpoint model_dir_gpt3_111m/checkpoint_400.mdl" in gpt3
    assert re.search(r"INFO:   Poll ingress success: Job ingress ready, dashboard: "
                     r"https://grafana\.anl0\.cerebras\.internal/d/WebHNShVz/wsjob-dashboard"
                     r"\?orgId=1&var-wsjob=wsjob-[a-z0-9]+&from=\d{13}&to=now$", gpt3, re.M), gpt3
    processed = re.search(r"Processed 48000 training sample\(s\) in ([\d.]+) seconds\.", gpt3)
    assert processed and abs(float(processed.group(1)) - 820.6) < 5, gpt3  # docs: 820.58 s

    rc, table = on_usernode(testbed, "csctl get jobs -a")
    assert rc == 0, table
    header = table.splitlines()[0].split()
    assert header == ["SESSION", "NAME", "TYPE", "PRIORITY", "AGE", "DURATION", "PHASE",
                      "SYSTEMS", "USER", "LABELS", "WORKFLOW", "DASHBOARD"]
    rows = [line.split() for line in table.splitlines()[1:] if jobs[0][1] in line]
    assert sorted(r[2] for r in rows) == ["compile", "execute"], table
    assert all(r[0] == "job-operator" and r[3:5] == ["P2", "(299)"] for r in rows), table
    execute = next(r for r in rows if r[2] == "execute")
    assert execute[8].startswith("cer-cs3-0") and "name=gpt3_111m,user=learner" in execute


@pytest.mark.slow("a second 400-step GPT-3 run, restarted from the checkpoint (restart)")
def test_restart_from_the_checkpoint_finds_the_cached_compile(testbed, gpt3):
    rc, out = on_usernode(testbed, RESTART, timeout=900)
    assert rc == 0, out
    assert re.search(r'Found existing cached compile with hash: "cs_\d+"', out), out
    assert "Loading weights from checkpoint" in out
    assert re.search(r"\| Train Device=CSX, Step=420, ", out) and "Step=800," in out
    rc, listing = on_usernode(testbed, f"ls {GPT3}/model_dir_gpt3_111m")
    assert "checkpoint_400.mdl" in listing and "checkpoint_800.mdl" in listing


def test_more_systems_than_the_cluster_has_is_the_schedulers_error(testbed, gpt3):
    rc, out = on_usernode(testbed, guide.one_line(
        cs_guide.CS3_ENTER, f"cd {GPT3}",
        f"cszoo fit {cs_guide.GPT3.yaml} --model_dir three --num_csx=3"), timeout=600)
    assert rc != 0 and "job requests 3 system(s) but the cluster has 2" in out, out
    assert "Traceback" not in out


def test_a_tag_without_setup_py_fails_as_the_docs_troubleshooting_says(testbed, gpt3):
    """"if modelzoo/setup.py does not exist after tag checkout, please re-clone": an older
    release's tree has none, and pip says so."""
    rc, out = on_usernode(testbed, f"{cs_guide.CS3_ACTIVATE} && "
                                   "rm -rf ~/mz-old && "
                                   f"{guide.quietly(cs_guide.CS_CLONE)} ~/mz-old && "
                                   f"git -C ~/mz-old checkout -q {cs_guide.CS_TAG} && "
                                   "ls ~/mz-old/setup.py; pip install -e ~/mz-old; "
                                   "echo rc=$?; rm -rf ~/mz-old")
    assert "No such file or directory" in out, out
    assert "neither 'setup.py' nor 'pyproject.toml' found" in out and "rc=1" in out, out


# example-programs.md: two of its blocks verbatim (ESM-2 reads /software/datasets, DiT
# the dataset tree of Release 2.10); every example runs in the unit tests.
EXAMPLES = "\n" + guide.script(cs_guide.CS3_ENTER, cs_guide.cs3_run(cs_guide.ESM2),
                               cs_guide.cs3_run(cs_guide.DIT)) + "\n"


@pytest.mark.slow("two more example programs (ESM-2, DiT): every example beyond the first")
def test_the_docs_example_programs_esm2_and_dit(testbed, gpt3):
    rc, out = on_usernode(testbed, EXAMPLES, timeout=900)
    assert rc == 0, out
    for model_dir, step, samples in (("model_dir_esm2", 400, 819200),
                                     ("model_dir_dit", 400, 467200)):
        assert f"Saved checkpoint {model_dir}/checkpoint_{step}.mdl" in out, out
        assert f"Processed {samples} training sample(s) in " in out, out
    rates = [float(r) for r in re.findall(r"\| Train Device=CSX, Step=(?:100|200), Loss=[\d.]+, "
                                          r"Rate=([\d.]+) samples/sec", out)]
    assert len(rates) == 4, out  # steps 100 and 200 of each
    assert all(940 < r < 1020 for r in rates[:2]), out  # ESM-2: the docs' ~980 samples/s
    assert all(830 < r < 910 for r in rates[2:]), out  # DiT: the docs' ~870 samples/s
    rc, mine = on_usernode(testbed, f"ls {cs_guide.ESM2.path}/{cs_guide.ESM2.model_dir}; "
                                    "readlink /software/datasets")
    assert rc == 0 and "checkpoint_400.mdl" in mine, mine
