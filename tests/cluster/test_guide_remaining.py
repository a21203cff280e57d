"""The guide's remaining commands (issue 21), run as the user on the node the guide uses.

Expected cost: about 40 s in all (two venvs, a handful of pip, git and Slurm commands;
no job is submitted).
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.presubmit

GC_LOGIN, POPLAR = "gc-login-01", "gc-poplar-02"
SN_LOGIN, SN30, SN10 = "sambanova", "sn30-r1-h1", "sm-01"
NO_TORCHVISION = ("ERROR: Could not find a version that satisfies the requirement "
                  "torchvision==0.14.0 (from versions: none)\n"
                  "ERROR: No matching distribution found for torchvision==0.14.0")
WHEEL = "poptorch-3.1.0+98660_0a383de63f_ubuntu_20_04-cp311-cp311-linux_x86_64.whl"


def _timed(script: str) -> str:
    """The script, then how long its pip took: `SECONDS=<n>` (bash's own clock)."""
    return f"start=$SECONDS\n{script}\necho \"rc=$? SECONDS=$((SECONDS - start))\""


def test_pip_in_a_graphcore_venv_fails_at_once_and_still_installs_the_sdk_wheel(cluster):
    rc, out = cluster.hop(GC_LOGIN, POPLAR, "\n".join([
        "set -e",
        "d=$(mktemp -d) && cd $d",
        "virtualenv -q env && . env/bin/activate",
        f"pip install -q /software/graphcore/poplar_sdk/3.1.0/{WHEEL}",
        "python -c 'import poptorch; print(\"POPTORCH\", poptorch.__version__)'",
        "printf 'tqdm\\ntorchvision\\n' > requirements.txt && pip install -r requirements.txt",
        "set +e",
        _timed("python -m pip install torchvision==0.14.0"),
        "cd && rm -rf $d"]), timeout=300)
    assert rc == 0, out
    assert "POPTORCH 3.1.0" in out and "Requirement already satisfied: torchvision" in out, out
    assert NO_TORCHVISION in out and "Retrying" not in out, out
    seconds = int(re.search(r"rc=1 SECONDS=(\d+)", out).group(1))
    assert seconds <= 10, out  # before: five retries with SSL errors


def test_pip_fails_at_once_on_the_login_nodes_and_the_sambanova_nodes(cluster):
    venv = ("d=$(mktemp -d) && python3 -m venv --system-site-packages $d/env && "
            ". $d/env/bin/activate")
    for login, node in ((GC_LOGIN, None), (SN_LOGIN, None), (SN_LOGIN, SN30)):
        script = f"{venv}\n{_timed('pip install torchvision==0.14.0')}\nrm -rf $d"
        if node is None:
            rc, out = cluster.run(login, f"bash -lc '{script}'")
        else:
            rc, out = cluster.hop(login, node, script)
        assert NO_TORCHVISION in out and "rc=1 SECONDS=" in out, (login, node, out)
        assert "Retrying" not in out, (login, node, out)


def test_the_graphcore_examples_clone_on_the_login_node(cluster):
    rc, out = cluster.run(GC_LOGIN, "d=$(mktemp -d) && cd $d && "
                                    "git clone -q https://github.com/graphcore/examples.git && "
                                    "git -C examples tag && "
                                    "ls examples/tutorials/simple_applications/pytorch/mnist; "
                                    "cd && rm -rf $d")
    assert rc == 0, out
    assert "v3.1.0\nv3.3.0\n" in out and "mnist_poptorch.py" in out, out


def test_sinfo_gres_used_on_sambanova_lists_only_rdus(cluster):
    rc, out = cluster.run(SN_LOGIN, "sinfo -O AllocNodes,GresUsed,Gres,NodeList")
    assert rc == 0, out
    assert "ipu" not in out and re.search(r"rdu:\d+\S*\s+rdu:8\s+sn30-r1-h1", out), out
    rc, out = cluster.run(GC_LOGIN, "sinfo -h -O GresUsed")
    assert rc == 0 and "rdu" not in out and "ipu:" in out, out


def test_squeue_on_sn30_has_the_guides_wide_name_column(cluster):
    rc, out = cluster.run(SN_LOGIN, "bash -lc 'squeue | head -n1'")
    assert rc == 0, out
    assert out.rstrip("\n").lstrip() == (
        "JOBID PARTITION                      NAME     USER ST       TIME  NODES NODELIST(REASON)")


def _from(out: str, first: str) -> list[str]:
    lines = out.splitlines()
    assert first in lines, out
    return lines[lines.index(first):]


def test_systemctl_status_snd_as_the_guide_prints_it_on_sn30_and_sn10(cluster):
    rc, out = cluster.hop(SN_LOGIN, SN30, "systemctl status snd")
    assert rc == 0, out
    lines = _from(out, "● snd.service - SN Devices Service")
    assert lines[2:4] == ["    Drop-In: /etc/systemd/system/snd.service.d",
                          "             └─override.conf"]
    assert re.match(r"     Memory: [\d.]+M$", lines[7]), out
    assert lines[-1] == ("Warning: some journal files were not opened due to insufficient "
                         "permissions.")
    rc, out = cluster.hop(SN_LOGIN, SN10, "systemctl status snd")
    assert rc == 0, out
    lines = _from(out, "* snd.service - SN Devices Service")
    assert lines[1] == ("   Loaded: loaded (/usr/lib/systemd/system/snd.service; enabled; "
                        "vendor preset: enabled)")
    assert re.match(r" Main PID: \d+ \(\S+\)$", lines[3]), out
    assert re.match(r"           `-\d+ /opt/sambaflow/bin/snd$", lines[6]), out
    assert "Memory:" not in out and lines[-1].startswith("Warning: Journal has been rotated")
