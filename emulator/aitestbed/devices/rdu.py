"""SambaNova DataScale SN10-8 and SN30-8: RDUs, their tiles, and what a PEF needs of them.

A node has 4 XRDUs of 2 RDUs each; an RDU has 4 tiles (SN10) or 8 (SN30) and
its DDR (SN10: 6 channels with one 64 GB DIMM each; SN30: 2,048 GB per XRDU,
as `snconfig show Node static` reports). A job holds the RDUs its Slurm GRES
gave it (`--gres=rdu:N`), recorded on the node by the RDU prolog, and with
them all their tiles. A PEF is compiled for a number of tiles and a batch
size; running it needs that many tiles and that batch size.
"""

from __future__ import annotations

from .base import (
    Allocation,
    ChipSpec,
    DeviceError,
    InsufficientDevicesError,
    NoDeviceError,
    SystemSpec,
)

XRDUS_PER_NODE = 4
RDUS_PER_XRDU = 2
RDUS_PER_NODE = XRDUS_PER_NODE * RDUS_PER_XRDU
GB = 1_000_000_000

SN10_RDU = ChipSpec(vendor="SambaNova", name="SN10 RDU", cores=4, core_name="tiles",
                    memory_bytes=6 * 64 * GB, memory_name="DDR")
SN30_RDU = ChipSpec(vendor="SambaNova", name="SN30 RDU", cores=8, core_name="tiles",
                    memory_bytes=2048 * GB // RDUS_PER_XRDU, memory_name="DDR")
SN10_8 = SystemSpec(name="DataScale SN10-8", chip=SN10_RDU, chips=RDUS_PER_NODE)
SN30_8 = SystemSpec(name="DataScale SN30-8", chip=SN30_RDU, chips=RDUS_PER_NODE)
SYSTEMS = {system.chip.cores: system for system in (SN10_8, SN30_8)}


class BatchSizeMismatchError(DeviceError):
    """The data's batch size is not the one the PEF was compiled for."""


def tile_names(rdu: int, tiles_per_rdu: int) -> list[str]:
    """RDU n of a node is RDU_(n%2) of XRDU_(n//2), as snconfig and sntilestat name them."""
    return [f"/XRDU_{rdu // RDUS_PER_XRDU}/RDU_{rdu % RDUS_PER_XRDU}/TILE_{t}"
            for t in range(tiles_per_rdu)]


def system_with(tiles_per_rdu: int) -> SystemSpec:
    try:
        return SYSTEMS[tiles_per_rdu]
    except KeyError:
        raise ValueError(f"no DataScale system has {tiles_per_rdu} tiles per RDU") from None


def allocation_from_records(records: dict, job_id: str) -> Allocation | None:
    """The RDUs a job holds on this node (the RDU prolog's records), or None."""
    job = records.get("jobs", {}).get(str(job_id))
    if job is None:
        return None
    system = system_with(int(records["tiles_per_rdu"]))
    return Allocation(system=system, name=f"job {job_id} on {records.get('node', '?')}",
                      chip_ids=tuple(job["rdus"]))


def tiles(allocation: Allocation) -> list[str]:
    return [t for rdu in allocation.chip_ids for t in tile_names(rdu, allocation.system.chip.cores)]


def place_pef(tiles_needed: int, allocation: Allocation | None) -> list[str]:
    """The tiles a PEF compiled for `tiles_needed` tiles runs on, or why it cannot run."""
    if tiles_needed < 1:
        raise ValueError(f"a PEF needs at least one tile, not {tiles_needed}")
    if allocation is None or allocation.size == 0:
        raise NoDeviceError(
            f"no RDU is allocated to this job: the PEF needs {tiles_needed} tiles; "
            "run it with srun or sbatch (--gres=rdu:N for more than one RDU)")
    held = tiles(allocation)
    if tiles_needed > len(held):
        per_rdu = allocation.system.chip.cores
        raise InsufficientDevicesError(
            f"the PEF needs {tiles_needed} tiles but the job holds {len(held)} "
            f"({allocation.size} RDU(s) of {per_rdu} tiles on {allocation.system.name}): "
            f"ask for --gres=rdu:{-(-tiles_needed // per_rdu)}")
    return held[:tiles_needed]


def check_batch_size(compiled: int, given: int) -> None:
    """A PEF runs only the batch size it was compiled for."""
    if given != compiled:
        raise BatchSizeMismatchError(
            f"the PEF was compiled for batch size {compiled}, but the input has batch size "
            f"{given}: compile again with -b {given}, or run with -b {compiled}")
