"""TensorBoard as the guide uses it (seed 002, "TensorBoard Port Forwarding"): a model's run
writes event files on a SambaNova node, `tensorboard --logdir ... --port ...` serves them
there from the LogReg venv, and the guide's two `ssh -L` hops bring the page to this
machine. Also: the tensorboard command on each kind of host users work on.
"""

from __future__ import annotations

import json
import shlex
import socket
import urllib.parse

import pytest
from aitestbed.exercises.checks import http_get
from aitestbed.host.driver import wait_for

pytestmark = pytest.mark.presubmit

SN_LOGIN, SN30 = "sambanova", "sn30-r1-h1"
# The guide's 6006 and 16006 plus 100: "Using port numbers other than these may avoid
# collisions with other users" (and with the port-forwarding exercise's test).
NODE_PORT, LOGIN_PORT = 6106, 16106
RUN_DIR = "~/tb-lenet"
LOGREG_VENV = "source /opt/sambaflow/apps/starters/logreg/venv/bin/activate"
SERVE = f"tensorboard --logdir checkpoints --port {NODE_PORT}"
HOP = f"ssh -N -f -L localhost:{LOGIN_PORT}:localhost:{NODE_PORT} {SN30}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lenet_run(cluster):
    """LeNet compiled and run briefly (300 steps) on the SN30 node: its event files."""
    rc, out = cluster.hop(SN_LOGIN, SN30, f"""set -e
rm -rf {RUN_DIR} && cp -r /opt/sambaflow/apps/starters/lenet {RUN_DIR} && cd {RUN_DIR}
source /opt/sambaflow/apps/starters/lenet/venv/bin/activate
srun python lenet.py compile -b=1 --pef-name=lenet --output-folder=pef > /dev/null
srun python lenet.py run --pef=pef/lenet/lenet.pef --max-steps 300 | grep "^Test Accuracy"
ls checkpoints""")
    assert rc == 0, out
    return out


def test_lenet_writes_its_loss_and_accuracy_as_event_files(lenet_run):
    assert "Test Accuracy: " in lenet_run
    assert "events.out.tfevents." in lenet_run


def test_the_guides_tensorboard_reaches_this_machine_through_two_tunnels(cluster, lenet_run):
    local = free_port()
    # On the node, in the LogReg venv as the guide's example; on the login node, the hop.
    rc, out = cluster.hop(SN_LOGIN, SN30, f"cd {RUN_DIR} && {LOGREG_VENV} && "
                                          f"(nohup {SERVE} > tensorboard.log 2>&1 < /dev/null &)")
    assert rc == 0, out
    rc, out = cluster.run(SN_LOGIN, HOP)
    assert rc == 0, out
    forward = f"localhost:{local}:localhost:{LOGIN_PORT}"
    try:
        # This machine's end: the login node's shared connection carries the forward, as
        # the guide's `ssh -v -N -f -L localhost:16006:localhost:16006 ...` does.
        opened = cluster.driver.control(SN_LOGIN, "forward", "-L", forward)
        assert opened.returncode == 0, opened.stderr
        base = f"http://127.0.0.1:{local}"
        tags = wait_for(lambda: (lambda body: body if body and "train/loss" in body else None)(
            http_get(f"{base}/data/plugin/scalars/tags")), 60, 1.0,
            "TensorBoard to show the run's scalars through the tunnels")
        assert set(json.loads(tags)) == {"."}  # one run: checkpoints itself
        assert set(json.loads(tags)["."]) == {"train/loss", "test/accuracy"}
        query = urllib.parse.urlencode({"tag": "train/loss", "run": "."})
        points = json.loads(http_get(f"{base}/data/plugin/scalars/scalars?{query}"))
        assert [step for _, step, _ in points] == [100, 200, 300]
        assert points[-1][2] < points[0][2]  # the running loss falls
        assert "<title>TensorBoard</title>" in (http_get(f"{base}/") or "")
    finally:
        cluster.driver.control(SN_LOGIN, "cancel", "-L", forward)
        cluster.run(SN_LOGIN, f"kill $(pgrep -u $(id -u) -xf {shlex.quote(HOP)}); "
                              f"ssh {SN30} 'pkill -u $(id -u) -f \"{SERVE}\"'")


@pytest.mark.parametrize("login, node", [("sambanova", "sm-01"), ("gc-login-01", "gc-poplar-02"),
                                         ("cer-login-01", None), ("gc-login-01", None)])
def test_tensorboard_is_on_the_hosts_users_work_on(cluster, login, node):
    command = "tensorboard --version 2>/dev/null; python3 -c 'import tensorboard' && echo import"
    rc, out = (cluster.hop(login, node, command) if node else cluster.run(login, command))
    assert rc == 0, out
    assert out.split()[-2:] == ["2.13.0", "import"], out
