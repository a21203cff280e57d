"""The exercises on a running cluster: the practice user does some as the guide says and
passes; a new user who did nothing, or did it wrong, is told what to do next; and
`make rehearse`'s scripted learner, a new user onboarded here, passes every one.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid

import pytest
import yaml
from aitestbed.exercises.checks import http_get
from aitestbed.host.driver import wait_for
from aitestbed.node import guide

LOGIN, GC_LOGIN, GC_NODE, SN_LOGIN, SN_NODE = ("cer-login-01", "gc-login-01", "gc-poplar-02",
                                               "sambanova", "sn30-r1-h1")

pytestmark = pytest.mark.presubmit


def exercise(cluster, *args: str) -> subprocess.CompletedProcess:
    return cluster.cli("exercise", *args, check=False)


@pytest.fixture(scope="module")
def newcomer(cluster, tmp_path_factory) -> str:
    """A user onboarded with the staff's playbook, who has done nothing yet."""
    name = f"new{uuid.uuid4().hex[:5]}"
    people = tmp_path_factory.mktemp("people") / "people.yml"
    people.write_text(yaml.safe_dump({"accounts": [{
        "name": name, "uid": 29000 + int(uuid.uuid4().hex[:3], 16) % 1000,
        "systems": ["cerebras", "graphcore", "sambanova"]}]}))
    result = cluster.driver.cli("playbook", "onboard-user", "-e", f"user={name}",
                                "-e", f"@{people}", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]
    yield name
    cluster.log_out(SN_LOGIN, name)


def test_list_shows_every_exercise_of_the_mini_cluster(cluster):
    result = exercise(cluster, "list")
    assert result.returncode == 0, result.stderr
    names = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert names == ["first-login", "cerebras-setup", "cerebras-fc-mnist", "cerebras-cancel",
                     "graphcore-login", "graphcore-setup", "graphcore-mnist",
                     "graphcore-sbatch", "sambanova-lenet", "sambanova-sbatch",
                     "data-transfer", "port-forwarding"]


def test_first_login_with_the_passcode_passes(cluster):
    """The session logged in on every login node with a passcode (conftest)."""
    result = exercise(cluster, "check", "first-login")
    assert result.returncode == 0, result.stdout
    assert "1/1 done: PASSED" in result.stdout


def test_graphcore_two_step_login_passes(cluster):
    rc, out = cluster.run(GC_LOGIN, f"ssh {GC_NODE} hostname")
    assert rc == 0, out
    result = exercise(cluster, "check", "graphcore-login")
    assert result.returncode == 0, result.stdout
    assert f"[sshd on {GC_NODE}]" in result.stdout


def test_data_transfer_with_scp(cluster):
    started = exercise(cluster, "start", "data-transfer")
    assert started.returncode == 0, started.stderr
    payload = cluster.state.root / "exercises" / f"{cluster.user}-payload.txt"
    assert f"scp -F {cluster.ssh_config} {payload} {LOGIN}:~/" in started.stdout
    before = exercise(cluster, "check", "data-transfer")
    assert before.returncode == 1 and f"scp -F {cluster.ssh_config} " in before.stdout
    scp = cluster.driver.scp(payload, LOGIN, timeout=60)
    assert scp.returncode == 0, scp.stderr
    after = exercise(cluster, "check", "data-transfer")
    assert after.returncode == 0, after.stdout


def test_rsync_both_ways_rides_the_shared_connection(cluster, tmp_path):
    """The guide's other transfer tool: rsync over the config's ssh asks no passcode."""
    source = tmp_path / "results"
    (source / "run1").mkdir(parents=True)
    (source / "summary.txt").write_text("alpha\n")
    (source / "run1" / "loss.csv").write_text("step,loss\n1,2.30\n")
    target = f"rsync-{uuid.uuid4().hex[:6]}"
    ssh = " ".join(cluster.driver.ssh_base())

    def rsync(src: str, dest: str) -> subprocess.CompletedProcess:
        return subprocess.run(["rsync", "-a", "-e", ssh, src, dest], capture_output=True,
                              text=True, timeout=60, check=False)

    sent = rsync(f"{source}/", f"{LOGIN}:{target}/")
    assert sent.returncode == 0, sent.stderr
    rc, out = cluster.run(LOGIN, f"cat {target}/summary.txt {target}/run1/loss.csv")
    assert (rc, out) == (0, "alpha\nstep,loss\n1,2.30\n")
    back = tmp_path / "back"
    fetched = rsync(f"{LOGIN}:{target}/", f"{back}/")
    assert fetched.returncode == 0, fetched.stderr
    assert (back / "run1" / "loss.csv").read_text() == "step,loss\n1,2.30\n"
    cluster.run(LOGIN, f"rm -rf {target}")


def test_port_forwarding_reaches_the_server_on_the_sambanova_node(cluster):
    if subprocess.run(["ss", "-Hltn", "sport = :16006"], capture_output=True,
                      text=True).stdout.strip():
        pytest.skip("port 16006 is in use on this machine")
    server = guide.SERVER  # the guide's tensorboard line
    hop = f"ssh -N -f -L localhost:16006:localhost:6006 {SN_NODE}"
    def control(action: str) -> subprocess.CompletedProcess:
        """Ask the shared connection to the login node to open or close the tunnel."""
        return cluster.driver.control(SN_LOGIN, action, "-L", "localhost:16006:localhost:16006")

    rc, out = cluster.run(SN_LOGIN, f"ssh {SN_NODE} 'cd ~ && (nohup {server} > /dev/null 2>&1 "
                                    f"< /dev/null &)' && {hop}")
    assert rc == 0, out
    try:
        opened = control("forward")
        assert opened.returncode == 0, opened.stderr
        wait_for(lambda: http_get("http://127.0.0.1:16006/"), 60, 1.0, "TensorBoard to start")
        result = exercise(cluster, "check", "port-forwarding")
        assert result.returncode == 0, result.stdout
        assert f"127.0.0.1:16006 serves what {SN_NODE} serves" in result.stdout
    finally:
        control("cancel")
        cluster.run(SN_LOGIN, f"kill $(pgrep -u $(id -u) -xf {shlex.quote(hop)}); ssh {SN_NODE} "
                              f"'pkill -u $(id -u) -f \"{server}\"'")


def test_a_user_who_did_nothing_gets_a_hint_for_everything(cluster, newcomer):
    result = exercise(cluster, "check", "--all", "--user", newcomer)
    assert result.returncode == 1
    assert "0/12 exercises passed" in result.stdout
    assert result.stdout.count("  todo  ") == result.stdout.count("        next: ")
    assert f"next: get your code with `aitestbed --name {cluster.name} passcode {newcomer}`" \
        in result.stdout
    assert "next: cd ~/R_2.1.1 && git clone https://github.com/Cerebras/modelzoo.git" \
        in result.stdout


def test_a_wrong_attempt_is_named_in_the_hint(cluster, newcomer):
    """LeNet run before it was compiled: Slurm records the failed job, the check says so."""
    login = cluster.log_in(SN_LOGIN, newcomer)
    assert login.returncode == 0, login.stderr
    script = ("cd ~ && mkdir -p apps && cp -r /opt/sambaflow/apps/starters apps/starters && "
              "source /opt/sambaflow/apps/starters/lenet/venv/bin/activate && "
              "cd apps/starters/lenet && srun python lenet.py run --pef=pef/lenet/lenet.pef")
    result = cluster.ssh(SN_LOGIN, f"ssh {SN_NODE} bash -lc {shlex.quote(script)}", "-l",
                         newcomer, timeout=300)
    assert result.returncode != 0
    check = exercise(cluster, "check", "sambanova-lenet", "--user", newcomer)
    assert check.returncode == 1
    assert "  done  the starters copied to ~/apps/starters" in check.stdout
    assert "next: on sn30-r1-h1: source /opt/sambaflow/apps/starters/lenet/venv/bin/activate" \
        in check.stdout
    assert "  todo  `lenet.py run` completed on the RDUs under srun" in check.stdout
    assert "(your last srun job ended job" in check.stdout
    assert "(python) FAILED)" in check.stdout


@pytest.mark.slow("the scripted learner does all 12 exercises (`make rehearse`, about 3 min)")
def test_a_scripted_learner_passes_every_exercise(cluster):
    """`make rehearse` on this cluster: a new user onboarded with the staff's playbook does
    each exercise's steps as the guide gives them (venvs, trainings, jobs, scp, ssh -L),
    and every check, reading the cluster's real state, passes."""
    learner = f"rh{uuid.uuid4().hex[:5]}"
    result = subprocess.run([sys.executable, "-m", "aitestbed.exercises.rehearse",
                             "--cluster", cluster.name, "--user", learner],
                            capture_output=True, text=True, timeout=1800, check=False)
    report = result.stdout
    assert result.returncode == 0, report[-4000:] + result.stderr[-2000:]
    assert f"aitestbed rehearsal: cluster {cluster.name}, new user {learner}" in report
    assert "12/12 exercises passed" in report
    progress = exercise(cluster, "list", "--user", learner)
    assert progress.returncode == 0, progress.stderr
    statuses = [line.split()[2] for line in progress.stdout.splitlines()[1:]]
    assert statuses == ["passed"] * 12, progress.stdout
