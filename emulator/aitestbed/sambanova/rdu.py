"""SambaNova DataScale SN10-8 and SN30-8: RDUs, their tiles, and what a PEF needs of them.

A node has 4 XRDUs of 2 RDUs each; an RDU has 4 tiles (SN10) or 8 (SN30) and
its DDR (SN10: 6 channels with one 64 GB DIMM each; SN30: 2,048 GB per XRDU,
as `snconfig show Node static` reports). Which job and process hold which
RDUs and tiles is the node's snd daemon's to say (aitestbed.sambanova). A PEF
is compiled for a batch size and runs only that one.
"""

from __future__ import annotations

from aitestbed.devices.base import ChipSpec, DeviceError, SystemSpec

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


def check_batch_size(compiled: int, given: int) -> None:
    """A PEF runs only the batch size it was compiled for."""
    if given != compiled:
        raise BatchSizeMismatchError(
            f"the PEF was compiled for batch size {compiled}, but the input has batch size "
            f"{given}: compile again with -b {given}, or run with -b {compiled}")
