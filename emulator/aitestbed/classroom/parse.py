"""The instructor's page's parsers: the text one cycle reads on the nodes, as records
(pure; Slurm's own text through node/slurm_text, the one reader of it).

  parse_logins    sshd's log: the accepted logins (method, user)
  parse_sessions  `ps`: the live sessions (user, since when)
  parse_squeue    squeue's rows (SQUEUE prints them) as the checks' SlurmJob records
  parse_nodes     `scontrol show node -o`: each node's state, its GRES and what is in use
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aitestbed.exercises.checks import SlurmJob
from aitestbed.node.slurm_text import key_values, parse_gres, parse_table

US = "\x1f"  # squeue's field separator: no job name or path holds it
SQUEUE = ("squeue -h -a -o '" + US.join(
    ("%i", "%u", "%U", "%T", "%r", "%P", "%b", "%N", "%j", "%Z")) + "'")
SQUEUE_FIELDS = ("JobId", "UserName", "Uid", "JobState", "Reason", "Partition", "TresPerNode",
                 "NodeList", "Name", "WorkDir")
_ACCEPTED = re.compile(r"^Accepted (\S+) for (\S+) from ")
_SESSION = re.compile(r"^\s*(\d+)\s+sshd: ([^\s@]+) \[priv\]\s*$")


@dataclass
class SlurmNode:
    name: str
    state: str
    total: dict[str, int]  # gres -> count (ipu: 16)
    used: dict[str, int]

    @property
    def down(self) -> bool:
        return any(s in self.state for s in ("DOWN", "DRAIN", "FAIL", "*"))

    @property
    def busy(self) -> bool:
        return any(self.used.values()) or self.state.startswith(("ALLOC", "MIXED"))


def parse_logins(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_ACCEPTED.match, text.splitlines()) if m]


def parse_sessions(text: str, clock: float) -> list[tuple[str, float]]:
    """(user, start) of each logged-in session (sshd's `sshd: USER [priv]` process)."""
    return [(m.group(2), clock - int(m.group(1)))
            for m in map(_SESSION.match, text.splitlines()) if m]


def parse_squeue(text: str, system: str) -> list[SlurmJob]:
    """squeue's lines as SlurmJob records (UserId as jobcomp writes it), so the checks'
    selections apply to queued jobs too."""
    return [SlurmJob({**row, "UserId": f"{row['UserName']}({row['Uid']})", "System": system})
            for row in parse_table(text, SQUEUE_FIELDS, US)]


def parse_nodes(text: str) -> list[SlurmNode]:
    nodes = []
    for line in text.splitlines():
        fields = key_values(line)
        if "NodeName" not in fields:
            continue
        total = parse_gres(fields.get("Gres", ""))
        used = parse_gres(fields.get("AllocTRES", ""))
        nodes.append(SlurmNode(fields["NodeName"], fields.get("State", "UNKNOWN"), total, used))
    return nodes
