"""pip inside the cluster never tries PyPI: roles/common's site-wide pip.conf, run by real pip.

The file is rendered by Ansible's own engine (ansible_render) and handed to pip; pip is
pointed at an index on 127.0.0.1:9 (nothing listens there), so a configuration that let
pip try an index shows up as retries and connection errors, and nothing is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from . import ansible_render

pytestmark = pytest.mark.unit

WHEEL = "aitb_probe-1.0-py3-none-any.whl"


def _wheel(directory: Path) -> Path:
    """A minimal pure-Python wheel, like the SDKs' local wheels."""
    path = directory / WHEEL
    info = "aitb_probe-1.0.dist-info"
    files = {
        "aitb_probe/__init__.py": "VERSION = '1.0'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: aitb-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


@pytest.fixture
def offline_pip(tmp_path):
    """pip (this venv's) installing into a fresh venv under the role's pip.conf only."""
    conf = tmp_path / "pip.conf"
    conf.write_text(ansible_render.template("common", "pip.conf.j2", {}))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(conf), PIP_INDEX_URL="http://127.0.0.1:9/simple",
               PIP_DISABLE_PIP_VERSION_CHECK="1", HOME=str(tmp_path))

    def pip(*args: str) -> tuple[int, str, float]:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pip", "--python",
                               str(tmp_path / "venv" / "bin" / "python"), "install", *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        return done.returncode, done.stdout + done.stderr, time.monotonic() - start
    return pip


def test_the_guides_pip_install_of_a_pypi_version_fails_at_once(offline_pip):
    rc, out, seconds = offline_pip("torchvision==0.14.0")
    assert rc == 1, out
    assert "No matching distribution found for torchvision==0.14.0" in out, out
    assert "(from versions: none)" in out, out
    assert "Retrying" not in out and "127.0.0.1" not in out, out
    assert seconds < 30, seconds


def test_local_wheels_and_requirements_already_installed_still_install(offline_pip, tmp_path):
    rc, out, _ = offline_pip(str(_wheel(tmp_path)))
    assert rc == 0 and "Successfully installed aitb-probe-1.0" in out, out
    (tmp_path / "requirements.txt").write_text("aitb-probe\naitb-probe==1.0\n")
    rc, out, _ = offline_pip("-r", "requirements.txt")
    assert rc == 0 and "Requirement already satisfied: aitb-probe" in out, out
    assert "Retrying" not in out and "127.0.0.1" not in out, out


def test_the_file_is_one_pip_reads_site_wide_before_the_cerebras_wheels_file():
    """Its place (common_pip_conf) is in pip's global list, ahead of /etc/pip.conf, where the
    Cerebras login nodes add their wheels (aitestbed.cerebras.node_setup): later files win."""
    code = ("from pip._internal.configuration import get_configuration_files, kinds\n"
            "print('\\n'.join(get_configuration_files()[kinds.GLOBAL]))\n")
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_DIRS"}
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    dest = ansible_render.role_defaults("common")["common_pip_conf"]
    assert dest in found and "/etc/pip.conf" in found, found
    assert found.index(dest) < found.index("/etc/pip.conf")
    task = ansible_render.role_task("common", "main.yml", "Keep pip off the network (the cluster "
                                    "cannot reach PyPI; it fails at once instead)")
    assert task["ansible.builtin.template"]["dest"] == "{{ common_pip_conf }}"
