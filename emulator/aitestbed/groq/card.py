"""A GroqNode as the emulator models it: eight GroqCards, one GroqChip on each.

The facts (ALCF's user guide, reference/groq.md §1): a GroqChip has 230 MB of
on-chip SRAM and runs at 900 MHz; its PCI vendor:device is 1de0:0000 (class 1200,
"Processing accelerators"), which is what GroqFlow counts in `lspci -n`.

Every name a card goes by is made here and nowhere else: its index 0..7 (what
tspd, PBS and the runtime count in), its TSP name, its device file and its PCI
address. The bus numbers are ours (no listing of a real GroqNode is public):
two cards behind each of four root ports, as on a dual-socket host.
"""

from __future__ import annotations

CARDS_PER_NODE = 8
SRAM_BYTES = 230_000_000
CLOCK_HZ = 900e6
PCI_VENDOR = "1de0"
PCI_DEVICE = "0000"
PCI_ID = f"{PCI_VENDOR}:{PCI_DEVICE}"
PCI_CLASS = "1200"  # processing accelerator
PCI_CLASS_NAME = "Processing accelerators"
PCI_VENDOR_NAME = "Groq"
HEALTHY = "Up"

_BUSES = (0x21, 0x22, 0x41, 0x42, 0xA1, 0xA2, 0xC1, 0xC2)
assert len(_BUSES) == CARDS_PER_NODE


def _check(index: int) -> int:
    if not 0 <= index < CARDS_PER_NODE:
        raise ValueError(f"a GroqNode has cards 0..{CARDS_PER_NODE - 1}, not {index}")
    return index


def tsp_name(index: int) -> str:
    """The card's name in tsp-ctl: TSP0 .. TSP7."""
    return f"TSP{_check(index)}"


def device_path(index: int) -> str:
    """The card's device file, as GroqWare's driver names it."""
    return f"/dev/groqA{_check(index)}.pci"


def pci_address(index: int) -> str:
    """The card's PCI address with its domain, as `lspci -D` prints it."""
    return f"0000:{_BUSES[_check(index)]:02x}:00.0"


def describe(index: int) -> dict:
    return {"index": index, "tsp": tsp_name(index), "device": device_path(index),
            "bus": pci_address(index), "pci_id": PCI_ID}
