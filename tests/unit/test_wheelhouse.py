"""The wheelhouse's aitestbed wheel is the checkout's package, byte for byte the same
each time: a clean clone and a long-used checkout build the same wheel, so the images'
copy and a rebuilt one agree (site.yml then has nothing to reinstall)."""

import hashlib
import shutil
import zipfile
from pathlib import Path

from aitestbed.host.inventory import project_root
from aitestbed.host.systems.common import build_wheelhouse


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(project_root() / "emulator", root / "emulator",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(project_root() / "pyproject.toml", root)
    (root / "images").mkdir()
    (root / "images" / "cluster-requirements.txt").write_text("# nothing to download\n")
    return root


def _wheel(root: Path) -> Path:
    (wheel,) = (root / "build" / "wheelhouse").glob("aitestbed-*.whl")
    return wheel


def test_a_module_left_in_setuptools_build_dir_is_not_shipped(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    monkeypatch.setenv("AITESTBED_HOME", str(root))
    build_wheelhouse(root)
    first = hashlib.sha256(_wheel(root).read_bytes()).hexdigest()
    # What an older checkout leaves behind: a module that has since moved.
    stale = root / "build" / "lib" / "aitestbed" / "vipu" / "client.py"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("raise ImportError('moved to aitestbed.graphcore')\n")
    build_wheelhouse(root)
    names = zipfile.ZipFile(_wheel(root)).namelist()
    assert "aitestbed/vipu/client.py" not in names
    assert "aitestbed/cli.py" in names
    assert hashlib.sha256(_wheel(root).read_bytes()).hexdigest() == first
