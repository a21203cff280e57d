"""`gc-monitor`: the IPUs of the active partition (or of all of them) and who uses them.

One block per partition: with card information (the default) a table of the
IPU-Ms and IPUs, then the table of the IPUs "attached from other namespaces"
(the job's processes run on the IPU hosts, not where gc-monitor runs) with
the application host, clock, IPU temperature and the board's temperature and
power. The partitions come from the V-IPU server (IPUOF_VIPU_API_HOST).

When no partition is active the real gc-monitor crashes; ALCF's documentation
says so ("if there are no partitions active, gc-monitor will core dump:
Segmentation fault (core dumped)"), so the emulation prints the shell's
message and exits with the status of a SIGSEGV death, 139.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from aitestbed.graphcore.gc_info import (
    CLOCK,
    board_serial,
    host_of,
    ipum_of,
    partition_devices,
    sensors,
    vipu_client,
)
from aitestbed.graphcore.vipu.client import VipuError

SEGFAULT = "Segmentation fault (core dumped)"
SEGFAULT_STATUS = 128 + 11

# Card information: what the IPU-Ms of a Bow-Pod64 report for SDK 3.x.
IPUM_SOFTWARE = "2.6.0"
VIPU_SERVER_VERSION = "1.18.0"
ICU_FIRMWARE = "2.5.9"
BOARD_TYPE = "Bow-2000"


def center(text: str, width: int) -> str:
    """Centre as the Graphcore tools do: the odd space goes to the right."""
    pad = max(width - len(text), 0)
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def _rule(widths: Sequence[int]) -> str:
    return "+" + "+".join("-" * w for w in widths) + "+"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "|" + "|".join(center(c, w) for c, w in zip(cells, widths, strict=True)) + "|"


def _fit(widths: list[int], rows: Sequence[Sequence[str]], margin: int) -> list[int]:
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell) + margin)
    return widths


def attached_table(partition: dict) -> list[str]:
    """The table `gc-monitor --no-card-info` prints for a partition in use."""
    title = f"IPUs in {partition['name']} attached from other namespaces"
    header = ["ID", "Application host", "Clock", "Temp", "Temp", "Power"]
    groups: list[list[list[str]]] = []  # rows grouped by board: its readings on its first row
    last_board = None
    for device in partition_devices(partition["ipus"]):
        if device.multi:
            continue
        ipu = device.ipus[0]
        ipu_temp, board_temp, power = sensors(ipu)
        row = [str(device.id), host_of(partition, ipu), CLOCK, f"{ipu_temp:.1f} C"]
        if ipu // 2 != last_board:
            groups.append([row + [f"{board_temp:.1f} C", f"{power:.1f} W"]])
        else:
            groups[-1].append(row + ["", ""])
        last_board = ipu // 2
    widths = _fit([4, 30, 14, 11, 11, 11], [header] + [r for g in groups for r in g], 2)
    left = sum(widths[:4]) + 3
    if len(title) + 2 > left:
        widths[1] += len(title) + 2 - left
        left = len(title) + 2
    right = widths[4] + widths[5] + 1
    lines = ["+" + "-" * left + "+" + "-" * right + "+",
             "|" + center(title, left) + "|" + center("Board", right) + "|",
             _rule(widths), _row(header, widths), _rule(widths)]
    for group in groups:
        lines += [_row(r, widths) for r in group] + [_rule(widths)]
    return lines


def card_table(partition: dict, active: bool) -> list[str]:
    """The card information table gc-monitor prints first unless --no-card-info."""
    state = " [active]" if active else ""
    title = (f"Partition: {partition['name']} (gcd:0){state} has {len(partition['ipus'])} "
             "reconfigurable IPUs")
    header = ["IPU-M", "Serial", "IPU-M SW", "Server version", "ICU FW", "Type", "ID", "IPU#",
              "Routing"]
    groups: list[list[list[str]]] = []  # rows grouped by IPU-M
    last_ipum = None
    for device in partition_devices(partition["ipus"]):
        if device.multi:
            continue
        ipu = device.ipus[0]
        ipum, index = ipum_of(ipu)
        row = [ipum, board_serial(ipu), IPUM_SOFTWARE, VIPU_SERVER_VERSION, ICU_FIRMWARE,
               BOARD_TYPE, str(device.id), str(index), "DNC"]
        if ipum != last_ipum:
            groups.append([])
        groups[-1].append(row)
        last_ipum = ipum
    widths = _fit([13, 20, 8, 14, 10, 6, 4, 6, 7], [header] + [r for g in groups for r in g], 0)
    total = sum(widths) + len(widths) - 1
    name_width = 15
    if len(title) + 2 > total - name_width - 1:
        widths[1] += len(title) + 2 - (total - name_width - 1)
        total = sum(widths) + len(widths) - 1
    rest = total - name_width - 1
    lines = ["+" + "-" * name_width + "+" + "-" * rest + "+",
             "|" + center("gc-monitor", name_width) + "|" + center(title, rest) + "|",
             _rule(widths), _row(header, widths), _rule(widths)]
    for group in groups:
        lines += [_row(r, widths) for r in group] + [_rule(widths)]
    return lines


def render(partitions: Sequence[dict], active: str | None, card_info: bool) -> list[str]:
    lines: list[str] = []
    for partition in partitions:
        if card_info:
            lines += card_table(partition, partition["name"] == active)
        lines += attached_table(partition)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gc-monitor", description="Monitor the IPUs of the partition and their users.")
    parser.add_argument("--no-card-info", action="store_true",
                        help="don't display the card (IPU-M and IPU) information")
    parser.add_argument("--all-partitions", action="store_true",
                        help="show every partition (default: the active partition only)")
    args = parser.parse_args(argv)

    active = os.environ.get("IPUOF_VIPU_API_PARTITION_ID") or None
    try:
        client = vipu_client()
        if args.all_partitions:
            partitions = sorted(client.partitions(), key=lambda p: (p["name"] != active, p["name"]))
        elif active is None:
            partitions = []
        else:
            try:
                partitions = [client.partition(active)]
            except VipuError as err:
                if err.status != 404:
                    raise
                partitions = []
    except VipuError as err:
        print(f"gc-monitor: {err}", file=sys.stderr)
        return 1
    partitions = [p for p in partitions if p.get("state", "PS_ACTIVE") == "PS_ACTIVE"]
    if not partitions:
        print(SEGFAULT, file=sys.stderr)  # the documented behaviour, see the module docstring
        return SEGFAULT_STATUS
    print("\n".join(render(partitions, active, card_info=not args.no_card_info)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
