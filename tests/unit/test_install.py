"""`pipx install .`: the wheel carries the project's tree (setup.py), so an installed CLI
runs with no checkout, hashes its images' inputs as the checkout does (its `up` finds the
images the checkout built) and builds into ~/.cache/aitestbed/build, never into its install.
The install and an `up` from it, as a member of `docker`: tests/cluster/test_first_contact.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from aitestbed.host import imagecache

ROOT = Path(__file__).resolve().parents[2]
CLASSES = {"login": ("graphcore",), "ipu_node": ("graphcore",)}


def _wheel(tmp_path: Path, **env: str) -> Path:
    """A wheel built as pip builds one from a copy of the checkout (its tracked files)."""
    source = tmp_path / "source"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(out),
                    str(source)], check=True, env={**os.environ, **env},
                   stdout=subprocess.DEVNULL)
    (wheel,) = out.glob("aitestbed-*.whl")
    return wheel


def _installed(wheel: Path, site: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    env = {k: v for k, v in os.environ.items() if k not in ("AITESTBED_HOME",
                                                           "AITESTBED_BUILD_DIR")}
    env.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)


def test_an_installed_wheel_runs_from_its_own_tree_and_hashes_as_the_checkout(tmp_path):
    wheel = _wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    for part in ("inventory/mini.yml", "playbooks/site.yml", "roles/common/defaults/main.yml",
                 "scripts/ensure-base-image.sh", "images/node-os/Dockerfile", "ansible.cfg",
                 "emulator/aitestbed/host/paths.py"):
        assert f"aitestbed/_tree/{part}" in names, part
    assert not [n for n in names if "__pycache__" in n or ".egg-info/" in n.split("_tree/")[-1]]
    run = _installed(wheel, tmp_path / "site", (
        "from aitestbed.host import paths, imagecache\n"
        "print(paths.installed(), paths.project_root(), paths.build_root())\n"
        f"print(imagecache.cache_key({CLASSES!r}))"), tmp_path)
    assert run.returncode == 0, run.stderr
    flag, root, build = run.stdout.split("\n")[0].split()
    assert flag == "True"
    assert root == str(tmp_path / "site" / "aitestbed" / "_tree")
    assert build == str(tmp_path / "cache" / "aitestbed" / "build")
    # the same inputs, the same tags: the installed CLI's `up` uses the checkout's images
    assert run.stdout.split("\n")[1] == imagecache.cache_key(CLASSES)


def test_the_nodes_wheel_carries_no_tree(tmp_path):
    """build_wheelhouse builds the nodes' wheel with AITESTBED_WHEEL_TREE=0."""
    names = zipfile.ZipFile(_wheel(tmp_path, AITESTBED_WHEEL_TREE="0")).namelist()
    assert "aitestbed/host/paths.py" in names
    assert not [n for n in names if "_tree/" in n]


def test_without_any_tree_the_cli_says_what_to_do(tmp_path):
    """A wheel without its tree (an old one, or one built by hand) and no checkout."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "emulator" / "aitestbed", site / "aitestbed",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "AITESTBED_HOME"}
    run = subprocess.run([sys.executable, "-c", "from aitestbed.cli import main; main()",
                          "status"], cwd=tmp_path, env={**env, "PYTHONPATH": str(site)},
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr.strip() == (
        f"aitestbed: error: no project tree at {tmp_path} (its inventory/, "
        "roles/ and playbooks/): run aitestbed from its checkout, or install it from there "
        "with `pipx install .` (docs/install.md), or set AITESTBED_HOME to a checkout")
