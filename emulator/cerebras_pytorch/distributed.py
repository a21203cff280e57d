"""cstorch.distributed: which task of a run this process is.

A Wafer-Scale Cluster run has the client (ordinal 0, the "master": the user's
process on the login node, which compiles and prints) and the input workers that
stream batches to the systems. Here the appliance job's worker is both the
process that runs the training loop and the one stream of its input: inside an
appliance job this process is ordinal 0 of 2 tasks (the client, and one
streamer), the master and also a streamer; in a plain process (CPU runs, the
client before it submits) it is the only task and not a streamer. The one worker
computes the whole effective batch, so the streaming batch size is the effective
batch size.
"""

from __future__ import annotations

from .appliance import session as _session


def _in_appliance() -> bool:
    return _session.active() is not None


def num_tasks() -> int:
    """The tasks of the run: the client, plus the input worker on the appliance."""
    return 2 if _in_appliance() else 1


def get_ordinal() -> int:
    return 0


def is_master_ordinal() -> bool:
    return get_ordinal() == 0


def is_streamer() -> bool:
    """True in the process that streams input to the systems (the appliance worker)."""
    return _in_appliance()


def num_streamers() -> int:
    return 1 if _in_appliance() else 0


def get_streaming_rank() -> int:
    if not is_streamer():
        raise RuntimeError("get_streaming_rank() is only available on a streamer "
                           "(an input worker of an appliance job).")
    return 0


def get_streaming_batch_size(effective_batch_size: int) -> int:
    """The batch this task streams for an effective (global) batch size."""
    size = int(effective_batch_size)
    if size < 1:
        raise ValueError(f"Expected a positive effective batch size, got {effective_batch_size}")
    return size


__all__ = ["get_ordinal", "get_streaming_batch_size", "get_streaming_rank",
           "is_master_ordinal", "is_streamer", "num_streamers", "num_tasks"]
