"""First contact as most people have it: a member of the `docker` group, not root, in a
checkout of their own. The README's set-up (`make cluster-up`: the runtime venv only) brings
up a one-system mini cluster beside root's (the session's), the user logs in with the
passcode and runs a Slurm job; the name of root's cluster is refused to them, naming root.

Run as root (it makes the user, in the `docker` group the engine's socket belongs to), with
the images of the mini profile present (`make test`'s images phase), so nothing is built.
"""

from __future__ import annotations

import grp
import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.presubmit

ROOT = Path(__file__).resolve().parents[2]


def as_user(user: str, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`command` in the user's login shell, in their checkout (~/aitestbed)."""
    return subprocess.run(["runuser", "-l", user, "-c", f"cd ~/aitestbed && {command}"],
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def docker_user():
    """A new user in the `docker` group, with a copy of this checkout (what git tracks, and
    what it would, so the images' inputs are the same files), removed at the end."""
    if os.getuid() != 0:
        pytest.skip("makes a user: run as root (CI does)")
    try:
        grp.getgrnam("docker")
    except KeyError:
        pytest.skip("no `docker` group on this machine: its engine is root's only")
    user = f"aitbfc{uuid.uuid4().hex[:5]}"
    subprocess.run(["useradd", "-m", "-G", "docker", "-s", "/bin/bash", user], check=True)
    try:
        home = Path(f"~{user}").expanduser()
        files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co",
                                "--exclude-standard"], capture_output=True, check=True).stdout
        subprocess.run(f"tar -C {shlex.quote(str(ROOT))} --null -T - -c | "
                       f"runuser -u {user} -- tar -C {home} --one-top-level=aitestbed -x",
                       shell=True, input=files, check=True)
        yield user
    finally:
        subprocess.run(["runuser", "-l", user, "-c", "cd ~/aitestbed 2>/dev/null && "
                        ".venv/bin/aitestbed --name first-contact destroy"],
                       capture_output=True, timeout=300, check=False)
        subprocess.run(["pkill", "-KILL", "-u", user], check=False)
        subprocess.run(["userdel", "-r", user], capture_output=True, check=False)


def test_a_docker_group_member_brings_up_logs_in_and_runs_a_job(docker_user, cluster):
    setup = as_user(docker_user, "make venv")
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    # the runtime only: none of the tests' tools
    tools = as_user(docker_user, ".venv/bin/python -c 'import aitestbed.cli, ansible, pyotp' && "
                    "test ! -e .venv/bin/pytest && test ! -e .venv/bin/ruff")
    assert tools.returncode == 0, tools.stdout + tools.stderr

    taken = as_user(docker_user, f"make cluster-up PROFILE=mini SYSTEMS=graphcore "
                    f"NAME={cluster.name}")
    assert taken.returncode != 0
    assert (f"a cluster named '{cluster.name}' on this Docker engine belongs to root (uid 0): "
            "choose another --name") in taken.stderr
    assert not Path(f"~{docker_user}/.local/state/aitestbed/{cluster.name}").expanduser().exists()

    up = as_user(docker_user, "make cluster-up PROFILE=mini SYSTEMS=graphcore NAME=first-contact")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    assert "cluster 'first-contact' ready" in up.stdout + up.stderr
    assert "building" not in up.stderr  # the images phase made them; nothing is built
    login = as_user(docker_user, ".venv/bin/aitestbed --name first-contact login")
    assert login.returncode == 0, login.stdout + login.stderr
    job = as_user(docker_user, "ssh -F ~/.ssh/aitestbed-first-contact.conf -o BatchMode=yes "
                  "gc-login-01 'srun -N1 hostname; whoami'", timeout=180)
    assert job.returncode == 0, job.stdout + job.stderr
    assert job.stdout.split() == ["gc-poplar-02", docker_user]


@pytest.mark.slow("downloads Debian's minbase (41 MB) into a new user's cache and makes an image")
def test_a_docker_group_member_makes_the_base_image_with_no_registry_and_no_root(docker_user):
    """What ensure-base-image.sh runs where debian:bookworm-slim cannot be pulled: the base
    from Debian's packages, made by the new user with the system's python3 (no venv: the
    standard library alone), under a tag of the test's own."""
    tag = f"aitestbed-test/base-{docker_user}:bookworm"
    try:
        made = as_user(docker_user, "PYTHONPATH=emulator /usr/bin/python3 -m "
                       f"aitestbed.host.debian_base {tag}", timeout=900)
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
        assert re.search(r"downloading \d+ Debian packages \(\d+\.\d MB\)", made.stderr)
        assert f"base image {tag} made in" in made.stderr
        check = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
             "dpkg --audit && test -L /bin && apt-get --version | head -1 && "
             "dpkg-query -W -f '${Status}\\n' | sort | uniq -c && cat /etc/apt/sources.list"],
            capture_output=True, text=True, timeout=120, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        lines = check.stdout.splitlines()
        assert lines[0].startswith("apt 2.6")
        # every package installed, none half-configured: debootstrap's minbase, 88 of them
        count, status = lines[1].split(maxsplit=1)
        assert status == "install ok installed" and 80 <= int(count) <= 100, check.stdout
        assert lines[2].startswith("deb ") and lines[2].endswith(" bookworm main")
        again = as_user(docker_user, f"AITESTBED_BASE_IMAGE={tag} "
                        "bash scripts/ensure-base-image.sh")
        assert again.returncode == 0 and again.stderr == ""  # present: nothing to do
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


@pytest.mark.slow("installs the CLI's wheel and its dependencies into a new venv, then a cluster")
def test_a_docker_group_member_installs_the_wheel_and_brings_up_from_anywhere(docker_user):
    """`pip install .` (what `pipx install .` runs), not editable: the installed CLI runs from
    the user's home with no checkout in sight and finds the images the checkout's tags name
    (so it builds nothing, and writes nothing into its install)."""
    name = "first-contact-wheel"
    try:
        install = as_user(docker_user, "python3 -m venv ~/cli && ~/cli/bin/pip install -q "
                          "--disable-pip-version-check . -c requirements.txt", timeout=900)
        assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
        where = subprocess.run(["runuser", "-l", docker_user, "-c", "~/cli/bin/python -c "
                                "'from aitestbed.host import paths; print(paths.project_root())'"],
                               capture_output=True, text=True, check=False)
        assert where.stdout.strip().endswith("/site-packages/aitestbed/_tree"), where.stderr
        up = subprocess.run(["runuser", "-l", docker_user, "-c",
                             f"cd ~ && ~/cli/bin/aitestbed --name {name} up --profile mini "
                             "--systems graphcore"],
                            capture_output=True, text=True, timeout=900, check=False)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert f"cluster '{name}' ready" in up.stdout + up.stderr
        assert "building" not in up.stderr
        # nothing was written into the install (what it builds goes to ~/.cache/aitestbed)
        assert not list(Path(f"~{docker_user}/cli").expanduser().glob(
            "lib/python3*/site-packages/aitestbed/_tree/build"))
    finally:
        subprocess.run(["runuser", "-l", docker_user, "-c",
                        f"~/cli/bin/aitestbed --name {name} destroy"],
                       capture_output=True, timeout=300, check=False)
