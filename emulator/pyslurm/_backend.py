"""Run Slurm's commands: here when they are installed, else on a login node over ssh
(their text is read by aitestbed.node.slurm_text, as everywhere in aitestbed).

On the host, the cluster is $AITESTBED_CLUSTER (default `aitestbed`, as for the
aitestbed CLI) and the login node $AITESTBED_SLURM_LOGIN (default gc-login-01,
else the cluster's first login node): which Slurm cluster answers depends on it
(gc-login-* the Graphcore POD64, sambanova the SN30 nodes).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from aitestbed.node import slurm_text

from .error import RPCError

_HOST_LINE = re.compile(r"^Host\s+(\S+)", re.MULTILINE)


def _ssh_prefix() -> list[str]:
    cluster = os.environ.get("AITESTBED_CLUSTER", "aitestbed")
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    config = state / "aitestbed" / cluster / "login" / "ssh_config"
    if not config.is_file():
        raise RPCError(msg=f"Slurm's commands are not installed here and there is no cluster "
                           f"{cluster!r} to reach ({config} is missing): start one with "
                           f"`aitestbed --name {cluster} up` or set AITESTBED_CLUSTER")
    hosts = _HOST_LINE.findall(config.read_text())
    login = os.environ.get("AITESTBED_SLURM_LOGIN") or (
        "gc-login-01" if "gc-login-01" in hosts else hosts[0])
    return ["ssh", "-F", str(config), "-o", "BatchMode=yes", login, "--"]


def is_local() -> bool:
    """Slurm's commands run on this machine (inside the cluster)."""
    return shutil.which("sbatch") is not None


def run(*argv: str, stdin: str | None = None) -> str:
    """Slurm command's stdout; RPCError with its own message when it fails."""
    command = list(argv) if is_local() else [*_ssh_prefix(), shlex.join(argv)]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if result.returncode:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        raise RPCError(result.returncode, lines[-1] if lines else f"{argv[0]} failed")
    return result.stdout


def run_json(*argv: str) -> dict:
    return json.loads(run(*argv, "--json"))


key_values = slurm_text.key_values  # `Key=Value Key2=Value two` (scontrol -o) -> dict


def parse_gres(text: str | None) -> dict[str, int]:
    """`ipu:16`, `gres:ipu:2`, `gpu:tesla:2`, `ipu:0,rdu:4` -> {"ipu": 16, "gpu:tesla": 2,
    ...}: pyslurm's keys (name, or name:type), zero counts left out."""
    return {key: n for key, n in slurm_text.parse_gres(text, typed=True).items() if n}
