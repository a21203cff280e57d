"""Processes on a node, told apart from a later process that reused their PID."""

from __future__ import annotations

from pathlib import Path


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time), None when the process is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # exited, not yet reaped by its parent
        return None
    return int(fields[19])


def process_alive(pid: int, start_ticks: int) -> bool:
    return process_start_ticks(pid) == start_ticks


def process_command(pid: int) -> str:
    """A process's command line as one string ("?" when the process is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
