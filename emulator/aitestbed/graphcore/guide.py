"""The Graphcore user guide's workflows (seed 004): the PopTorch venv of SDK 3.3.0, the
examples, and MNIST on an IPU with srun and sbatch. Data only; the machinery is
node/guide.py."""

from __future__ import annotations

from aitestbed.node.guide import Typed, Workflow

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
