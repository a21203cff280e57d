"""The GroqNodes' PBS prologue and epilogue: a job's GroqCards from this node's tspd.

PBS's mom runs `$PBS_HOME/mom_priv/prologue` before a job and `.../epilogue` after
it, as root, with the job id, the user and the group as arguments (a wrapper
script execs `python -m aitestbed.groq.pbs_hooks prologue|epilogue "$@"`):

  prologue JOBID USER GROUP   reads the job with `qstat -f -F json JOBID`, counts the cards
                              its exec_vnode gives this node (`cards_on_node`) and reserves
                              them in tspd; a retried prologue gets the same cards; when
                              too few are free, the cards of jobs PBS no longer has (an
                              epilogue that never ran) are released first
  epilogue JOBID USER GROUP   releases them (the job's sessions end, memory is cleared)
Exit 0 on success; on failure one line on stderr and exit 1, and PBS handles the
job as it does when a prologue fails.

mom_priv/prologue runs on the job's first node only. A job on several nodes (the
whole-rack Llama-2 reservation) needs its cards on each: an execjob_prologue /
execjob_epilogue hook runs on every node of the job and can call `reserve_job` /
`release_job` with the job's exec_vnode and place.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

from aitestbed.groq.card import CARDS_PER_NODE
from aitestbed.groq.tspd.client import TspdClient, TspdError

QSTAT = "/opt/pbs/bin/qstat"
RESOURCE = "groq_accelerator"
# tspd may be (re)starting with its node: a job's prologue waits for it this long.
TSPD_WAIT_S = 30.0


def _short(name: str) -> str:
    """A vnode or host name without its domain or vnode index: groq-r01-gn-01."""
    return re.sub(r"\[.*\]$", "", name.strip()).split(".")[0]


def cards_on_node(exec_vnode: str, place: str, node: str, node_cards: int = CARDS_PER_NODE) -> int:
    """The GroqCards a job holds on `node`, from its PBS exec_vnode and place.

    exec_vnode is `(vnode:res=val:...)+(vnode:...)`, one parenthesised chunk per
    chunk of the select, a chunk spread over vnodes joined by `+` inside it; a node
    may appear in several chunks, whose groq_accelerator add up. A job that asked
    for no groq_accelerator here but has the node to itself (place excl or exclhost,
    as `-l select=1,place=excl`) gets every card.
    """
    here = _short(node)
    present, total = False, 0
    for piece in re.split(r"[()+]", exec_vnode or ""):
        if not piece.strip():
            continue
        vnode, *resources = piece.split(":")
        if _short(vnode) != here:
            continue
        present = True
        for resource in resources:
            name, _, value = resource.partition("=")
            if name.strip() == RESOURCE:
                total += int(value)
    if present and total == 0 and {"excl", "exclhost"} & set((place or "").split(":")):
        return node_cards
    return total


def qstat_job(job_id: str) -> dict:
    """The job's attributes from `qstat -f -F json JOBID` (replaceable in tests)."""
    done = subprocess.run([QSTAT, "-f", "-F", "json", job_id], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise RuntimeError(f"qstat -f -F json {job_id}: {said}")
    jobs = json.loads(done.stdout).get("Jobs", {})
    if job_id in jobs:
        return jobs[job_id]
    if len(jobs) == 1:
        return next(iter(jobs.values()))
    raise RuntimeError(f"qstat knows no job {job_id}")


def active_job_ids() -> set[str]:
    """The jobs PBS still has (queued, running, exiting): `qstat -f -F json`."""
    done = subprocess.run([QSTAT, "-f", "-F", "json"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise RuntimeError(f"qstat -f -F json: {said}")
    return set(json.loads(done.stdout or "{}").get("Jobs", {}))


def release_stale_reservations(tspd: TspdClient) -> list[str]:
    """Cards of jobs PBS no longer has (an epilogue that never ran: the node died mid-job)."""
    active = active_job_ids()
    stale = [job_id for job_id in tspd.jobs() if job_id not in active]
    for job_id in stale:
        tspd.release(job_id)
    return stale


def node_name() -> str:
    return socket.gethostname().split(".")[0]


def _tspd(call):
    return TspdClient.when_up(call, TSPD_WAIT_S)


def reserve_job(job_id: str, user: str, exec_vnode: str, place: str,
                node: str | None = None) -> dict:
    """Reserve in this node's tspd the cards the job holds here."""
    count = cards_on_node(exec_vnode, place, node or node_name())
    return TspdClient.reserve_for_job(lambda tspd: tspd.reserve(job_id, user, count),
                                      release_stale_reservations, TSPD_WAIT_S)


def release_job(job_id: str) -> None:
    _tspd(lambda tspd: tspd.release(job_id))


def _args(hook: str, argv: list[str] | None) -> tuple[str, str]:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        raise ValueError(f"usage: {hook} JOBID USER [GROUP] (as PBS's mom calls it)")
    return argv[0], argv[1]


def prologue(argv: list[str] | None = None) -> int:
    """PBS's prologue: argv is [job id, user, group]. Returns the exit status."""
    return _run("prologue", argv, lambda job_id, user: _prologue(job_id, user))


def _prologue(job_id: str, user: str) -> None:
    job = qstat_job(job_id)
    place = str(job.get("Resource_List", {}).get("place", ""))
    reserve_job(job_id, user, str(job.get("exec_vnode", "")), place)


def epilogue(argv: list[str] | None = None) -> int:
    """PBS's epilogue: argv is [job id, user, group, ...]. Returns the exit status."""
    return _run("epilogue", argv, lambda job_id, user: release_job(job_id))


def _run(hook: str, argv: list[str] | None, action) -> int:
    job_id = "?"
    try:
        job_id, user = _args(hook, argv)
        action(job_id, user)
    except (TspdError, RuntimeError, OSError, KeyError, ValueError, TypeError) as err:
        print(f"aitestbed {hook}: job {job_id}: {err}", file=sys.stderr)
        return 1
    return 0


HOOKS = {"prologue": prologue, "epilogue": epilogue}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in HOOKS:
        sys.exit(f"usage: python -m aitestbed.groq.pbs_hooks {{{','.join(HOOKS)}}} "
                 "JOBID USER GROUP")
    sys.exit(HOOKS[argv[0]](argv[1:]))


if __name__ == "__main__":
    main()
