"""The shepherd under each workload (aitestbed.cerebras.shepherd, D02): whatever the worker
leaves behind (a setsid daemon, a double fork) dies when the worker ends or is stopped;
the worker's exit status is the shepherd's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from aitestbed.cerebras import shepherd

pytestmark = pytest.mark.unit

# A worker that leaves a `setsid` daemon (double fork) behind, writes its pid, and exits 3.
LEAVER = textwrap.dedent("""
    import os, subprocess, sys, time
    daemon = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time\\n"
                               "p = subprocess.Popen([sys.executable, '-c', "
                               "'import time; time.sleep(600)'], start_new_session=True)\\n"
                               "print(p.pid, flush=True)"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    grandchild = int(daemon.stdout.readline())
    daemon.wait()
    open(sys.argv[1], "w").write(str(grandchild))
    if sys.argv[2] == "exit":
        sys.exit(3)
    time.sleep(600)
""")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def shepherded(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "leaver.py"
    script.write_text(LEAVER)
    return subprocess.Popen([sys.executable, "-m", "aitestbed.cerebras.shepherd",
                             str(os.getuid()), str(os.getgid()), "-", "--",
                             sys.executable, str(script), str(tmp_path / "daemon.pid"), mode],
                            start_new_session=True)


def daemon_pid(tmp_path: Path) -> int:
    deadline = time.monotonic() + 30
    while not (tmp_path / "daemon.pid").exists() or not (tmp_path / "daemon.pid").read_text():
        assert time.monotonic() < deadline, "the worker did not start its daemon"
        time.sleep(0.05)
    return int((tmp_path / "daemon.pid").read_text())


def test_a_daemon_the_worker_left_dies_with_it_and_its_status_passes(tmp_path):
    process = shepherded(tmp_path, "exit")
    assert process.wait(timeout=60) == 3
    daemon = daemon_pid(tmp_path)
    assert not alive(daemon)


def test_the_agents_stop_ends_the_worker_and_its_daemon_within_its_grace(tmp_path):
    process = shepherded(tmp_path, "stay")
    daemon = daemon_pid(tmp_path)
    assert alive(daemon)
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)  # as the agent's Workload.stop does
    assert process.wait(timeout=10) == 128 + signal.SIGTERM
    assert time.monotonic() - started < 1.0  # before the agent's SIGKILL (1 s)
    assert not alive(daemon)


def test_bad_arguments_get_the_usage_and_exit_2():
    result = subprocess.run([sys.executable, "-m", "aitestbed.cerebras.shepherd", "1", "2"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m aitestbed.cerebras.shepherd")


def test_children_reads_the_parent_past_a_name_with_spaces_and_parentheses(tmp_path):
    proc = tmp_path / "proc"
    for pid, stat in {"10": "10 (a) b) S 7 1", "11": "11 (x) S 9 1", "12": "12 (y) S 7 1",
                      "self": "nothing"}.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "stat").write_text(stat)
    assert sorted(shepherd.children(7, proc)) == [10, 12]
