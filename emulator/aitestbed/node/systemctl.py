"""systemctl for the node's runit services: `systemctl status snd` as the guide shows it.

Nodes run their services under runit, not systemd. A role that wants a service
to answer to systemctl describes it in /etc/aitestbed/units/NAME.json
({"description", "exec", "unit_file"}); its main process is the one running
`exec`. `status` and `is-active` work for every user; `start`, `stop` and
`restart` (root) ask runit.

Hosts of one image may print `status` as different systemd versions do: the unit's
"variants", keyed by the host's Slurm cluster (/etc/slurm/aitestbed.json), override
its fields. The guide's SN10 prints an older systemd's (`*`, `` `- ``, no Memory line,
labels three columns narrower), its SN30 a newer one's with a Drop-In; both end with
a journal warning ("warning"; "warning_for_users": only for users other than root).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

UNITS = Path("/etc/aitestbed/units")
PROC = Path("/proc")
SLURM_SETTINGS = Path("/etc/slurm/aitestbed.json")


def _host_variant() -> str:
    """The host's Slurm cluster (sn10, sn30, ...), or "" when it has none."""
    try:
        return str(json.loads(SLURM_SETTINGS.read_text()).get("cluster", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _unit(name: str, variant: str | None = None) -> dict | None:
    name = name.removesuffix(".service")
    path = UNITS / f"{name}.json"
    if not path.is_file():
        return None
    unit = json.loads(path.read_text())
    variants = unit.pop("variants", {})
    chosen = variants.get(_host_variant() if variant is None else variant, {})
    return {"name": name, **unit, **chosen}


def _main_pid(executable: str) -> int | None:
    pids = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if executable.encode() in argv[:2]:
            pids.append(int(entry.name))
    return min(pids) if pids else None


def _started(pid: int) -> float:
    stat = (PROC / str(pid) / "stat").read_text()
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    boot = next(int(line.split()[1]) for line in (PROC / "stat").read_text().splitlines()
                if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _status_field(pid: int, key: str) -> str:
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1].strip()
    return ""


def timespan(seconds: float) -> str:
    """systemd's relative time: '1 months 18 days', '2h 5min', '3min 2s', '35s'."""
    s = int(seconds)
    units = [("months", 30 * 86400 + 36000), ("weeks", 7 * 86400), ("days", 86400),
             ("h", 3600), ("min", 60), ("s", 1)]
    for i, (name, size) in enumerate(units):
        if s >= size or name == "s":
            first, rest = divmod(s, size)
            text = f"{first} {name}" if len(name) > 3 else f"{first}{name}"
            if i + 1 < len(units) and rest >= units[i + 1][1] and name != "s":
                second_name, second_size = units[i + 1 if name != "months" else 2]
                count = rest // second_size
                text += f" {count} {second_name}" if len(second_name) > 3 else \
                    f" {count}{second_name}"
            return text
    raise AssertionError("unreachable")


def status(unit: dict, now: float | None = None, euid: int | None = None) -> tuple[str, int]:
    now = time.time() if now is None else now
    euid = os.geteuid() if euid is None else euid
    legacy = bool(unit.get("legacy"))
    width = 10 if legacy else 12  # the labels' column, right-aligned ("Main PID:")
    branch = " " * (width + 1) + ("`-" if legacy else "└─")

    def field(label: str, value: str) -> str:
        return f"{label}:".rjust(width) + f" {value}"

    pid = _main_pid(unit["exec"])
    bullet = "*" if legacy else ("●" if pid else "○")
    lines = [f"{bullet} {unit['name']}.service - {unit['description']}",
             field("Loaded", f"loaded ({unit['unit_file']}; enabled; vendor preset: enabled)")]
    drop_ins = unit.get("drop_ins") or []
    for directory in sorted({str(Path(d).parent) for d in drop_ins}):
        lines.append(field("Drop-In", directory))
        lines += [branch + ", ".join(Path(d).name for d in drop_ins
                                     if str(Path(d).parent) == directory)]
    if pid is None:
        lines.append(field("Active", "inactive (dead)"))
        return "\n".join(lines), 3
    started = _started(pid)
    since = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(started))
    rss_kb = int((_status_field(pid, "VmRSS") or "0 kB").split()[0])
    limit = (PROC / "sys/kernel/threads-max").read_text().strip()
    comm = (PROC / str(pid) / "comm").read_text().strip()
    lines += [field("Active", f"active (running) since {since}; {timespan(now - started)} ago"),
              field("Main PID", f"{pid} ({comm})"),
              field("Tasks", f"{_status_field(pid, 'Threads')} (limit: {limit})")]
    if not legacy:
        lines.append(field("Memory", f"{rss_kb / 1024:.1f}M"))
    lines += [field("CGroup", f"/system.slice/{unit['name']}.service"),
              f"{branch}{pid} {unit['exec']}"]
    warning = unit.get("warning")
    if warning and not (unit.get("warning_for_users") and euid == 0):
        lines += ["", f"Warning: {warning}"]
    return "\n".join(lines), 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="systemctl",
                                     description="Query or control this node's services.")
    parser.add_argument("verb", choices=["status", "is-active", "start", "stop", "restart"])
    parser.add_argument("units", nargs="+", metavar="UNIT")
    args = parser.parse_args(argv)
    worst = 0
    for name in args.units:
        unit = _unit(name)
        if unit is None:
            print(f"Unit {name.removesuffix('.service')}.service could not be found.",
                  file=sys.stderr)
            worst = max(worst, 4)
            continue
        if args.verb in ("start", "stop", "restart"):
            if os.geteuid() != 0:
                print(f"Failed to {args.verb} {unit['name']}.service: Access denied",
                      file=sys.stderr)
                worst = max(worst, 4)
                continue
            action = {"start": "up", "stop": "down", "restart": "restart"}[args.verb]
            worst = max(worst, subprocess.run(["sv", "-w", "15", action,
                                               f"/etc/service/{unit['name']}"],
                                              stdout=subprocess.DEVNULL).returncode)
            continue
        text, code = status(unit)
        if args.verb == "status":
            print(text)
        else:
            print("active" if code == 0 else "inactive")
        worst = max(worst, code)
    sys.exit(worst)


if __name__ == "__main__":
    main()
