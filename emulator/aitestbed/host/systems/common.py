"""What every node image needs from the host, whatever its systems: the wheelhouse (our
package and the Python packages used inside the cluster, which cannot reach PyPI) and
TensorBoard's pinned wheels (roles/common installs them on the hosts users work on)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from aitestbed.host import arch
from aitestbed.host.paths import build_root, installed
from aitestbed.host.sdk_artifacts import fresh_output, pinned_wheels
from aitestbed.host.systems.model import Artifact

TENSORBOARD_REQUIREMENTS = Path("images") / "tensorboard-requirements.txt"
CLUSTER_REQUIREMENTS = Path("images") / "cluster-requirements.txt"


def build_wheelhouse(root: Path) -> Path:
    """build/wheelhouse: our package's wheel and the wheels cluster-requirements.txt names."""
    wheelhouse = build_root() / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    wheelhouse.mkdir(parents=True)
    # setuptools builds in build/lib and never empties it: a module since moved or
    # deleted would ride along in every later wheel (and differ from a clean clone's).
    for stale in [root / "build" / "lib", *root.joinpath("build").glob("bdist.*")]:
        shutil.rmtree(stale, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    # A fixed SOURCE_DATE_EPOCH makes the wheel byte-for-byte reproducible, so a rebuilt
    # wheelhouse equals the one in the images and site.yml finds nothing to copy. The nodes'
    # wheel carries no copy of the tree (setup.py); an installed CLI builds it from a copy
    # of its tree, never writing into its own install.
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800", "AITESTBED_WHEEL_TREE": "0"}
    with tempfile.TemporaryDirectory(prefix="aitestbed-wheel.") as scratch:
        source = root
        if installed():
            source = Path(scratch)
            for part in ("pyproject.toml", "setup.py", "MANIFEST.in", "emulator"):
                copy = shutil.copytree if (root / part).is_dir() else shutil.copy2
                copy(root / part, source / part)
        subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(wheelhouse), str(source)], check=True, stdout=subprocess.DEVNULL,
                       env=env)
    requirements = root / CLUSTER_REQUIREMENTS
    wanted = [ln for ln in requirements.read_text().splitlines()
              if ln.strip() and not ln.lstrip().startswith("#")]
    if wanted:
        subprocess.run([*pip, "download", "--only-binary=:all:", "--python-version", "3.11",
                        *arch.pip_platform_args(),
                        "-d", str(wheelhouse), "-r", str(requirements)], check=True)
    return wheelhouse


def build_tensorboard(root: Path) -> Path:
    """build/tensorboard: TensorBoard's pinned wheels and their list."""
    out = fresh_output(root, "tensorboard")
    pinned_wheels(root, root / TENSORBOARD_REQUIREMENTS, out / "wheels")
    shutil.copy2(root / TENSORBOARD_REQUIREMENTS, out / "requirements.txt")
    return out


ARTIFACTS = (
    Artifact("the wheelhouse", lambda ctx: build_wheelhouse(ctx.root),
             inputs=(str(CLUSTER_REQUIREMENTS),)),
    Artifact("TensorBoard's wheels", lambda ctx: build_tensorboard(ctx.root),
             "downloaded once into build/downloads", inputs=(str(TENSORBOARD_REQUIREMENTS),)),
)
