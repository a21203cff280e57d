"""Slurm's text, read: the one parser of what Slurm's commands print (stdlib only: it runs
in the containers, in the hooks and in the pyslurm facade as well as on the host).

  parse_gres     generic resources in every form the commands print, as counts
  key_values     the `Key=Value` record of `scontrol -o show job|node|partition` and of
                 the job completion log (jobcomp/filetxt)
  job_nodes      the per-node entries of `scontrol -d -o show job` (Nodes=... GRES=...)
  parse_table    the delimited rows of `squeue -h -o` and `sacct -n -P --format`

GRES forms (slurm.conf's `Gres=`, squeue's `%b`, sinfo's `%G`, scontrol's `Gres=`,
`GresUsed=`, `TresPerNode=`, `AllocTRES=`, `GRES=` and pyslurm's JSON fields), a comma
list of items, each one of
  name[:type][:no_consume][:count]  `ipu:16`, `gpu:tesla:2`, `gpu` (count 1, as slurm.conf)
  ... followed by (S:sockets)       `rdu:8(S:0-1)`: the sockets are not a count
  ... followed by (IDX:indexes)     `gpu:2(IDX:0-1)`; `gpu(IDX:0,2)` counts its indexes
  ... followed by (CNT:count)       `ipu(CNT:4)`: a count-only resource's count
  gres:... and gres/...             `gres:ipu:4` (squeue %b up to 22.05), `gres/ipu:4`
  gres/name[:type]=count            a TRES string: `cpu=1,mem=1G,gres/ipu=4`; items that
                                    are not gres/ (cpu, mem, node, billing) are skipped
  (null), N/A, empty                nothing
A count may end in K, M, G, T or P (times 1024 each, as Slurm reads them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SUFFIX = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$")
_DETAIL = re.compile(r"^(IDX|CNT):(.*)$")
_NOTHING = ("", "(null)", "N/A", "none", "None")
# A key starts with a word character and may hold `:` and `/` (`Socks/Node=*`,
# `S:C:T=*:*:*`); its value runs to the next ` Key=` (values may hold spaces).
_KEY_VALUE = re.compile(r"(\w[\w:/]*)=(.*?)(?=\s+\w[\w:/]*=|$)")
_NODE_ENTRY = re.compile(r"\bNodes=(\S+) CPU_IDs=\S+ Mem=\S+(?: GRES=(\S*))?")


@dataclass(frozen=True)
class Gres:
    """One item of a GRES list."""

    name: str  # ipu, rdu, gpu
    type: str  # "" when untyped (tesla in gpu:tesla:2)
    count: int

    @property
    def key(self) -> str:
        """name, or name:type for a typed item (pyslurm's keys)."""
        return f"{self.name}:{self.type}" if self.type else self.name


def _count(text: str) -> int | None:
    found = _COUNT.match(text)
    return int(found.group(1)) * _SUFFIX.get(found.group(2), 1) if found else None


def _indexes(text: str) -> int:
    """How many devices `0-1,3` names (N/A: none)."""
    total = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (high.isdigit() or not high):
            total += int(high or low) - int(low) + 1
    return total


def _split(text: str) -> list[str]:
    """Comma-separated items; commas inside parentheses (IDX:0,2) stay in their item."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _item(text: str) -> Gres | None:
    body, _, detail = text.partition("(")
    detail = detail.rstrip(")")
    if body.startswith("gres/"):
        body = body[len("gres/"):]
    elif "=" in body:
        return None  # another TRES (cpu=1, mem=1G, node=1, billing=1, license/x=1)
    elif body.startswith("gres:"):
        body = body[len("gres:"):]
    body, equals, tres_count = body.partition("=")
    parts = [p for p in body.split(":") if p and p != "no_consume"]
    if not parts or body in _NOTHING:
        return None
    name, rest = parts[0], parts[1:]
    count = _count(tres_count) if equals else None
    if count is None and not equals and rest and (last := _count(rest[-1])) is not None:
        count, rest = last, rest[:-1]
    found = _DETAIL.match(detail)
    if found and found.group(1) == "CNT" and _count(found.group(2)) is not None:
        count = _count(found.group(2))  # a count-only resource: CNT is what it holds
    elif found and found.group(1) == "IDX" and count is None:
        count = _indexes(found.group(2))
    return Gres(name, ":".join(rest), 1 if count is None else count)


def gres_items(text: str | None) -> list[Gres]:
    """Every GRES item of a list, in its order (see the module's docstring for the forms)."""
    if not text or text.strip() in _NOTHING:
        return []
    return [gres for item in _split(text.strip()) if (gres := _item(item)) is not None]


def parse_gres(text: str | None, typed: bool = False) -> dict[str, int]:
    """A GRES list as counts: name -> count (`gpu:tesla:1,gpu:k80:2` -> gpu 3; a TRES
    string's untyped `gres/gpu=3` is the total of its typed `gres/gpu:a=1,...` beside it),
    or with `typed`, name[:type] -> count (pyslurm's keys). Zero counts are kept."""
    counts: dict[str, int] = {}
    if typed:
        for gres in gres_items(text):
            counts[gres.key] = counts.get(gres.key, 0) + gres.count
        return counts
    untyped: dict[str, int] = {}
    for gres in gres_items(text):
        into = untyped if not gres.type else counts
        into[gres.name] = into.get(gres.name, 0) + gres.count
    return {**counts, **untyped}


def key_values(line: str) -> dict[str, str]:
    """One `Key=Value Key2=Value two` record (scontrol -o, jobcomp/filetxt) as a dict; a
    value runs to the next ` Key=`, so it may hold spaces; a repeated key keeps its last."""
    return {m.group(1): m.group(2) for m in _KEY_VALUE.finditer(line.strip())}


def job_nodes(detail: str) -> list[tuple[str, str]]:
    """(hostlist, GRES text) of each node entry of `scontrol -d -o show job` (the entries
    repeat `Nodes=`, which a dict would lose); a node without GRES has ""."""
    return _NODE_ENTRY.findall(detail)


def parse_table(text: str, fields: tuple[str, ...], separator: str) -> list[dict[str, str]]:
    """The rows of `squeue -h -o` or `sacct -n -P --format` (fields joined by separator)
    as dicts; a line with another number of fields is skipped."""
    rows = []
    for line in text.splitlines():
        values = line.split(separator)
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values, strict=True)))
    return rows
