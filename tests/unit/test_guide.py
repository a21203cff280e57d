"""The guides' workflows are written once, each system's in its room (cerebras/guide.py,
graphcore/guide.py, sambanova/guide.py, groq/guide.py; the machinery in node/guide.py):
the exercises show them, the rehearsal types them, and the cluster tests and benches
replay them."""

import ast
import importlib
from pathlib import Path

import pytest
from aitestbed.cerebras import guide as cs_guide
from aitestbed.exercises import catalog, rehearse
from aitestbed.graphcore import guide as gc_guide
from aitestbed.groq import guide as groq_guide
from aitestbed.node import guide
from aitestbed.node.guide import Typed
from aitestbed.sambanova import guide as sn_guide


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
    assert steps["graphcore-setup"][1:] == guide.shown(gc_guide.GC_SETUP, notes={
        gc_guide.GC_INSTALL: "the guide's cp38 wheel is for the real system's Python 3.8; these "
                          "nodes have Python 3.11"})
    assert "mkdir ~/graphcore && cd ~/graphcore" in steps["graphcore-setup"]
    assert steps["sambanova-lenet"][1:] == (
        "cd ~/ && mkdir apps && cp -r /opt/sambaflow/apps/starters apps/starters",
        "cd ~/apps/starters/lenet",
        "source /opt/sambaflow/apps/starters/lenet/venv/bin/activate",
        'srun python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"',
        'srun python lenet.py run --pef="pef/lenet/lenet.pef"',
        'srun python lenet.py test --pef="pef/lenet/lenet.pef"')
    assert sn_guide.LENET_SCRIPT in steps["sambanova-sbatch"]
    assert gc_guide.mnist_job_script() in steps["graphcore-sbatch"]
    assert gc_guide.mnist_job_script("--epochs 1").splitlines()[3] == (
        "python mnist_poptorch.py --epochs 1")
    assert sn_guide.lenet_job_script("--max-steps 9").splitlines()[3:] == [
        'python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"',
        'python lenet.py run --pef="pef/lenet/lenet.pef" --max-steps 9', "EOF"]


def test_with_arguments_extends_one_command_and_refuses_a_missing_one():
    brief = guide.with_arguments(sn_guide.SN_LENET, sn_guide.LENET_RUN, "--max-steps 5")
    assert guide.commands(brief) == [
        *guide.commands(sn_guide.SN_LENET)[:3],
        'srun python lenet.py run --pef="pef/lenet/lenet.pef" --max-steps 5',
        sn_guide.LENET_TEST]
    with pytest.raises(ValueError, match="no command 'ls'"):
        guide.with_arguments(sn_guide.SN_LENET, "ls", "-l")


class RecordingLearner:
    def __init__(self):
        self.scripts = []

    def ssh(self, host, command, timeout=None):
        self.scripts.append(command)
        return "POPLAR version Accuracy on test set Test passed Test Accuracy"

    def hop(self, login, node, script, timeout=None):
        return self.ssh(login, script)


@pytest.mark.parametrize(("exercise", "workflow"), [
    ("cerebras-setup", cs_guide.CS_SETUP),
    ("graphcore-setup", gc_guide.GC_SETUP),
    # The rehearsal's one change: a brief training (its checks ask that the run ended).
    ("sambanova-lenet", sn_guide.SN_STARTERS + guide.with_arguments(
        sn_guide.SN_LENET, sn_guide.LENET_RUN, "--max-steps 2000")),
])
def test_the_rehearsal_types_the_guides_commands(exercise, workflow):
    learner = RecordingLearner()
    values = {"cer_login": "cer-login-01", "gc_login": "gc-login-01", "gc_node": "gc-poplar-02",
              "sn_login": "sambanova", "sn_node": "sn30-r1-h1"}
    rehearse.SCRIPTS[exercise](learner, values)
    assert learner.scripts == [guide.script("set -e", workflow)]


def test_the_cluster_tests_replay_the_guides_set_ups():
    cerebras = importlib.import_module("tests.cluster.test_cerebras")
    assert in_order(guide.commands(cs_guide.CS_SETUP, cs_guide.CS_SET_DATA_DIR),
                    cerebras.SETUP_2_1_1.splitlines())
    assert cerebras.RUN == cs_guide.cs_run("pt_smoketest")


def test_the_benches_replay_the_guides_set_ups(monkeypatch):
    monkeypatch.syspath_prepend(str(importlib.import_module("tests").__path__[0] + "/bench"))
    cerebras = importlib.import_module("bench_cerebras")
    assert in_order(guide.commands(cs_guide.CS_SETUP, cs_guide.CS_SET_DATA_DIR, quiet=True,
                                   skip=(guide.UPGRADE_PIP, "git tag", cs_guide.CS_REQUIREMENTS)),
                    cerebras.SETUP.splitlines())
    graphcore = importlib.import_module("bench_graphcore")
    assert in_order(guide.commands(gc_guide.GC_SETUP, quiet=True, skip=("git tag",)),
                    graphcore.SETUP.splitlines())
    sambanova = importlib.import_module("bench_sambanova")
    assert in_order(guide.commands(sn_guide.SN_STARTERS, f"cd {sn_guide.LENET}",
                                   sn_guide.LENET_COMPILE),
                    sambanova.LENET.splitlines())


ROOMS = (cs_guide, gc_guide, sn_guide, groq_guide)


def workflows(module) -> dict[str, guide.Workflow]:
    return {name: value for name, value in vars(module).items()
            if name.isupper() and isinstance(value, tuple) and value
            and all(type(step) is tuple and step and all(isinstance(c, str | Typed)
                                                          for c in step) for step in value)}


@pytest.mark.parametrize("room", ROOMS, ids=lambda m: m.__name__.split(".")[1])
def test_every_workflow_of_a_room_renders(room):
    found = workflows(room)
    assert found, room.__name__
    if room is cs_guide:  # the CS-3's models: one workflow each
        found.update({m.label: cs_guide.cs3_run(m) for m in (*cs_guide.CS3_EXAMPLES,
                                                              cs_guide.GPT3)})
    for name, workflow in found.items():
        page = guide.shown(workflow)
        typed = guide.commands(workflow)
        assert len(page) == len(workflow) and all(page), name
        assert typed and all(isinstance(c, str) and c.strip() for c in typed), name
        assert guide.one_line(workflow) == " && ".join(typed), name


@pytest.mark.parametrize("room", ROOMS, ids=lambda m: m.__name__.split(".")[1])
def test_a_rooms_guide_imports_only_the_kernels_guide(room):
    tree = ast.parse(Path(room.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert {m for m in imported if m.startswith("aitestbed")} == {"aitestbed.node.guide"}


def test_the_cs3_workflows_are_the_docs_blocks():
    """customizing-environment.md (its two blocks, both proxy variables, one mkdir),
    running-a-model-or-program.md's GPT-3 111M run and restart, example-programs.md."""
    assert guide.shown(cs_guide.CS3_SETUP) == (
        "mkdir ~/R_2.10.0", "cd ~/R_2.10.0",
        "export HTTPS_PROXY=http://proxy.alcf.anl.gov:3128",
        "export https_proxy=http://proxy.alcf.anl.gov:3128",
        "git clone https://github.com/Cerebras/modelzoo.git", "cd modelzoo", "git tag",
        "git checkout Release_2.10.0", "cd ~/R_2.10.0", "deactivate", "rm -r venv_cerebras_pt",
        "/usr/bin/python3.11 -m venv venv_cerebras_pt", "source venv_cerebras_pt/bin/activate",
        "pip install --upgrade pip", "pip install -e modelzoo")
    assert guide.commands(cs_guide.CS3_ENTER, cs_guide.cs3_run(cs_guide.GPT3)) == [
        "source ~/R_2.10.0/venv_cerebras_pt/bin/activate",
        "cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/gpt3",
        "cp /software/cerebras/dataset/OWT/Pytorch/111m_modified.yaml "
        "configs/Cerebras_GPT/111m_modified.yaml",
        "export MODEL_DIR=model_dir_gpt3_111m",
        'if [ -d "$MODEL_DIR" ]; then rm -Rf $MODEL_DIR; fi',
        "cszoo fit configs/Cerebras_GPT/111m_modified.yaml --job_labels name=gpt3_111m "
        "--model_dir $MODEL_DIR |& tee mytest.log"]
    assert guide.commands(cs_guide.CS3_RESTART)[-1] == (
        "cszoo fit --checkpoint_path=model_dir_gpt3_111m/checkpoint_400.mdl "
        "configs/Cerebras_GPT/111m_modified.yaml --job_labels name=gpt3_111m "
        "--model_dir $MODEL_DIR |& tee mytest.log")
    assert guide.commands(cs_guide.cs3_run(cs_guide.DIT))[1:] == [
        "cp /software/cerebras/dataset/params_dit_2B_patchsize_2x2_modified.yaml "
        "configs/params_dit_2B_patchsize_2x2_modified.yaml",
        "export MODEL_DIR=model_dir_dit",
        'if [ -d "$MODEL_DIR" ]; then rm -Rf $MODEL_DIR; fi',
        "cszoo fit configs/params_dit_2B_patchsize_2x2_modified.yaml --job_labels name=DiT "
        "--model_dir $MODEL_DIR |& tee mytest.log"]
    assert [m.label for m in cs_guide.CS3_EXAMPLES] == [
        "bert_pt", "gptj", "llama2_7b", "esm2_t12_35m", "vision_transformer", "DiT"]


def test_the_groq_workflows_are_the_docs_commands():
    """groq.md: the login host, qsub of a full node (batch, interactive), GroqFlow's clone,
    the job script's body for a proof point and the look at the chips it used."""
    assert groq_guide.GROQ_HOST == "groq.ai.alcf.anl.gov"
    assert f"{groq_guide.QSUB} run_minilmv2.sh" == "qsub -l select=1,place=excl run_minilmv2.sh"
    assert groq_guide.qsub_interactive() == "qsub -IV -l walltime=24:00:00 -l select=1,place=excl"
    assert guide.commands(groq_guide.GROQFLOW_SETUP) == [
        "git clone https://github.com/groq/groqflow.git"]
    assert guide.commands(groq_guide.GROQFLOW_ACTIVATE, groq_guide.proof_point(
        "natural_language_processing/minilm", "minilmv2.py")) == [
        "conda activate groqflow", "cd ~/groqflow/proof_points/natural_language_processing/minilm",
        "pip install -r requirements.txt", "python minilmv2.py"]
    assert groq_guide.chips_used("minilmv2") == (
        "grep num_chips_used ~/.cache/groqflow/minilmv2/minilmv2_state.yaml")
    assert guide.one_line(groq_guide.GROQFLOW_HELLO) == (
        "conda activate groqflow && cd ~/groqflow/examples/pytorch && python hello_world.py")


def test_the_alcf_2026_and_groq_cluster_tests_replay_the_rooms_workflows():
    alcf = importlib.import_module("tests.cluster.test_alcf_2026")
    assert alcf.SETUP.strip().splitlines() == guide.commands(cs_guide.CS3_SETUP)
    assert alcf.RUN.strip().splitlines() == guide.commands(
        cs_guide.CS3_ENTER, cs_guide.cs3_run(cs_guide.GPT3), cs_guide.CS3_JOB_IDS)
    assert in_order(guide.commands(cs_guide.CS3_RESTART), alcf.RESTART.splitlines())
    assert in_order(guide.commands(cs_guide.cs3_run(cs_guide.ESM2), cs_guide.cs3_run(
        cs_guide.DIT)), alcf.EXAMPLES.splitlines())
    groq = importlib.import_module("tests.cluster.test_groq")
    assert in_order(["#!/bin/bash", *guide.commands(groq_guide.GROQFLOW_HELLO),
                     groq_guide.ESTIMATE_PERFORMANCE, groq_guide.chips_used("hello_world")],
                    groq.GROQFLOW_JOB.splitlines())
    assert groq.GROQFLOW_JOB.splitlines()[-1] == "BERT_TINY_NUM_TEST=50 python bert_tiny.py"


def test_the_alcf_2026_and_groq_benches_replay_the_rooms_workflows(monkeypatch):
    monkeypatch.syspath_prepend(str(importlib.import_module("tests").__path__[0] + "/bench"))
    alcf = importlib.import_module("bench_alcf_2026")
    assert in_order([cs_guide.CS3_MAKE_VENV], alcf.SETUP.splitlines())
    assert f"cd {cs_guide.GPT3.path}" in alcf.RUN.splitlines()
    fit = cs_guide.cszoo_fit(cs_guide.GPT3, cs_guide.GPT3.model_dir)
    assert f"{fit} > run.log 2>&1" in alcf.RUN.splitlines()
    for model in cs_guide.CS3_EXAMPLES:
        assert f"cd {model.path}" in alcf.example(model).splitlines()
    groq = importlib.import_module("bench_groq")
    assert in_order([*guide.commands(groq_guide.GROQFLOW_SETUP, quiet=True), "#!/bin/bash",
                     *guide.commands(groq_guide.GROQFLOW_ENTER)], groq.GROQFLOW.splitlines())
    assert f"    job=$({groq_guide.QSUB} mark.sh)" in groq.QSUB_TO_RUNNING.splitlines()
