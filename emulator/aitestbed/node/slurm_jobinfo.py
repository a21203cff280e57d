"""What Slurm allocated to a job, read from `scontrol show job -d -o` (its text read by
node/slurm_text), and what every system's prolog/epilog shares (the job's id and user,
the hook's settings, its entry point).

Generic resources are count-only here (no device files), so Slurm knows how
many IPUs or RDUs a job holds on each node but not which: the V-IPU server and
the RDU records choose the devices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aitestbed.node.slurm_text import job_nodes, parse_gres

SLURM_SETTINGS = Path("/etc/slurm/aitestbed.json")
# A job in one of these states may still hold devices.
ACTIVE_STATES = "CONFIGURING,RUNNING,COMPLETING,SUSPENDED"


class SlurmCommandError(RuntimeError):
    pass


def _slurm(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SlurmCommandError(result.stderr.strip() or f"{' '.join(argv)} failed")
    return result.stdout


def scontrol(*args: str) -> str:
    return _slurm("scontrol", *args)


def squeue(*args: str) -> str:
    return _slurm("squeue", *args)


def expand_hostlist(hostlist: str) -> list[str]:
    if "[" not in hostlist:
        return [h for h in hostlist.split(",") if h]
    return scontrol("show", "hostnames", hostlist).split()


def gres_per_node(detail: str) -> dict[str, dict[str, int]]:
    """node -> gres name -> count, from the one-line `scontrol show job -d -o` text."""
    allocation: dict[str, dict[str, int]] = {}
    for hostlist, gres in job_nodes(detail):
        counts = parse_gres(gres)
        for host in expand_hostlist(hostlist):
            allocation[host] = counts
    return allocation


def job_gres(job_id: str) -> dict[str, dict[str, int]]:
    return gres_per_node(scontrol("show", "job", "-d", "-o", job_id))


def active_job_ids() -> set[str]:
    return set(squeue("-h", "-t", ACTIVE_STATES, "-o", "%i").split())


def hook_settings() -> dict:
    """What the roles tell the hooks (/etc/slurm/aitestbed.json), e.g. the V-IPU server."""
    return json.loads(SLURM_SETTINGS.read_text())


def current_job() -> tuple[str, str]:
    """The job a prolog or epilog runs for: its id and user (Slurm's environment)."""
    return os.environ["SLURM_JOB_ID"], os.environ.get("SLURM_JOB_USER", "")


def run_hook(module: str, hooks: dict[str, Callable[[], None]], errors: tuple[type, ...],
             argv: list[str] | None = None) -> None:
    """`python -m <module> <hook>`: run one hook; a failure is one line and exit 1, which
    makes Slurm requeue and hold the job, as with real hardware."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in hooks:
        sys.exit(f"usage: python -m {module} {{{','.join(hooks)}}}")
    try:
        hooks[argv[0]]()
    except (*errors, SlurmCommandError, RuntimeError, OSError, KeyError, ValueError) as err:
        print(f"aitestbed {argv[0]}: job {os.environ.get('SLURM_JOB_ID', '?')}: {err}",
              file=sys.stderr)
        sys.exit(1)
