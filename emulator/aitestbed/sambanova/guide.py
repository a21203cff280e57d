"""The SambaNova user guide's workflows (seed 002): the starters copied to the home and
LeNet compiled, run and tested with srun, and as a batch job. Data only; the machinery
is node/guide.py."""

from __future__ import annotations

from aitestbed.node.guide import Typed, Workflow

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
