"""The wheel carries the project's tree (inventory/, roles/, playbooks/, images/, scripts/,
deploy/, docs/ (the Metis model's training corpus) and the emulator's source the images
install) as aitestbed/_tree, so `pipx install
.` and a built wheel run `aitestbed` with no checkout (aitestbed.host.paths). Everything
else is in pyproject.toml.

The files are those the image tags hash (images._tree_digest: every file but __pycache__
and *.egg-info), so a wheel's `up` finds the images its checkout built. Editable installs
read the checkout itself; the node wheel (build_wheelhouse) sets AITESTBED_WHEEL_TREE=0.
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TREE = ("ansible.cfg", "deploy", "docs", "emulator", "images", "inventory", "playbooks", "roles",
        "scripts", "pyproject.toml", "requirements.txt", "setup.py", "MANIFEST.in")


def tree_files(root: Path):
    for part in TREE:
        path = root / part
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            relative = file.relative_to(root)
            if any(p == "__pycache__" or p.endswith(".egg-info") or p == "_tree"
                   for p in relative.parts):
                continue
            if file.is_file():
                yield relative


class BuildPyWithTree(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("AITESTBED_WHEEL_TREE") == "0":
            return
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "aitestbed" / "_tree"
        shutil.rmtree(target, ignore_errors=True)
        for relative in tree_files(root):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / relative, target / relative)


setup(cmdclass={"build_py": BuildPyWithTree})
