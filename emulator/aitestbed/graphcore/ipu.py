"""Graphcore Bow IPU and Bow-Pod64, and the checks PopTorch makes before it runs.

The allocation is the job's V-IPU partition (IPUOF_VIPU_API_PARTITION_ID, set
by Slurm for jobs run with --ipus), asked of the V-IPU server. Messages are
PopTorch's and Poplar's own text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from aitestbed.devices.base import (
    Allocation,
    ChipSpec,
    InsufficientDevicesError,
    InvalidDeviceCountError,
    NoDeviceError,
    OutOfMemoryError,
    SystemSpec,
)
from aitestbed.graphcore.vipu.client import VipuClient, VipuError

# The documented figures: 1,472 tiles and 900 MB of In-Processor-Memory per IPU;
# a Bow-Pod64 has 94,208 cores and 57.6 GB.
BOW_IPU = ChipSpec(vendor="Graphcore", name="Bow IPU", cores=1472, core_name="tiles",
                   memory_bytes=900_000_000, memory_name="In-Processor-Memory")
TILE_MEMORY_BYTES = BOW_IPU.memory_per_core
BOW_POD64 = SystemSpec(name="Bow-Pod64", chip=BOW_IPU, chips=64)
MAX_IPUS_PER_PROCESS = 64

NO_IPU = ("Failed to acquire {count} IPU(s)\nNo IPU detected in the system.\n"
          "For more information use the Graphcore command-line tool `gc-monitor`.")
TOO_FEW = ("Failed to acquire {count} IPU(s)\n"
           "No device found on the system with {count} IPUs: the configuration needs changing")


def ipus_to_reserve(ipus_per_replica: int, replication_factor: int = 1,
                    auto_round: bool = False) -> int:
    """IPUs used x replicas, which PopTorch must reserve as a power of two."""
    needed = ipus_per_replica * replication_factor
    if needed < 1:
        raise InvalidDeviceCountError(f"The model specifies the use of {needed} IPUs")
    reserved = 1 << (needed - 1).bit_length()
    if reserved != needed and not auto_round:
        raise InvalidDeviceCountError(
            f"The model specifies the use of {needed} IPUs, however PopTorch must reserve a "
            f"minimum of {reserved} in order to allow the model to run, because PopTorch must "
            f"reserve a power of 2 or maximum of {MAX_IPUS_PER_PROCESS} IPUs per process. "
            "Please reconfigure your model to use a different number of IPUs or set "
            "poptorch.Options().autoRoundNumIPUs(True).")
    return reserved


def allocation_from_environment(env: Mapping[str, str] | None = None,
                                client: VipuClient | None = None) -> Allocation | None:
    """The job's V-IPU partition, or None outside an allocation."""
    env = os.environ if env is None else env
    name = env.get("IPUOF_VIPU_API_PARTITION_ID")
    if not name:
        return None
    client = client or VipuClient(env.get("IPUOF_VIPU_API_HOST"), env.get("IPUOF_VIPU_API_PORT"))
    try:
        partition = client.partition(name)
    except VipuError as err:
        if err.status == 404:
            return None
        raise NoDeviceError(f"{NO_IPU.format(count='?')}\n{err}") from None
    return Allocation(system=BOW_POD64, name=name, chip_ids=tuple(partition["ipus"]))


def acquire(count: int, allocation: Allocation | None) -> tuple[int, ...]:
    """The IPU ids a program of `count` IPUs attaches to, as PopTorch acquires them."""
    if allocation is None or allocation.size == 0:
        raise NoDeviceError(NO_IPU.format(count=count))
    if count > allocation.size:
        raise InsufficientDevicesError(TOO_FEW.format(count=count))
    return allocation.chip_ids[:count]


def check_memory(bytes_per_ipu: list[int]) -> None:
    """Fail as Poplar does when a program's data does not fit an IPU's tiles."""
    for ipu, needed in enumerate(bytes_per_ipu):
        if needed > BOW_IPU.memory_bytes:
            per_tile = -(-needed // BOW_IPU.cores)
            raise OutOfMemoryError(
                f"Out of memory: Cannot fit all variable data onto one or more tiles. "
                f"IPU {ipu} needs {needed:,} bytes ({per_tile:,} bytes per tile) but tiles only "
                f"have {TILE_MEMORY_BYTES:,} bytes of memory ({BOW_IPU.memory_bytes:,} bytes "
                f"of {BOW_IPU.memory_name} per IPU)")
