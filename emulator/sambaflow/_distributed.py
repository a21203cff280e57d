"""Data parallel across instances: `srun --mpi=pmi2 python app.py run --data-parallel
--reduce-on-rdu ...` starts one instance per task; each holds its own tiles and the
gradients are averaged every step (on the real system over the RDUs' network, here
with torch.distributed's gloo over TCP).

Rank and size come from Slurm's step (SLURM_PROCID, SLURM_STEP_NUM_TASKS or
SLURM_NTASKS inside a step), or PMI's. The rendezvous is the step's first host
(`scontrol show hostnames` expands the step's node list) on a port derived from the
job and step ids, unless MASTER_ADDR / MASTER_PORT are set.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ._errors import SambaError

PORT_BASE = 20000
PORT_RANGE = 20000
TIMEOUT = datetime.timedelta(minutes=10)


@dataclass(frozen=True)
class Layout:
    rank: int
    world_size: int
    local_rank: int


def layout(env: Mapping[str, str] | None = None) -> Layout:
    env = os.environ if env is None else env
    size = env.get("SLURM_STEP_NUM_TASKS") or (
        env.get("SLURM_NTASKS") if "SLURM_STEP_NODELIST" in env else None) or env.get("PMI_SIZE")
    rank = env.get("SLURM_PROCID") if "SLURM_PROCID" in env else env.get("PMI_RANK")
    local = env.get("SLURM_LOCALID")
    try:
        world = int(size) if size else 1
        rank_value = int(rank) if rank else 0
        local_value = int(local) if local else rank_value
    except ValueError:
        return Layout(0, 1, 0)
    if world < 2:
        return Layout(0, 1, 0)
    return Layout(rank_value, world, local_value)


def expand_hostlist(nodelist: str) -> list[str]:
    """sn30-r1-h1,sn30-r2-h[1-2] -> hosts, with scontrol when there is a range."""
    if not nodelist:
        return []
    if "[" in nodelist:
        try:
            result = subprocess.run(["scontrol", "show", "hostnames", nodelist],
                                    capture_output=True, text=True, timeout=30, check=True)
            hosts = result.stdout.split()
            if hosts:
                return hosts
        except (OSError, subprocess.SubprocessError):
            pass
        return _expand_simple(nodelist)
    return [host for host in nodelist.split(",") if host]


def _expand_simple(nodelist: str) -> list[str]:
    hosts = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", nodelist):
        match = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part)
        if not match:
            hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                hosts.append(f"{prefix}{number:0{width}d}{suffix}")
    return hosts


def rendezvous(env: Mapping[str, str] | None = None) -> tuple[str, int]:
    env = os.environ if env is None else env
    address = env.get("MASTER_ADDR")
    if not address:
        hosts = expand_hostlist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", ""))
        address = hosts[0] if hosts else "127.0.0.1"
    port = env.get("MASTER_PORT")
    if port:
        return address, int(port)
    job = int(re.sub(r"\D", "", env.get("SLURM_JOB_ID", "")) or 0)
    step = int(re.sub(r"\D", "", env.get("SLURM_STEP_ID", "")) or 0)
    return address, PORT_BASE + (job * 64 + step) % PORT_RANGE


class Reducer:
    """Averages the instances' gradients; makes them start from rank 0's weights."""

    def __init__(self, where: Layout) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            raise SambaError("data parallel needs torch.distributed, which this torch lacks")
        self.layout = where
        self._dist = dist
        if not dist.is_initialized():
            address, port = rendezvous()
            try:
                dist.init_process_group("gloo", init_method=f"tcp://{address}:{port}",
                                        rank=where.rank, world_size=where.world_size,
                                        timeout=TIMEOUT)
            except RuntimeError as err:
                raise SambaError(f"data parallel: instance {where.rank} of {where.world_size} "
                                 f"could not join the others at {address}:{port}: {err}") from None

    def broadcast(self, tensors: list[torch.Tensor]) -> None:
        if not tensors:
            return
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        flat = _flatten_dense_tensors([t.detach() for t in tensors])
        self._dist.broadcast(flat, src=0)
        with torch.no_grad():
            for tensor, value in zip(tensors, _unflatten_dense_tensors(flat, tensors),
                                     strict=True):
                tensor.copy_(value)

    def average_gradients(self, parameters: list[torch.Tensor]) -> None:
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return
        flat = _flatten_dense_tensors(grads)
        self._dist.all_reduce(flat)
        flat /= self.layout.world_size
        for grad, value in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
            grad.copy_(value)
