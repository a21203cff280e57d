"""Bad input that needs the cluster, as a user types it (security review, part C).

Each row: where it runs, the command, a line the answer must contain. Every one must
exit non-zero, and none may end in a Python traceback from our code (PopTorch's own
errors are raised to the user's script, with its traceback, by design: those rows
check that the traceback ends in poptorch.poptorch_core.Error).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from .test_cerebras import FC_MNIST, SETUP_2_1_1, csctl_jobs
from .test_cerebras import LOGIN as CEREBRAS_LOGIN
from .test_cerebras import VENV as CEREBRAS_VENV
from .test_graphcore_sdk import SDK, WHEEL_33, on_poplar
from .test_sambanova_sdk import LENET_VENV, SN30, on_node

pytestmark = pytest.mark.presubmit

TRACEBACK = "Traceback (most recent call last)"
GC_LOGIN = "gc-login-01"
SN_LOGIN = "sambanova"
BAD_VENV = "~/venvs/bad-input"
LENET = "/opt/sambaflow/apps/starters/lenet/lenet.py"
NODE_CONFIG = "Requested node configuration is not available"
INVALID_GRES = "Invalid generic resource (gres) specification"
POPTORCH_SCRIPT = ("import torch, poptorch\n"
                   "model = poptorch.inferenceModel(torch.nn.Linear(4, 2))\n"
                   "print(model(torch.randn(2, 4)))\n")
CSX_ARGS = ("--mode train --mount_dirs /home/ /software "
            "--python_paths /home/$(whoami)/R_2.1.1/modelzoo")


@dataclass(frozen=True)
class Case:
    id: str
    where: str  # gc-login, sn-login, sn30 (login shell there), poplar (PopTorch venv), csx
    command: str
    messages: tuple[str, ...]
    poptorch_error: bool = False  # PopTorch's own Error, with its traceback (by design)


CASES = [
    # C30/C36: more IPUs than a host or the POD holds is the scheduler's over-request.
    Case("C30-sbatch-ipus-99999", "gc-login", "sbatch --ipus=99999 --wrap true",
         (f"Batch job submission failed: {NODE_CONFIG}",)),
    Case("C30-srun-ipus-99999", "gc-login", "srun --ipus=99999 true", (NODE_CONFIG,)),
    Case("C36-srun-ipus-2147483648", "gc-login", "srun --ipus=2147483648 true", (NODE_CONFIG,)),
    # C38/C40/C80: job_submit.lua says why; Slurm's own code and message.
    Case("C38-gres-rdu-minus-1", "sn-login", "sbatch --gres=rdu:-1 --wrap true",
         ("--gres=rdu:-1: give a whole number of RDUs", INVALID_GRES)),
    Case("C40-gres-rdu-abc", "sn-login", "sbatch --gres=rdu:abc --wrap true",
         ("--gres=rdu:abc: give a whole number of RDUs", INVALID_GRES)),
    Case("C80-gres-rdu-0", "sn-login", "sbatch --gres=rdu:0 --wrap true",
         ("--gres=rdu:0 asks for no RDU", INVALID_GRES)),
    Case("C80-srun-gres-rdu-0", "sn-login", "srun --gres=rdu:0 true",
         ("--gres=rdu:0 asks for no RDU", INVALID_GRES)),
    # C52/C59: argparse's error, status 2, from the starters run as the guide does.
    Case("C52-lenet-batch-size-0", "sn30",
         f"srun python {LENET} compile -b=0 --pef-name=bad --output-folder=pef",
         ("lenet.py compile: error: argument -b/--batch-size: invalid value 0: must be at "
          "least 1",)),
    Case("C59-lenet-num-epochs-minus-1", "sn30",
         f"srun python {LENET} run --pef=pef/lenet/lenet.pef --num-epochs=-1",
         ("lenet.py run: error: argument -e/--num-epochs: invalid value -1: must be at least 1",)),
    # C42/C43: the cache directory, before compiling.
    Case("C42-poptorch-cache-is-a-file", "poplar",
         "POPTORCH_CACHE_DIR=/etc/passwd /opt/slurm/bin/srun --ipus=1 python bad_input.py",
         ("Cannot use /etc/passwd as the executable cache (POPTORCH_CACHE_DIR): it is not a "
          "directory",), poptorch_error=True),
    Case("C43-poptorch-cache-unwritable", "poplar",
         "POPTORCH_CACHE_DIR=/root/cache /opt/slurm/bin/srun --ipus=1 python bad_input.py",
         ("Cannot use /root/cache as the executable cache (POPTORCH_CACHE_DIR): Permission "
          "denied",), poptorch_error=True),
    # C74/C75: the sections a run reads, before any wsjob.
    Case("C74-run-py-empty-params", "csx",
         f": > empty.yaml && python run.py CSX --params empty.yaml {CSX_ARGS}",
         ("Invalid params file empty.yaml: 'model' is a required property",)),
    Case("C75-run-py-model-only", "csx",
         f"echo 'model: {{}}' > nokeys.yaml && python run.py CSX --params nokeys.yaml {CSX_ARGS}",
         ("Invalid params file nokeys.yaml: 'train_input' is a required property",)),
]


@pytest.fixture(scope="module")
def poptorch_venv(cluster):
    """A venv with the SDK's PopTorch wheel, as the guide makes one."""
    rc, out = on_poplar(cluster, f"""set -e
rm -rf {BAD_VENV}
mkdir -p ~/venvs ~/bad-input
virtualenv -q {BAD_VENV}
source {BAD_VENV}/bin/activate
pip install -q {SDK}/3.3.0/{WHEEL_33}
cat > ~/bad-input/bad_input.py <<'PY'
{POPTORCH_SCRIPT}PY""")
    assert rc == 0, out


@pytest.fixture(scope="module")
def release_2_1_1(cluster):
    """The guide's Cerebras set-up (venv, clone, checkout) on cer-login-01."""
    rc, out = cluster.run(CEREBRAS_LOGIN, SETUP_2_1_1, timeout=300)
    assert rc == 0, out


def wsjobs(cluster) -> int:
    return len(csctl_jobs(cluster))


def run_case(case: Case, cluster, request) -> tuple[int, str]:
    if case.where == "gc-login":
        return cluster.run(GC_LOGIN, f"cd /tmp && {case.command}")
    if case.where == "sn-login":
        return cluster.run(SN_LOGIN, f"cd /tmp && {case.command}")
    if case.where == "sn30":
        return on_node(cluster, SN30, f"{LENET_VENV}\nmkdir -p ~/bad-input && cd ~/bad-input\n"
                                      f"{case.command}", timeout=300)
    if case.where == "poplar":
        request.getfixturevalue("poptorch_venv")
        return on_poplar(cluster, f"source {BAD_VENV}/bin/activate\ncd ~/bad-input\n"
                                  f"{case.command}", timeout=300)
    if case.where == "csx":
        request.getfixturevalue("release_2_1_1")
        before = wsjobs(cluster)
        rc, out = cluster.run(CEREBRAS_LOGIN, f"{CEREBRAS_VENV} && cd {FC_MNIST} && "
                                              f"{case.command}", timeout=300)
        assert wsjobs(cluster) == before, "a wsjob was submitted"
        return rc, out
    raise AssertionError(case.where)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_message_and_a_non_zero_exit(cluster, request, case):
    rc, out = run_case(case, cluster, request)
    assert rc != 0, out
    for message in case.messages:
        assert message in out, out
    if case.poptorch_error:
        assert "poptorch.poptorch_core.Error: In poptorch/" in out, out
        assert "FileExistsError" not in out and "PermissionError" not in out, out
        assert "Graph compilation" not in out, out  # refused before compiling
    else:
        assert TRACEBACK not in out, out
