"""tsp-ctl: the GroqCards of this node as tspd reports them (status, health-check, clear).

ALCF's user guide runs these three before the whole-rack Llama-2 example
(reference/groq.md §2.5):

  for host in groq-r01-gn-0{1..9}; do ssh $host tsp-ctl status | grep -a "Device Locked" \
      | sed "s/ Device Locked/$host Device locked/" | uniq -c ; done
  ... ssh $host tsp-ctl health-check | grep -v "Health-check" | jq .[].Summary.tsp_status ...
  ... ssh $host tsp-ctl clear | uniq -c ...

No sample output of the real tool is public; ours is built so that those pipelines
mean what the guide says. `status` prints a header, then one line per card of the
node (all eight, whoever holds them); a card some process has open says
"Device Locked", any other "Device Unlocked", so the grep counts exactly the
locked cards:

  TSP   DEVICE           BUS           STATE            HEALTH  JOB                  USER      PID
  TSP0  /dev/groqA0.pci  0000:21:00.0  Device Locked    Up      12.groq-pbs          alice     4242
  TSP1  /dev/groqA1.pci  0000:22:00.0  Device Unlocked  Up      12.groq-pbs          alice     -
  TSP2  /dev/groqA2.pci  0000:41:00.0  Device Unlocked  Up      -                    -         -

`health-check` prints one line with "Health-check" in it, then a JSON array with
one element per card, each with .Summary.tsp_status ("Up" when healthy), .locked
and .memory ("loaded" while a program is left on the card, "clear"); it exits 1
when a card is not Up:

  Health-check of 8 GroqCards on groq-r01-gn-01: 8 Up
  [{"TSP": "TSP0", "Device": "/dev/groqA0.pci", "Bus": "0000:21:00.0",
    "Summary": {"tsp_status": "Up", "locked": true, "memory": "loaded"},
    "Chip": {"sram_bytes": 230000000, "clock_mhz": 900}}, ...]   (indented by 2)

`clear` resets the memory of the caller's cards (in a PBS
job: the job's cards; outside one: the cards no job holds; root: every card) and
leaves a locked card alone; it prints one line:

  Cleared 6 device(s): TSP2 TSP3 TSP4 TSP5 TSP6 TSP7; 2 locked device(s) left alone: TSP0 TSP1
"""

from __future__ import annotations

import argparse
import json
import sys

from aitestbed.groq.card import CLOCK_HZ, HEALTHY, SRAM_BYTES
from aitestbed.groq.tspd.client import TspdClient, TspdError

HEADER = (f"{'TSP':<5} {'DEVICE':<16} {'BUS':<13} {'STATE':<16} {'HEALTH':<7} {'JOB':<20} "
          f"{'USER':<9} PID")


def status_line(row: dict) -> str:
    state = "Device Locked" if row["locked"] else "Device Unlocked"
    return (f"{row['tsp']:<5} {row['device']:<16} {row['bus']:<13} {state:<16} "
            f"{row['health']:<7} {row['job'] or '-':<20} "
            f"{row['user'] or '-':<9} {row['pid'] or '-'}")


def status(rows: list[dict]) -> str:
    return "\n".join([HEADER, *map(status_line, rows)])


def health_check(node: str, rows: list[dict]) -> str:
    report = [{
        "TSP": row["tsp"], "Device": row["device"], "Bus": row["bus"],
        "Summary": {"tsp_status": row["health"], "locked": row["locked"],
                    "memory": row["memory"]},
        "Chip": {"sram_bytes": SRAM_BYTES, "clock_mhz": round(CLOCK_HZ / 1e6)},
    } for row in rows]
    up = sum(row["health"] == HEALTHY for row in rows)
    return (f"Health-check of {len(rows)} GroqCards on {node}: {up} Up\n"
            + json.dumps(report, indent=2))


def _names(cards: list[int]) -> str:
    return " ".join(f"TSP{c}" for c in cards)


def clear_line(result: dict) -> str:
    cleared, locked = result["cleared"], result["locked"]
    if not cleared and not locked:
        return "No device to clear: no GroqCard of this node is yours"
    line = f"Cleared {len(cleared)} device(s): {_names(cleared) or '-'}"
    if locked:
        line += f"; {len(locked)} locked device(s) left alone: {_names(locked)}"
    return line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tsp-ctl", description="Show, check and reset the GroqCards (TSPs) of this node.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("status", help="one line per card: locked or unlocked, job, user, PID")
    commands.add_parser("health-check",
                        help='a "Health-check" line, then a JSON array of the cards\' health')
    commands.add_parser("clear", help="reset the memory of your unlocked cards (root: all)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        sys.exit(2)
    client = TspdClient()
    try:
        if args.command == "status":
            print(status(client.cards()))
        elif args.command == "health-check":
            node, rows = client.node()["node"], client.cards()
            print(health_check(node, rows))
            if any(row["health"] != HEALTHY for row in rows):
                sys.exit(1)
        else:
            print(clear_line(client.clear()))
    except TspdError as err:
        sys.exit(f"tsp-ctl: {err}")
    except OSError as err:
        sys.exit(f"tsp-ctl: tspd cannot be reached: {err}")
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    main()
