"""The GroqRack's workflows as ALCF's docs give them (reference: groq.md §1-§3): the login
path, PBS's qsub of a full node (batch and interactive), and GroqFlow (the clone, the
environment, its examples and proof points). Data only; the machinery is node/guide.py.
"""

from __future__ import annotations

from aitestbed.node.guide import Workflow

# `ssh ALCFUserID@groq.ai.alcf.anl.gov` lands on a login node; jobs are launched from a
# GroqNode (groq-r01-gn-0N), qstat works on both.
GROQ_HOST = "groq.ai.alcf.anl.gov"

# running-a-model-or-program.md: "This will reserve a full eight-card(chip) node." (The
# page has two spaces after -l; a user types one.)
EXCL = "-l select=1,place=excl"
QSUB = f"qsub {EXCL}"


def qsub_interactive(walltime: str = "24:00:00") -> str:
    """The docs' interactive job on a full node (qsub -IV), of `walltime`."""
    return f"qsub -IV -l walltime={walltime} {EXCL}"


# GroqFlow (virtual-environments.md): the clone in the home; the conda environment
# `groqflow` the page then makes is on the nodes already.
GROQFLOW = "~/groqflow"
GROQFLOW_CLONE = "git clone https://github.com/groq/groqflow.git"
GROQFLOW_SETUP: Workflow = ((GROQFLOW_CLONE,),)
GROQFLOW_ACTIVATE = "conda activate groqflow"
GROQFLOW_EXAMPLES = f"{GROQFLOW}/examples/pytorch"
PROOF_POINTS = f"{GROQFLOW}/proof_points"
HELLO_WORLD = "python hello_world.py"
ESTIMATE_PERFORMANCE = "python estimate_performance.py"
# The environment, then the PyTorch examples' folder (where hello_world.py is).
GROQFLOW_ENTER: Workflow = ((GROQFLOW_ACTIVATE,), (f"cd {GROQFLOW_EXAMPLES}",))
GROQFLOW_HELLO: Workflow = GROQFLOW_ENTER + ((HELLO_WORLD,),)


def chips_used(build: str) -> str:
    """The docs' look at how many chips a build used (its state file in GroqFlow's cache)."""
    return f"grep num_chips_used ~/.cache/groqflow/{build}/{build}_state.yaml"


def proof_point(directory: str, program: str, environment: str = "") -> Workflow:
    """A proof point as the docs' job script runs one (in the environment): its folder
    under PROOF_POINTS, its requirements, the program; `environment` (VAR=value) goes
    before the program's line."""
    run = f"python {program}"
    return (
        (f"cd {PROOF_POINTS}/{directory}",),
        ("pip install -r requirements.txt",),
        (f"{environment} {run}" if environment else run,),
    )
