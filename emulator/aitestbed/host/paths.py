"""Where the project's files are, and where what is built from them goes. A leaf every host
module may import.

  project_root  the tree holding inventory/, roles/ and playbooks/: AITESTBED_HOME, else
                this package's own checkout, else the copy of that tree an installed wheel
                carries (aitestbed/_tree: `pipx install .`, setup.py puts it there)
  build_root    what is built from it (wheelhouse, SDK wheels, downloads, logs):
                AITESTBED_BUILD_DIR, else the checkout's build/, else ~/.cache/aitestbed/build
                for an installed wheel (its tree is part of the install, never written)
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the aitestbed package
TREE = PACKAGE / "_tree"  # the wheel's copy of the project tree


def _checkout() -> Path:
    return PACKAGE.parents[1]


def installed() -> bool:
    """True where the CLI runs from an installed wheel, not from a checkout."""
    return not os.environ.get("AITESTBED_HOME") and not (_checkout() / "inventory").is_dir() \
        and (TREE / "inventory").is_dir()


def project_root() -> Path:
    """The tree holding inventory/, roles/ and playbooks/."""
    env = os.environ.get("AITESTBED_HOME")
    if env:
        return Path(env)
    return TREE if installed() else _checkout()


def cache_root() -> Path:
    """~/.cache/aitestbed (XDG_CACHE_HOME; AITESTBED_CACHE): what outlives a checkout."""
    env = os.environ.get("AITESTBED_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aitestbed"


def build_root() -> Path:
    env = os.environ.get("AITESTBED_BUILD_DIR")
    if env:
        return Path(env)
    return cache_root() / "build" if installed() else project_root() / "build"
