"""Slurm's prolog and epilog hooks: the devices a job holds.

  vipu-prolog / vipu-epilog  PrologSlurmctld / EpilogSlurmctld on the Graphcore
      controller: ask the V-IPU server for the partition slurm_<jobid> holding
      exactly the job's IPUs on each of its nodes, and remove it at the end.
  rdu-prolog / rdu-epilog    Prolog / Epilog (PrologFlags=Alloc) on SambaNova
      nodes: ask the node's snd daemon to give the job its RDUs, and to free them.
A failing prolog makes Slurm requeue and hold the job, as with real hardware.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from aitestbed.graphcore.vipu.client import VipuClient, VipuError
from aitestbed.sambanova.snd.client import SndClient, SndError, SndUnavailable
from aitestbed.slurm.jobinfo import SlurmCommandError, job_gres, squeue

SLURM_SETTINGS = Path("/etc/slurm/aitestbed.json")


def _settings() -> dict:
    return json.loads(SLURM_SETTINGS.read_text())


def _job() -> tuple[str, str]:
    return os.environ["SLURM_JOB_ID"], os.environ.get("SLURM_JOB_USER", "")


def partition_name(job_id: str) -> str:
    return f"slurm_{job_id}"


# Slurm frees a finished job's GRES before its EpilogSlurmctld has removed the
# partition, so the next job's prolog may briefly find those IPUs still taken.
RELEASE_WAIT_S = 30.0
ACTIVE_STATES = "CONFIGURING,RUNNING,COMPLETING,SUSPENDED"


def vipu_prolog() -> None:
    job_id, user = _job()
    counts = {node: gres["ipu"] for node, gres in job_gres(job_id).items() if gres.get("ipu")}
    if not counts:
        return
    client = VipuClient(host=_settings()["vipu_server"])
    deadline = time.monotonic() + RELEASE_WAIT_S
    while True:
        try:
            client.create_partition(partition_name(job_id), counts, job_id=job_id, user=user)
            return
        except VipuError as err:
            if err.status != 409 or time.monotonic() > deadline:
                raise
        remove_stale_partitions(client)
        time.sleep(0.05)


def remove_stale_partitions(client: VipuClient) -> None:
    """Partitions whose job is over (an epilog that never ran: a controller crash)."""
    active = set(squeue("-h", "-t", ACTIVE_STATES, "-o", "%i").split())
    for partition in client.partitions():
        if partition["job_id"] and partition["job_id"] not in active:
            try:
                client.remove_partition(partition["name"])
            except VipuError as err:
                if err.status != 404:
                    raise


def vipu_epilog() -> None:
    job_id, _ = _job()
    try:
        VipuClient(host=_settings()["vipu_server"]).remove_partition(partition_name(job_id))
    except VipuError as err:
        if err.status != 404:  # a job without IPUs has no partition
            raise


# snd may be (re)starting with its node: a job's prolog waits for it this long.
SND_WAIT_S = 30.0


def _snd_call(call):
    deadline = time.monotonic() + SND_WAIT_S
    while True:
        try:
            return call(SndClient())
        except SndUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def rdu_prolog() -> None:
    """Ask this node's snd to give the job its RDUs (its rdu GRES on this node)."""
    job_id, user = _job()
    node = socket.gethostname().split(".")[0]
    count = job_gres(job_id).get(node, {}).get("rdu", 0)
    try:
        _snd_call(lambda snd: snd.reserve(job_id, user, count))
    except SndError as err:
        if err.status != 409:
            raise
        _snd_call(release_stale_reservations)
        _snd_call(lambda snd: snd.reserve(job_id, user, count))


def release_stale_reservations(snd: SndClient) -> None:
    """RDUs of jobs that are over (an epilog that never ran: the node died mid-job)."""
    active = set(squeue("-h", "-t", ACTIVE_STATES, "-o", "%i").split())
    for job_id in snd.jobs():
        if job_id not in active:
            snd.release(job_id)


def rdu_epilog() -> None:
    job_id, _ = _job()
    _snd_call(lambda snd: snd.release(job_id))


HOOKS = {"vipu-prolog": vipu_prolog, "vipu-epilog": vipu_epilog,
         "rdu-prolog": rdu_prolog, "rdu-epilog": rdu_epilog}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in HOOKS:
        sys.exit(f"usage: python -m aitestbed.slurm.hooks {{{','.join(HOOKS)}}}")
    try:
        HOOKS[argv[0]]()
    except (VipuError, SlurmCommandError, RuntimeError, OSError, KeyError, ValueError) as err:
        print(f"aitestbed {argv[0]}: job {os.environ.get('SLURM_JOB_ID', '?')}: {err}",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
