"""The guide's remaining commands (issue 21), each run as its line is written: full host
names on SambaNova, `python` on the SN10 nodes, man pages, htop, and screen as a user."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.presubmit


def test_the_sambanova_nodes_full_names_resolve_from_the_login_node(cluster):
    # "The full name is sn30-r1-h1.ai.alcf.anl.gov and it may also be used."
    for name in ("sn30-r1-h1.ai.alcf.anl.gov", "sm-01.ai.alcf.anl.gov"):
        result = cluster.ssh("sambanova", f"ssh {name} hostname")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == name.split(".")[0]


def test_python_is_there_after_deactivate_on_sn10(cluster):
    """The guide's order on sm-01: deactivate the starter's venv, then
    `python -m venv --system-site-packages my_env`."""
    rc, out = cluster.hop("sambanova", "sm-01", "\n".join([
        "set -e", "cd ~ && rm -rf my_env",
        "python -m venv --system-site-packages my_env",
        "source my_env/bin/activate", "python --version", "deactivate",
        "python --version", "rm -rf my_env"]))
    assert rc == 0, out
    assert out.split().count("3.11.2") == 2, out


def test_man_pages_htop_and_screen_work_as_a_user(cluster):
    result = cluster.ssh("gc-login-01", "\n".join([
        "echo screen=$(MANPAGER=cat man screen 2>&1 | grep -m1 -c 'screen manager with VT100')",
        "echo tmux=$(MANPAGER=cat man tmux 2>&1 | grep -m1 -c 'terminal multiplexer')",
        "echo sbatch=$(MANPAGER=cat man sbatch 2>&1 | grep -m1 -c 'Submit a batch script')",
        "echo htop=$(htop --version | head -n 1 | cut -d' ' -f1)",
        # A detached session, then listed: /run/screen exists for users.
        "screen -dmS guide sleep 30 && echo session=$(screen -ls | grep -c guide)",
        "screen -S guide -X quit",
    ]))
    assert result.returncode == 0, result.stdout + result.stderr
    found = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert found == {"screen": "1", "tmux": "1", "sbatch": "1", "htop": "htop",
                     "session": "1"}, result.stdout + result.stderr
    assert "Cannot make directory" not in result.stderr
