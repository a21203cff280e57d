"""popdist: the environment poprun gives each instance of a distributed program.

poprun sets POPDIST_NUM_TOTAL_REPLICAS, POPDIST_NUM_INSTANCES,
POPDIST_INSTANCE_INDEX, POPDIST_NUM_LOCAL_REPLICAS, POPDIST_REPLICA_INDEX_OFFSET
and POPDIST_NUM_IPUS_PER_REPLICA; outside poprun every getter answers as for a
single instance with one replica.
"""

from __future__ import annotations

import os


def _get(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise RuntimeError(f"{name}={value!r} is not a number: poprun sets it") from None


def isPopdistEnvSet() -> bool:  # noqa: N802 - popdist's names
    return "POPDIST_NUM_TOTAL_REPLICAS" in os.environ


def getNumTotalReplicas() -> int:  # noqa: N802
    return _get("POPDIST_NUM_TOTAL_REPLICAS", 1)


def getNumInstances() -> int:  # noqa: N802
    return _get("POPDIST_NUM_INSTANCES", 1)


def getInstanceIndex() -> int:  # noqa: N802
    return _get("POPDIST_INSTANCE_INDEX", 0)


def getNumLocalReplicas() -> int:  # noqa: N802
    return _get("POPDIST_NUM_LOCAL_REPLICAS", getNumTotalReplicas() // max(1, getNumInstances()))


def getReplicaIndexOffset() -> int:  # noqa: N802
    return _get("POPDIST_REPLICA_INDEX_OFFSET", getInstanceIndex() * getNumLocalReplicas())


def getNumIpusPerReplica() -> int:  # noqa: N802
    return _get("POPDIST_NUM_IPUS_PER_REPLICA", 1)


def getDeviceId() -> int:  # noqa: N802
    """The device id of this instance's replicas within the partition."""
    return getReplicaIndexOffset() * getNumIpusPerReplica()


def init() -> None:
    """Set up the instances' communication (torch.distributed over gloo between instances)."""
    if getNumInstances() < 2:
        return
    import torch.distributed as dist

    if dist.is_available() and not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", rank=getInstanceIndex(), world_size=getNumInstances())


def finalize() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
