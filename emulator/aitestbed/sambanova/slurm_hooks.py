"""The SambaNova nodes' Prolog / Epilog (PrologFlags=Alloc): a job's RDUs.

  rdu-prolog  ask this node's snd daemon to give the job its RDUs (its rdu GRES here)
  rdu-epilog  free them
Run as `python -m aitestbed.sambanova.slurm_hooks rdu-prolog|rdu-epilog` (roles/slurm_node).
"""

from __future__ import annotations

import socket

from aitestbed.node.slurm_jobinfo import active_job_ids, current_job, job_gres, run_hook
from aitestbed.sambanova.snd.client import SndClient, SndError

# snd may be (re)starting with its node: a job's prolog waits for it this long.
SND_WAIT_S = 30.0


def _snd_call(call):
    return SndClient.when_up(call, SND_WAIT_S)


def rdu_prolog() -> None:
    """Ask this node's snd to give the job its RDUs (its rdu GRES on this node)."""
    job_id, user = current_job()
    node = socket.gethostname().split(".")[0]
    count = job_gres(job_id).get(node, {}).get("rdu", 0)
    SndClient.reserve_for_job(lambda snd: snd.reserve(job_id, user, count),
                              release_stale_reservations, SND_WAIT_S)


def release_stale_reservations(snd: SndClient) -> None:
    """RDUs of jobs that are over (an epilog that never ran: the node died mid-job)."""
    active = active_job_ids()
    for job_id in snd.jobs():
        if job_id not in active:
            snd.release(job_id)


def rdu_epilog() -> None:
    job_id, _ = current_job()
    _snd_call(lambda snd: snd.release(job_id))


HOOKS = {"rdu-prolog": rdu_prolog, "rdu-epilog": rdu_epilog}


def main(argv: list[str] | None = None) -> None:
    run_hook("aitestbed.sambanova.slurm_hooks", HOOKS, (SndError,), argv)


if __name__ == "__main__":
    main()
