"""Messages as GroqFlow prints them: a coloured prefix, indented continuation lines."""

from __future__ import annotations

import re
import sys

WHALE = ("\n▄██████████████▄▐█▄▄▄▄█▌\n"
         "██████▌▄▌▄▐▐▌███▌▀▀██▀▀\n"
         "████▄█▌▄▌▄▐▐▌▀███▄▄█▌\n"
         "▄▄▄▄▄██████████████\n")

_COLOURS = {"red": "\033[91m", "green": "\033[92m", "yellow": "\033[93m", "bold": "\033[1m",
            "end": "\033[0m"}


def _tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def colour(text: str, name: str, stream=None) -> str:
    stream = stream or sys.stdout
    return f"{_COLOURS[name]}{text}{_COLOURS['end']}" if _tty(stream) else text


def _bold(msg: str, stream) -> str:
    return re.sub(r"\*\*(.+?)\*\*", lambda m: colour(m.group(1), "bold", stream), msg,
                  flags=re.S)


def clean_print(prefix: str, msg: str, colour_name: str, stream=None) -> None:
    stream = stream or sys.stdout
    indent = " " * (len(prefix) + 1)
    lines = _bold(str(msg), stream).split("\n")
    text = "\n".join([lines[0], *[indent + ln for ln in lines[1:]]])
    print(f"{colour(prefix, colour_name, stream)} {text}", file=stream, flush=True)


def log_error(msg: str) -> None:
    clean_print("Error:", msg, "red", sys.stderr)
    print(WHALE, file=sys.stderr, flush=True)


def log_success(msg: str) -> None:
    clean_print("Woohoo!", msg, "green")


def log_warning(msg: str) -> None:
    clean_print("Warning:", msg, "yellow")


def log_info(msg: str) -> None:
    clean_print("Info:", msg, "bold")
