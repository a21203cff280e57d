"""lspci on a GroqNode: the host's own devices and the GroqCards this process may use.

GroqFlow counts the chips it may use with `lspci -n | grep 1de0:0000`, so a card
shows here only to a process of the PBS job that holds it on this node (tspd's
view, GET /visible): outside a job, no card line. Without tspd the host's own
devices still show, as a real lspci always answers.

    $ lspci -n                    $ lspci
    00:00.0 0600: 1022:1480       00:00.0 Host bridge: Advanced Micro Devices, Inc. [AMD] ...
    21:00.0 1200: 1de0:0000       21:00.0 Processing accelerators: Groq Device 0000
Options: -n (numbers), -nn (names and numbers), -D (with the PCI domain),
-d [vendor]:[device] (only those devices).
"""

from __future__ import annotations

import argparse
import sys

from aitestbed.groq.card import (
    PCI_CLASS,
    PCI_CLASS_NAME,
    PCI_DEVICE,
    PCI_VENDOR,
    PCI_VENDOR_NAME,
    pci_address,
)
from aitestbed.groq.tspd.client import TspdClient, TspdError

# The host's own devices (ours: no listing of a real GroqNode is public).
# (address, class, class name, vendor, device, name, revision)
HOST_DEVICES = (
    ("0000:00:00.0", "0600", "Host bridge", "1022", "1480",
     "Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex", ""),
    ("0000:03:00.0", "0300", "VGA compatible controller", "1a03", "2000",
     "ASPEED Technology, Inc. ASPEED Graphics Family", "41"),
    ("0000:e1:00.0", "0200", "Ethernet controller", "15b3", "1017",
     "Mellanox Technologies MT27800 Family [ConnectX-5]", ""),
)


def devices(cards: list[int]) -> list[tuple[str, ...]]:
    """The node's devices in bus order: the host's and the given GroqCards."""
    groq = [(pci_address(c), PCI_CLASS, PCI_CLASS_NAME, PCI_VENDOR, PCI_DEVICE,
             f"{PCI_VENDOR_NAME} Device {PCI_DEVICE}", "") for c in cards]
    return sorted([*HOST_DEVICES, *groq])


def _match(selector: str | None, vendor: str, device: str) -> bool:
    if not selector:
        return True
    want_vendor, _, want_device = selector.lower().partition(":")
    return (want_vendor in ("", "*", vendor)) and (want_device.split(":")[0] in ("", "*", device))


def listing(cards: list[int], numeric: int = 0, domain: bool = False,
            selector: str | None = None) -> list[str]:
    """What `lspci [-n|-nn] [-D] [-d sel]` prints for a process that may use `cards`."""
    lines = []
    for address, cls, cls_name, vendor, device, name, rev in devices(cards):
        if not _match(selector, vendor, device):
            continue
        slot = address if domain else address.split(":", 1)[1]
        suffix = f" (rev {rev})" if rev else ""
        if numeric == 1:
            lines.append(f"{slot} {cls}: {vendor}:{device}{suffix}")
        elif numeric >= 2:  # a device without a name in pci.ids: "<vendor> Device [vvvv:dddd]"
            name = name.removesuffix(f" {device}") if name.endswith(f"Device {device}") else name
            lines.append(f"{slot} {cls_name} [{cls}]: {name} [{vendor}:{device}]{suffix}")
        else:
            lines.append(f"{slot} {cls_name}: {name}{suffix}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lspci", description="List PCI devices.")
    parser.add_argument("-n", action="count", default=0,
                        help="show numeric IDs (-nn: names and numbers)")
    parser.add_argument("-D", action="store_true", help="always show the PCI domain")
    parser.add_argument("-d", metavar="[VENDOR]:[DEVICE]", help="show only those devices")
    args = parser.parse_args(argv)
    try:
        cards = TspdClient().visible()
    except (TspdError, OSError, ValueError, KeyError):
        cards = []  # not a GroqNode, or tspd is down: the host's devices only
    lines = listing(cards, args.n, args.D, args.d)
    if lines:
        print("\n".join(lines))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
