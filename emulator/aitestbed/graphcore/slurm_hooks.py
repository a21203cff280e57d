"""The Graphcore controller's PrologSlurmctld / EpilogSlurmctld: V-IPU partitions.

  vipu-prolog  ask the V-IPU server for the partition slurm_<jobid> holding exactly
               the job's IPUs on each of its nodes
  vipu-epilog  remove it at the end
Run as `python -m aitestbed.graphcore.slurm_hooks vipu-prolog|vipu-epilog` (roles/slurm_controller).
"""

from __future__ import annotations

import time

from aitestbed.graphcore.vipu.client import VipuClient, VipuError
from aitestbed.node.slurm_jobinfo import (
    active_job_ids,
    current_job,
    hook_settings,
    job_gres,
    run_hook,
)

# Slurm frees a finished job's GRES before its EpilogSlurmctld has removed the
# partition, so the next job's prolog may briefly find those IPUs still taken.
RELEASE_WAIT_S = 30.0


def partition_name(job_id: str) -> str:
    return f"slurm_{job_id}"


def vipu_prolog() -> None:
    job_id, user = current_job()
    counts = {node: gres["ipu"] for node, gres in job_gres(job_id).items() if gres.get("ipu")}
    if not counts:
        return
    client = VipuClient.admin(hook_settings()["vipu_server"])
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
    """Partitions whose job is over (an epilog that never ran: a controller crash), and
    any that belongs to no job (only a job's prolog makes partitions)."""
    active = active_job_ids()
    for partition in client.partitions():
        if partition["job_id"] not in active:
            try:
                client.remove_partition(partition["name"])
            except VipuError as err:
                if err.status != 404:
                    raise


def vipu_epilog() -> None:
    job_id, _ = current_job()
    try:
        VipuClient.admin(hook_settings()["vipu_server"]).remove_partition(partition_name(job_id))
    except VipuError as err:
        if err.status != 404:  # a job without IPUs has no partition
            raise


HOOKS = {"vipu-prolog": vipu_prolog, "vipu-epilog": vipu_epilog}


def main(argv: list[str] | None = None) -> None:
    run_hook("aitestbed.graphcore.slurm_hooks", HOOKS, (VipuError,), argv)


if __name__ == "__main__":
    main()
