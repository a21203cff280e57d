"""snconfig: the node's static configuration (RDUs, tiles, PCIe, DDR) and its dynamic state.

`snconfig show Node static` prints the indented tree of the guide's SN30 sample
(the SN10 guide shows the same fields); `snconfig show Node dynamic` gives each
tile's status, `perfect` when healthy. Serial numbers are fixed per node name.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

from aitestbed.sambanova.rdu import RDUS_PER_XRDU, SN10_8, SN30_8, XRDUS_PER_NODE
from aitestbed.sambanova.snd.client import SndClient, SndError

BANNER = "=" * 54


def _banner(title: str) -> list[str]:
    return [BANNER, f"======={'':16}{'NODE Info':<24}=======", BANNER,
            f"======={'':16}{title:<24}======="]


# Per RDU: DDR channels, DIMMs per channel and their sizes (GB). SN10: 6 x 64 GB (the
# guide's DIMM_C0 64.0 GB, DIMM_C1 0.0 GB); SN30: 8 x 128 GB, 2,048 GB per XRDU.
DDR = {SN10_8.name: (6, (64.0, 0.0)), SN30_8.name: (8, (128.0,))}
DIMM_LETTERS = "CDEFGHJKLM"  # SN30's channels 6 and 7 hold DIMM_L0 and DIMM_M0


def _serial(node: str, *parts: object, length: int) -> str:
    return hashlib.sha256("/".join(map(str, (node, *parts))).encode()).hexdigest()[:length].upper()


def static_info(node: dict, now: float | None = None) -> str:
    platform, host = node["platform"], node["node"]
    channels, dimms = DDR[platform]
    first_letter = 0 if channels == 6 else 2
    field = lambda name, value, depth: f"{'    ' * depth}{name:<18}: {value}"  # noqa: E731
    lines = [*_banner("Static Info"),
             f"Timestamp: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}",
             f"Platform Name: {platform}", "Node Name: NODE",
             f"    Number of XRDUS: {XRDUS_PER_NODE}"]
    for x in range(XRDUS_PER_NODE):
        lines += [f"    XRDU Name: XRDU_{x}", f"        Number of RDUS: {RDUS_PER_XRDU}"]
        for r in range(RDUS_PER_XRDU):
            lines += [f"        RDU name: RDU_{r}",
                      field("Serial Number", _serial(host, x, r, length=16), 3),
                      f"            Number of TILES: {node['tiles_per_rdu']}"]
            for t in range(node["tiles_per_rdu"]):
                lines += [f"            TILE Name: TILE_{t}", field("Serial Number", "N/A", 4)]
            lines.append("            Number of PCIES: 4")
            for p in range(4):
                lines += [f"            PCIE Name: PCIE_{p}", field("Bandwidth", "32 GB/s", 4),
                          field("Speed", "16 GT/s", 4), field("Width", "16", 4),
                          field("Serial Number", "N/A", 4)]
            lines.append(f"            Number of DDRCHs: {channels}")
            for c in range(channels):
                letter = DIMM_LETTERS[first_letter + c]
                lines += [f"            DDR CH Name: DDRCH_{c}",
                          f"                Number of DIMMS: {len(dimms)}"]
                for d, size in enumerate(dimms):
                    lines += [f"                DIMM Name: DIMM_{letter}{d}",
                              field("Size", f"{size:.1f} GB", 5),
                              field("Serial Number",
                                    _serial(host, x, r, c, d, length=7) if size else "N/A", 5)]
        total = RDUS_PER_XRDU * channels * sum(dimms)
        lines.append(f"        Total XRDU_{x} memory size (GB): {total:.1f}")
    return "\n".join(lines)


def dynamic_info(node: dict, rows: list[dict], now: float | None = None) -> str:
    lines = [*_banner("Dynamic Info"),
             f"Timestamp: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}",
             f"Platform Name: {node['platform']}", "Node Name: NODE"]
    current = None
    for row in rows:
        _, xrdu, rdu, tile = row["tile"].split("/")
        if (xrdu, rdu) != current:
            if current is None or xrdu != current[0]:
                lines.append(f"    XRDU Name: {xrdu}")
            lines.append(f"        RDU name: {rdu}")
            current = (xrdu, rdu)
        state = "idle" if not row.get("pid") else "busy"
        lines += [f"            TILE Name: {tile}",
                  f"                {'Status':<18}: {row['status']}",
                  f"                {'State':<18}: {state}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="snconfig",
                                     description="Show the configuration of this DataScale node.")
    sub = parser.add_subparsers(dest="command")
    show = sub.add_parser("show", help="show a component's information")
    show.add_argument("component", choices=["Node"], help="what to show")
    show.add_argument("kind", choices=["static", "dynamic"], nargs="?", default="static",
                      help="static configuration (default) or dynamic state")
    args = parser.parse_args(argv)
    client = SndClient()
    try:
        node = client.node()
        if args.command is None or args.kind == "static":
            print(static_info(node))
        else:
            print(dynamic_info(node, client.tiles()))
    except SndError as err:
        sys.exit(f"snconfig: {err}")


if __name__ == "__main__":
    main()
