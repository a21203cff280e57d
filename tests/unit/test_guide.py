"""The guide's workflows are written once (exercises/guide.py): the exercises show them,
the rehearsal types them, and the cluster tests and benches replay them."""

import importlib

import pytest
from aitestbed.exercises import catalog, guide, rehearse
from aitestbed.exercises.guide import Typed


def in_order(needles: list[str], lines: list[str]) -> bool:
    """Every needle is a line of `lines`, in this order (other lines may come between)."""
    rest = iter(lines)
    return all(any(line == needle for line in rest) for needle in needles)


def test_an_exercise_shows_the_page_and_a_script_types_what_can_run_again():
    workflow = (("chmod a+xr ~/",), (Typed("mkdir ~/R", "mkdir -p ~/R"), "cd ~/R"),
                ("pip install x",))
    assert guide.shown(workflow) == ("chmod a+xr ~/", "mkdir ~/R && cd ~/R", "pip install x")
    assert guide.script("set -e", workflow) == (
        "set -e\nchmod a+xr ~/\nmkdir -p ~/R\ncd ~/R\npip install x")
    assert guide.one_line(workflow, "ls") == (
        "chmod a+xr ~/ && mkdir -p ~/R && cd ~/R && pip install x && ls")


def test_quiet_and_skip_change_only_the_workflows_commands():
    workflow = (("virtualenv v",), ("git clone u", "git tag", "git checkout t"),
                ("pip install w",))
    assert guide.commands(workflow, "pip install own", quiet=True, skip=("git tag",)) == [
        "virtualenv -q v", "git clone -q u", "git checkout -q t", "pip install -q w",
        "pip install own"]
    with pytest.raises(ValueError, match="no command 'git tags' to skip"):
        guide.commands(workflow, skip=("git tags",))
    with pytest.raises(ValueError, match="no step"):
        guide.shown(workflow, notes={"pip install v": "typo"})
    assert guide.shown(workflow, notes={"pip install w": "a note"})[-1] == (
        "pip install w   (a note)")


def test_the_exercises_show_the_guides_steps():
    steps = {e.name: e.steps for e in catalog.EXERCISES}
    assert steps["cerebras-setup"][1:] == (
        "chmod a+xr ~/",
        "mkdir ~/R_2.1.1 && chmod a+x ~/R_2.1.1/ && cd ~/R_2.1.1",
        "/software/cerebras/python3.8/bin/python3.8 -m venv venv_cerebras_pt",
        "source venv_cerebras_pt/bin/activate",
        "pip install --upgrade pip",
        "pip install cerebras_pytorch==2.1.1",
        "git clone https://github.com/Cerebras/modelzoo.git",
        "cd modelzoo && git tag && git checkout Release_2.1.1",
        "pip install -r requirements.txt")
    assert steps["graphcore-setup"][1:] == guide.shown(guide.GC_SETUP, notes={
        guide.GC_INSTALL: "the guide's cp38 wheel is for the real system's Python 3.8; these "
                          "nodes have Python 3.11"})
    assert "mkdir ~/graphcore && cd ~/graphcore" in steps["graphcore-setup"]
    assert steps["sambanova-lenet"][1:] == (
        "cd ~/ && mkdir apps && cp -r /opt/sambaflow/apps/starters apps/starters",
        "cd ~/apps/starters/lenet",
        "source /opt/sambaflow/apps/starters/lenet/venv/bin/activate",
        'srun python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"',
        'srun python lenet.py run --pef="pef/lenet/lenet.pef"',
        'srun python lenet.py test --pef="pef/lenet/lenet.pef"')
    assert guide.LENET_SCRIPT in steps["sambanova-sbatch"]
    assert guide.mnist_job_script() in steps["graphcore-sbatch"]
    assert guide.mnist_job_script("--epochs 1").splitlines()[3] == (
        "python mnist_poptorch.py --epochs 1")
    assert guide.lenet_job_script("--max-steps 9").splitlines()[3:] == [
        'python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"',
        'python lenet.py run --pef="pef/lenet/lenet.pef" --max-steps 9', "EOF"]


def test_with_arguments_extends_one_command_and_refuses_a_missing_one():
    brief = guide.with_arguments(guide.SN_LENET, guide.LENET_RUN, "--max-steps 5")
    assert guide.commands(brief) == [
        *guide.commands(guide.SN_LENET)[:3],
        'srun python lenet.py run --pef="pef/lenet/lenet.pef" --max-steps 5',
        guide.LENET_TEST]
    with pytest.raises(ValueError, match="no command 'ls'"):
        guide.with_arguments(guide.SN_LENET, "ls", "-l")


class RecordingLearner:
    def __init__(self):
        self.scripts = []

    def ssh(self, host, command, timeout=None):
        self.scripts.append(command)
        return "POPLAR version Accuracy on test set Test passed Test Accuracy"

    def hop(self, login, node, script, timeout=None):
        return self.ssh(login, script)


@pytest.mark.parametrize(("exercise", "workflow"), [
    ("cerebras-setup", guide.CS_SETUP),
    ("graphcore-setup", guide.GC_SETUP),
    # The rehearsal's one change: a brief training (its checks ask that the run ended).
    ("sambanova-lenet", guide.SN_STARTERS + guide.with_arguments(
        guide.SN_LENET, guide.LENET_RUN, "--max-steps 2000")),
])
def test_the_rehearsal_types_the_guides_commands(exercise, workflow):
    learner = RecordingLearner()
    values = {"cer_login": "cer-login-01", "gc_login": "gc-login-01", "gc_node": "gc-poplar-02",
              "sn_login": "sambanova", "sn_node": "sn30-r1-h1"}
    rehearse.SCRIPTS[exercise](learner, values)
    assert learner.scripts == [guide.script("set -e", workflow)]


def test_the_cluster_tests_replay_the_guides_set_ups():
    cerebras = importlib.import_module("tests.cluster.test_cerebras")
    assert in_order(guide.commands(guide.CS_SETUP, guide.CS_SET_DATA_DIR),
                    cerebras.SETUP_2_1_1.splitlines())
    assert cerebras.RUN == guide.cs_run("pt_smoketest")


def test_the_benches_replay_the_guides_set_ups(monkeypatch):
    monkeypatch.syspath_prepend(str(importlib.import_module("tests").__path__[0] + "/bench"))
    cerebras = importlib.import_module("bench_cerebras")
    assert in_order(guide.commands(guide.CS_SETUP, guide.CS_SET_DATA_DIR, quiet=True,
                                   skip=(guide.UPGRADE_PIP, "git tag", guide.CS_REQUIREMENTS)),
                    cerebras.SETUP.splitlines())
    graphcore = importlib.import_module("bench_graphcore")
    assert in_order(guide.commands(guide.GC_SETUP, quiet=True, skip=("git tag",)),
                    graphcore.SETUP.splitlines())
    sambanova = importlib.import_module("bench_sambanova")
    assert in_order(guide.commands(guide.SN_STARTERS, f"cd {guide.LENET}", guide.LENET_COMPILE),
                    sambanova.LENET.splitlines())
