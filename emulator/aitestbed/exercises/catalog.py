"""The exercises: the user guide's first workflows, each with its steps and its check.

Steps are the seeds' commands as a learner types them; {placeholders} are this
cluster's names (see `placeholders`). Each exercise's check lives in checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from aitestbed.cerebras import guide as cs_guide
from aitestbed.exercises import checks
from aitestbed.exercises.checks import Context, Criterion
from aitestbed.graphcore import guide as gc_guide
from aitestbed.node import guide
from aitestbed.sambanova import guide as sn_guide

ALL = "all"


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    system: str  # cerebras, graphcore, sambanova, or all
    steps: tuple[str, ...]
    check: Callable[[Context], list[Criterion]]


# The guide's commands come from each room's guide.py; here they are shown with what a learner needs
# around them (where to be, what to look for).
EXERCISES: tuple[Exercise, ...] = (
    Exercise("first-login", "First login with a one-time passcode (MFA)", ALL, (
        "Get your passcode, as MobilePASS+ would show it: aitestbed --name {cluster} passcode "
        "{user}   (one code per login; a new one every 30 s)",
        "ssh -F {ssh_config} {login}   and type the code at Password:",
        "Look around: hostname; id; ls /software; then exit",
    ), checks.first_login),
    Exercise("cerebras-setup", "Cerebras: PyTorch venv and the modelzoo", "cerebras", (
        "ssh -F {ssh_config} {cer_login}",
        *guide.shown(cs_guide.CS_SETUP),
    ), checks.cerebras_setup),
    Exercise("cerebras-fc-mnist", "Cerebras: train fc_mnist on the CS-2 with run.py CSX",
             "cerebras", (
        "ssh -F {ssh_config} {cer_login}   (do cerebras-setup first)",
        *guide.shown(cs_guide.CS_ENTER),
        f"In configs/params.yaml set data_dir to \"{cs_guide.CS_DATASET}\" (train_input and "
        "eval_input)",
        *guide.shown(cs_guide.CS_FRESH_MODEL_DIR),
        cs_guide.CS_SMOKETEST,
        "csctl get jobs   (from another terminal while it runs: your compile, then execute job)",
    ), checks.cerebras_fc_mnist),
    Exercise("cerebras-cancel", "Cerebras: find your job with csctl and cancel it", "cerebras", (
        "ssh -F {ssh_config} {cer_login}   (do cerebras-fc-mnist first)",
        guide.one_line(cs_guide.CS_ENTER),
        "export MODEL_DIR=model_cancel && rm -rf $MODEL_DIR",
        "Start a run in the background; AITESTBED_TIME_SCALE=1 makes the emulator take the real "
        "system's time, so there is time to cancel it:",
        f"AITESTBED_TIME_SCALE=1 nohup {cs_guide.cs_run('cancel_me')} > cancel_me.log 2>&1 &",
        "csctl get jobs   (note the NAME of your job, wsjob-...)",
        "csctl cancel job <NAME>   (Job canceled successfully)",
        "tail cancel_me.log   (the run reports that it was canceled)",
    ), checks.cerebras_cancel),
    Exercise("graphcore-login", "Graphcore: the two-step login to an IPU host", "graphcore", (
        "ssh -F {ssh_config} {gc_login}",
        "ssh {gc_node}   (from {gc_login}; gc-poplar-01 is not open to users)",
        "popc --version   (the default Poplar SDK is enabled at login)",
    ), checks.graphcore_login),
    Exercise("graphcore-setup", "Graphcore: Poplar SDK, PopTorch venv and the examples",
             "graphcore", (
        "On {gc_node} (graphcore-login):",
        *guide.shown(gc_guide.GC_SETUP, notes={
            gc_guide.GC_INSTALL: "the guide's cp38 wheel is for the real system's Python 3.8; "
                              "these nodes have Python 3.11"}),
    ), checks.graphcore_setup),
    Exercise("graphcore-mnist", "Graphcore: MNIST on one IPU with srun", "graphcore", (
        "On {gc_node}, with the venv active (graphcore-setup):",
        f"mkdir -p ~/tmp && {gc_guide.GC_CACHE}",
        "cd {mnist}",
        f"{gc_guide.MNIST_SRUN}   (--epochs 1 for a shorter run)",
    ), checks.graphcore_mnist),
    Exercise("graphcore-sbatch", "Graphcore: MNIST as a batch job with an output file",
             "graphcore", (
        "On {gc_node}, with the venv active and POPTORCH_CACHE_DIR=~/tmp exported:",
        "cd {mnist}",
        gc_guide.mnist_job_script(),
        gc_guide.MNIST_SBATCH,
        "squeue   (until your job is gone)",
        "cat mnist-poptorch-output.log",
    ), checks.graphcore_sbatch),
    Exercise("sambanova-lenet", "SambaNova: LeNet compile, run and test with srun", "sambanova", (
        "ssh -F {ssh_config} {sn_login}, then ssh {sn_node} (SambaFlow is set up at login)",
        *guide.shown(sn_guide.SN_STARTERS + sn_guide.SN_LENET),
    ), checks.sambanova_lenet),
    Exercise("sambanova-sbatch", "SambaNova: LeNet as a batch job on two RDUs", "sambanova", (
        "On {sn_node}, with the LeNet venv active (sambanova-lenet):",
        f"cd {sn_guide.LENET}",
        sn_guide.LENET_SCRIPT,
        sn_guide.LENET_SBATCH,
        "squeue   (until your job is gone)",
        "cat pef/lenet/output.log",
    ), checks.sambanova_sbatch),
    Exercise("data-transfer", "Data transfer: copy a file to the testbed with scp", ALL, (
        "`start` wrote {payload} on this machine for you.",
        "scp -F {ssh_config} {payload} {login}:~/",
        "ssh -F {ssh_config} {login} cat {payload_name}   (/home is shared by every node)",
    ), checks.data_transfer),
    Exercise("port-forwarding", "Port forwarding to a SambaNova node, as for TensorBoard",
             "sambanova", (
        f"ssh -F {{ssh_config}} -N -f -L localhost:{checks.LOCAL_PORT}:localhost:"
        f"{checks.LOCAL_PORT} {{sn_login}}",
        "ssh -F {ssh_config} {sn_login}",
        f"ssh -N -f -L localhost:{checks.LOCAL_PORT}:localhost:{checks.SERVER_PORT} {{sn_node}}",
        "ssh {sn_node}",
        f"cd ~ && {guide.SERVER}   (or --logdir a directory of event files: LeNet's "
        "checkpoints, a modelzoo run's model_dir)",
        f"On this machine, browse or curl http://localhost:{checks.LOCAL_PORT}",
    ), checks.port_forwarding),
)


def by_name(name: str) -> Exercise | None:
    return next((e for e in EXERCISES if e.name == name), None)


def available(systems: list[str]) -> list[Exercise]:
    """The exercises a cluster with these systems can do."""
    return [e for e in EXERCISES if e.system == ALL or e.system in systems]


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(text: str, values: dict[str, str]) -> str:
    """Put this cluster's names in; unknown {words} (shell, job output) stay as they are."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def placeholders(cluster: str, user: str, ssh_config: str, nodes: checks.Nodes,
                 payload: str = "") -> dict[str, str]:
    def one(group: dict[str, list[str]], system: str) -> str:
        return checks.first(group, system) or f"<{system} node>"

    login = next((n for names in nodes.login.values() for n in names), "<login node>")
    return {
        "cluster": cluster, "user": user, "ssh_config": ssh_config, "login": login,
        "cer_login": one(nodes.login, "cerebras"), "gc_login": one(nodes.login, "graphcore"),
        "sn_login": one(nodes.login, "sambanova"), "gc_node": one(nodes.hop, "graphcore"),
        # The guide's examples use the SN30 nodes (sn30-r1-h1) where there are some.
        "sn_node": next((n for n in nodes.hop.get("sambanova", []) if n.startswith("sn30")),
                        one(nodes.hop, "sambanova")),
        "fc_mnist": cs_guide.FC_MNIST,
        "mnist": gc_guide.MNIST_DIR, "payload": payload or "<run start first>",
        "payload_name": payload.rsplit("/", 1)[-1] if payload else "<file>",
    }
