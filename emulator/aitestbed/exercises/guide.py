"""The user guide's workflows, written once: the command sequences the exercises show
(catalog), their checks hint at (checks), the rehearsal types (rehearse), and the
cluster tests and benches replay.

A workflow is a tuple of steps; a step is the commands a learner types on one line
(joined with && when there are several). Where the page's command cannot run twice
(`mkdir DIR`), `Typed` holds the page's text and the one a script types. So:

    shown(workflow)        the steps as an exercise shows them, one a line, page text
    script(*parts)         a shell script, one command a line, script text; a part is a
                           workflow or a caller's own line (`set -e`, a clean-up, ...)
    one_line(*parts)       the same commands joined with &&

Sources: seeds 000 (Cerebras 2.1.1), 002 (the user guide) and 004 (Graphcore).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Typed:
    """A command whose page text fails when run again: what a script types instead."""

    page: str
    script: str


Command = str | Typed
Step = tuple[Command, ...]
Workflow = tuple[Step, ...]

# `quiet=True` adds -q to these (the benches and some tests want no progress output).
QUIET = ("pip install", "virtualenv", "git clone", "git checkout")


def _page(command: Command) -> str:
    return command.page if isinstance(command, Typed) else command


def _script(command: Command) -> str:
    return command.script if isinstance(command, Typed) else command


def _quiet(command: str) -> str:
    for prefix in QUIET:
        if command.startswith(prefix + " "):
            return f"{prefix} -q {command[len(prefix) + 1:]}"
    return command


def shown(workflow: Workflow, notes: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Each step on a line as the page gives it; `notes` adds a remark to a step."""
    steps = tuple(" && ".join(_page(c) for c in step) for step in workflow)
    notes = dict(notes or {})
    unknown = set(notes) - set(steps)
    if unknown:
        raise ValueError(f"no step {sorted(unknown)[0]!r} to annotate")
    return tuple(f"{s}   ({notes[s]})" if s in notes else s for s in steps)


def commands(*parts: Workflow | str, quiet: bool = False,
             skip: Iterable[str] = ()) -> list[str]:
    """The commands a script types, in order: a workflow's (without those in `skip`, with
    -q where `quiet`), and a caller's own lines as they are."""
    skip = set(skip)
    found: set[str] = set()
    lines: list[str] = []
    for part in parts:
        if isinstance(part, str):
            lines.append(part)
            continue
        for step in part:
            for command in step:
                text = _script(command)
                if text in skip:
                    found.add(text)
                    continue
                lines.append(_quiet(text) if quiet else text)
    if skip - found:
        raise ValueError(f"no command {sorted(skip - found)[0]!r} to skip")
    return lines


def script(*parts: Workflow | str, quiet: bool = False, skip: Iterable[str] = ()) -> str:
    return "\n".join(commands(*parts, quiet=quiet, skip=skip))


def one_line(*parts: Workflow | str, quiet: bool = False, skip: Iterable[str] = ()) -> str:
    return " && ".join(commands(*parts, quiet=quiet, skip=skip))


UPGRADE_PIP = "pip install --upgrade pip"

# Cerebras: PyTorch venv and the modelzoo, Release 2.1.1 (seed 000) -------------------------
CS_RELEASE = "R_2.1.1"
CS_DIR = f"~/{CS_RELEASE}"
CS_VENV = f"{CS_DIR}/venv_cerebras_pt"
CS_ACTIVATE = f"source {CS_VENV}/bin/activate"
CS_MODELZOO = f"{CS_DIR}/modelzoo"
CS_TAG = "Release_2.1.1"
FC_MNIST = f"{CS_MODELZOO}/modelzoo/fc_mnist/pytorch"
CS_DATASET = "/software/cerebras/dataset/fc_mnist/data/mnist/train"
CS_MAKE_VENV = "/software/cerebras/python3.8/bin/python3.8 -m venv venv_cerebras_pt"
CS_INSTALL = "pip install cerebras_pytorch==2.1.1"
CS_CLONE = "git clone https://github.com/Cerebras/modelzoo.git"
CS_CHECKOUT = f"git checkout {CS_TAG}"
CS_REQUIREMENTS = "pip install -r requirements.txt"

CS_HOME: Workflow = (
    ("chmod a+xr ~/",),  # the appliance reads the user's files: the home must be navigable
    (Typed(f"mkdir {CS_DIR}", f"mkdir -p {CS_DIR}"), f"chmod a+x {CS_DIR}/", f"cd {CS_DIR}"),
)
CS_VENV_SETUP: Workflow = (
    (CS_MAKE_VENV,),
    ("source venv_cerebras_pt/bin/activate",),
    (UPGRADE_PIP,),
    (CS_INSTALL,),
)
CS_MODELZOO_SETUP: Workflow = (
    (CS_CLONE,),
    ("cd modelzoo", "git tag", CS_CHECKOUT),
    (CS_REQUIREMENTS,),
)
CS_SETUP: Workflow = CS_HOME + CS_VENV_SETUP + CS_MODELZOO_SETUP
# The page says to point data_dir at the data set; in a script, with sed (run in FC_MNIST).
CS_SET_DATA_DIR = (f"sed -i 's|data_dir: \"./mnist\"|data_dir: \"{CS_DATASET}\"|' "
                   "configs/params.yaml")


def cs_run(label: str = "pt_smoketest") -> str:
    """The guide's fc_mnist training run on the CS-2, its job labelled name=<label>."""
    return (f"python run.py CSX --job_labels name={label} --params configs/params.yaml "
            "--num_csx=1 --mode train --model_dir $MODEL_DIR --mount_dirs /home/ /software "
            f"--python_paths /home/$(whoami)/{CS_RELEASE}/modelzoo --compile_dir /$(whoami)")


CS_ENTER: Workflow = ((CS_ACTIVATE,), (f"cd {FC_MNIST}",))
CS_FRESH_MODEL_DIR: Workflow = (
    ("export MODEL_DIR=model_dir",),
    ('if [ -d "$MODEL_DIR" ]; then rm -Rf $MODEL_DIR; fi',),
)
CS_SMOKETEST = f"{cs_run()} |& tee mytest.log"

# Graphcore: PopTorch venv and the examples, SDK 3.3.0 (seed 004) ---------------------------
GC_SDK = "/software/graphcore/poplar_sdk"
GC_SDK_ROOT = f"{GC_SDK}/3.3.0"
# The guide installs the cp38 wheel of the real system's Python 3.8; the nodes have 3.11.
GC_WHEEL = "poptorch-3.3.0+113432_960e9c294b_ubuntu_20_04-cp311-cp311-linux_x86_64.whl"
GC_VENV = "~/venvs/graphcore/poptorch33_env"
GC_ACTIVATE = f"source {GC_VENV}/bin/activate"
GC_EXAMPLES = "~/graphcore/examples"
GC_TAG = "v3.3.0"
MNIST_DIR = f"{GC_EXAMPLES}/tutorials/simple_applications/pytorch/mnist"
GC_MAKE_VENV = f"virtualenv {GC_VENV}"
GC_INSTALL = f"pip install $POPLAR_SDK_ROOT/{GC_WHEEL}"
GC_CLONE = "git clone https://github.com/graphcore/examples.git"
GC_CACHE = "export POPTORCH_CACHE_DIR=~/tmp"

GC_VENV_SETUP: Workflow = (
    ("mkdir -p ~/venvs/graphcore",),
    (GC_MAKE_VENV,),
    (GC_ACTIVATE,),
    (f"POPLAR_SDK_ROOT={GC_SDK_ROOT}",),
    ("export POPLAR_SDK_ROOT=$POPLAR_SDK_ROOT",),
    (GC_INSTALL,),
)
GC_EXAMPLES_SETUP: Workflow = (
    (Typed("mkdir ~/graphcore", "mkdir -p ~/graphcore"), "cd ~/graphcore"),
    (GC_CLONE,),
    ("cd examples", "git tag", f"git checkout {GC_TAG}"),
)
GC_SETUP: Workflow = GC_VENV_SETUP + GC_EXAMPLES_SETUP
# What every MNIST run starts with: the venv, and the executable cache in ~/tmp.
GC_ENV: Workflow = ((GC_ACTIVATE,), (GC_CACHE,))
MNIST_SRUN = "srun --ipus=1 python mnist_poptorch.py"
MNIST_JOB = "submit-mnist-poptorch-job.sh"
MNIST_SBATCH = f"sbatch --ipus=1 --output=mnist-poptorch-output.log {MNIST_JOB}"


def mnist_job_script(arguments: str = "") -> str:
    """The guide's batch script, written with a here-document."""
    return (f"cat > {MNIST_JOB} <<'EOF'\n#!/bin/sh\n\n"
            f"python mnist_poptorch.py{' ' + arguments if arguments else ''}\nEOF")


# SambaNova: the starters and LeNet (seed 002) -----------------------------------------------
STARTERS_SOURCE = "/opt/sambaflow/apps/starters"
STARTERS = "~/apps/starters"
LENET = f"{STARTERS}/lenet"
LENET_VENV = f"source {STARTERS_SOURCE}/lenet/venv/bin/activate"
PEF = "pef/lenet/lenet.pef"
LENET_COMPILE = 'srun python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"'
LENET_RUN = f'srun python lenet.py run --pef="{PEF}"'
LENET_TEST = f'srun python lenet.py test --pef="{PEF}"'
LENET_JOB = "submit-lenet-job.sh"
LENET_SBATCH = f"sbatch --gres=rdu:2 --output=pef/lenet/output.log {LENET_JOB}"


def lenet_job_script(run_arguments: str = "") -> str:
    """The guide's LeNet batch script (compile, then run), written with a here-document;
    `run_arguments` are added to the run line."""
    run = LENET_RUN.removeprefix("srun ") + (f" {run_arguments}" if run_arguments else "")
    return (f"cat > {LENET_JOB} <<'EOF'\n#!/bin/sh\n\n"
            f"{LENET_COMPILE.removeprefix('srun ')}\n{run}\nEOF")


LENET_SCRIPT = lenet_job_script()
SN_STARTERS: Workflow = (
    ("cd ~/", Typed("mkdir apps", "mkdir -p apps"), f"cp -r {STARTERS_SOURCE} apps/starters"),
)
SN_LENET: Workflow = (
    (f"cd {LENET}",),
    (LENET_VENV,),
    (LENET_COMPILE,),
    (LENET_RUN,),
    (LENET_TEST,),
)


def with_arguments(workflow: Workflow, command: str, arguments: str) -> Workflow:
    """The workflow with `arguments` added to `command` (a rehearsal's shorter training)."""
    if not any(command in map(_script, step) for step in workflow):
        raise ValueError(f"no command {command!r} in the workflow")
    return tuple(tuple(f"{_script(c)} {arguments}" if _script(c) == command else c
                       for c in step) for step in workflow)


# Port forwarding to a SambaNova node (seed 002), TensorBoard on the node ---------------------
SERVER_PORT = 6006
LOCAL_PORT = 16006
# The guide's line (on the node, in a venv; TensorBoard serves even when /logs is absent).
SERVER = f"tensorboard --logdir /logs --port {SERVER_PORT}"
