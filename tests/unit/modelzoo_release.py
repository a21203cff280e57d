"""Our modelzoo as users get it: a release's tree cloned from the mirror the role builds.

Each release is all_releases/ with its own files laid over it
(roles/cerebras_login/files/build-modelzoo-mirror.sh); tests run that very tree.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

FILES = Path(__file__).resolve().parents[2] / "roles" / "cerebras_login" / "files"


@functools.cache
def _mirror() -> Path:
    work = Path(tempfile.mkdtemp(prefix="aitestbed-modelzoo-"))
    atexit.register(shutil.rmtree, work, True)
    subprocess.run(["sh", str(FILES / "build-modelzoo-mirror.sh"), str(FILES / "modelzoo"),
                    str(work / "modelzoo.git")], check=True, capture_output=True)
    return work


@functools.cache
def release(tag: str) -> Path:
    """A clone of the mirror checked out at `tag` (Release_1.9.1, Release_2.1.1)."""
    tree = _mirror() / tag
    subprocess.run(["git", "clone", "-q", "--branch", tag, str(_mirror() / "modelzoo.git"),
                    str(tree)], check=True, capture_output=True)
    return tree
