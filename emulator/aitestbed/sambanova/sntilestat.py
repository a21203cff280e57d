"""sntilestat: each tile's utilisation and the process holding it, as snd reports them.

    TILE                 %idle %exec %pload %aload %chkpt %quiesce    PID     USER COMMAND
    /XRDU_0/RDU_0/TILE_0   2.1  96.9    0.8    0.1    0.0      0.0 796481  vsastry python /opt/...
Lines are cut at 130 columns, as in the guide's samples.
"""

from __future__ import annotations

import argparse
import sys
import time

from aitestbed.sambanova.snd.client import SndClient, SndError

LINE_WIDTH = 130
HEADER = (f"{'TILE':<20} {'%idle':>5} {'%exec':>5} {'%pload':>6} {'%aload':>6} {'%chkpt':>6} "
          f"{'%quiesce':>8} {'PID':>6} {'USER':>8} COMMAND")


def format_row(row: dict) -> str:
    line = (f"{row['tile']:<20} {row['idle']:5.1f} {row['exec']:5.1f} {row['pload']:6.1f} "
            f"{row['aload']:6.1f} {row['chkpt']:6.1f} {row['quiesce']:8.1f}")
    if row.get("pid"):
        line += f" {row['pid']:6d} {row['user']:>8} {row['command']}"
    return line[:LINE_WIDTH]


def report(rows: list[dict], skip_idle: bool = False) -> str:
    shown = [r for r in rows if not (skip_idle and not r.get("pid"))]
    return "\n".join([HEADER, *map(format_row, shown)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sntilestat",
                                     description="Show the utilisation of this node's RDU tiles.")
    parser.add_argument("--skip-idle", action="store_true", help="leave out idle tiles")
    parser.add_argument("-i", "--interval", type=float, metavar="SECONDS",
                        help="report again every SECONDS")
    parser.add_argument("--count", type=int, metavar="N",
                        help="stop after N reports (with -i; default: until interrupted)")
    parser.add_argument("-T", "--timestamp", action="store_true",
                        help="print the time before each report")
    args = parser.parse_args(argv)
    if args.interval is not None and args.interval <= 0:
        parser.error("argument -i/--interval: must be a positive number of seconds")
    if args.count is not None and args.count < 1:
        parser.error("argument --count: must be at least 1")
    client = SndClient()
    reports = args.count or (1 if args.interval is None else None)
    done = 0
    try:
        while reports is None or done < reports:
            if done:
                time.sleep(args.interval or 1.0)
            rows = client.tiles()
            if args.timestamp:
                print(time.strftime("%Y-%m-%d %H:%M:%S"))
            print(report(rows, args.skip_idle), flush=True)
            done += 1
    except SndError as err:
        sys.exit(f"sntilestat: {err}")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
