"""The shape every accelerator model shares: a chip, a system of chips, an allocation."""

from __future__ import annotations

from dataclasses import dataclass


class DeviceError(Exception):
    """What the vendor's stack reports; the message is the vendor's text."""


class NoDeviceError(DeviceError):
    """No device at all: run outside an allocation."""


class InsufficientDevicesError(DeviceError):
    """More devices asked for than the allocation holds."""


class InvalidDeviceCountError(DeviceError):
    """A device count the stack cannot reserve (e.g. not a power of two)."""


class OutOfMemoryError(DeviceError):
    """The model does not fit the devices' memory."""


@dataclass(frozen=True)
class ChipSpec:
    vendor: str
    name: str
    cores: int
    core_name: str  # tiles, PCUs, cores
    memory_bytes: int  # on-chip memory the compiled program must fit into
    memory_name: str

    @property
    def memory_per_core(self) -> int:
        return self.memory_bytes // self.cores


@dataclass(frozen=True)
class SystemSpec:
    name: str
    chip: ChipSpec
    chips: int

    @property
    def cores(self) -> int:
        return self.chip.cores * self.chips

    @property
    def memory_bytes(self) -> int:
        return self.chip.memory_bytes * self.chips


@dataclass(frozen=True)
class Allocation:
    """The chips a job holds (ids within its system), under the scheduler's name for them."""

    system: SystemSpec
    name: str
    chip_ids: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.chip_ids)
