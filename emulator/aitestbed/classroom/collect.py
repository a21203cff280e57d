"""The instructor's page's reading of the cluster: where to read (Layout), one root
command per node and cycle through the checks' Probe (docker exec; never as a learner,
never once per learner), its answer split into sections and parsed into a Raw.

  Layout, layout_of  the nodes by what the page reads on them
  node_command       one node's sections as one shell command (each ends with its exit code)
  split_sections     that command's output: section -> (exit code, text)
  collect            read every node once (in parallel) -> Raw; a node that does not answer
                     is an error line of the Raw, never an exception
  stamp              when each accepted login was first seen (sshd's log has no times)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aitestbed.classroom.parse import (
    SQUEUE,
    SlurmNode,
    parse_logins,
    parse_nodes,
    parse_sessions,
    parse_squeue,
)
from aitestbed.exercises import checks
from aitestbed.exercises.checks import Nodes, SlurmJob
from aitestbed.exercises.probe import Probe
from aitestbed.groq import pbs_hooks
from aitestbed.host.inventory import Topology

PARALLEL = 4  # nodes read at once (docker exec; the engine serves them concurrently)

# One command per node and cycle, in sections; each section ends with its exit code.
_MARK = "@@aitestbed:"
SECTIONS = {
    "clock": "date +%s",
    "sshd": f"grep -a '^Accepted ' {checks.SSHD_LOG} 2>/dev/null || true",
    "ps": "ps -eo etimes=,args=",
    "jobcomp": f"cat {checks.JOBCOMP_LOG} 2>/dev/null || true",
    "squeue": SQUEUE,
    "nodes": "scontrol show node -o",
    "snd": f"cat {checks.SND_JOURNAL} 2>/dev/null || true",
    "wsjobs": checks.WSJOBS_COMMAND,
    # Only the users' wsjob listings are audited (the policy), so the log stays small.
    "audit": f"grep -ahF '\"wsjobs\"' {checks.KUBE_AUDIT_LOGS} 2>/dev/null || true",
    "qstat": f"{pbs_hooks.QSTAT} -f -F json",  # the GroqRack's PBS jobs (queued, running)
}


@dataclass(frozen=True)
class Layout:
    """The cluster's nodes by what the page reads on them."""

    nodes: Nodes  # the exercises' roles (login, hop, controllers, management, mfa)
    systems: tuple[str, ...]
    journals: tuple[str, ...] = ()  # nodes with snd (its journal says which RDUs a job held)
    wafers: tuple[str, ...] = ()  # the Cerebras systems (CS-2, CS-3), as wsjobs name them
    pbs: tuple[str, ...] = ()  # the GroqRack's PBS server
    groq_nodes: tuple[str, ...] = ()  # its GroqNodes (CARDS_PER_NODE cards each)

    @property
    def login_nodes(self) -> list[str]:
        return [n for names in self.nodes.login.values() for n in names]

    def reads(self) -> dict[str, tuple[str, ...]]:
        """node -> the sections read there (one command per node)."""
        plan: dict[str, list[str]] = {}

        def add(node: str, *sections: str) -> None:
            wanted = plan.setdefault(node, ["clock"])
            wanted += [s for s in sections if s not in wanted]

        for node in self.login_nodes:
            add(node, "sshd", "ps")
        for node in self.nodes.hop.get("graphcore", []):  # graphcore-login's second step
            add(node, "sshd")
        for names in self.nodes.controllers.values():
            for node in names:
                add(node, "jobcomp", "squeue", "nodes")
        for node in self.journals:
            add(node, "snd")
        for node in self.nodes.management[:1]:
            add(node, "wsjobs", "audit")
        for node in self.pbs[:1]:
            add(node, "qstat")
        return {node: tuple(sections) for node, sections in plan.items()}


def layout_of(topology: Topology, nodes: Nodes) -> Layout:
    return Layout(
        nodes=nodes, systems=tuple(topology.systems),
        journals=tuple(n.name for n in topology.nodes if "snd" in n.services),
        wafers=tuple(n.name for n in topology.nodes if n.node_class == "cs2"),
        pbs=tuple(n.name for n in topology.nodes if n.node_class == "pbs_server"),
        groq_nodes=tuple(n.name for n in topology.nodes if n.node_class == "groq_node"))


def node_command(sections: Iterable[str]) -> str:
    # The end mark starts a line of its own even after output without a final newline.
    return "; ".join(f"echo '{_MARK}{name}'; {SECTIONS[name]}; printf '\\n{_MARK}rc %s\\n' \"$?\""
                     for name in sections)


def split_sections(out: str) -> dict[str, tuple[int, str]]:
    """A node command's output: section -> (exit code, text)."""
    found: dict[str, tuple[int, str]] = {}
    name, lines = None, []
    for line in out.splitlines():
        if line.startswith(_MARK):
            tag = line[len(_MARK):]
            if tag.startswith("rc ") and name is not None:
                try:
                    rc = int(tag[3:])
                except ValueError:
                    rc = 1
                found[name] = (rc, "\n".join(lines))
                name, lines = None, []
            else:
                name, lines = tag, []
        elif name is not None:
            lines.append(line)
    if name is not None:  # cut short (the node went away mid-command)
        found[name] = (1, "\n".join(lines))
    return found


@dataclass
class Raw:
    """One cycle's reading of the cluster, as read (nothing decided yet)."""

    cluster: str
    layout: Layout
    taken: float  # when the cycle started (epoch seconds)
    since: float = 0.0  # the watcher's first cycle: logins seen then are "before" it
    logins: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # node -> (method, user)
    login_seen: dict[str, list[float | None]] = field(default_factory=dict)  # the Watcher's
    sessions: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # (user, since)
    finished: dict[str, list[SlurmJob]] = field(default_factory=dict)  # system -> jobcomp
    queue: dict[str, list[SlurmJob]] = field(default_factory=dict)  # system -> squeue
    slurm_nodes: dict[str, list[SlurmNode]] = field(default_factory=dict)  # system -> nodes
    journals: dict[str, list[dict]] = field(default_factory=dict)  # node -> snd's entries
    wsjobs: list[dict] | None = None  # None: not read
    listings: list[dict] = field(default_factory=list)  # audit events of wsjob listings
    pbs_jobs: dict[str, dict] | None = None  # PBS job id -> its attributes; None: not read
    errors: list[str] = field(default_factory=list)


def collect(cluster: str, layout: Layout, probe: Probe,
            clock: Callable[[], float] = time.time) -> Raw:
    """Read the cluster once: one root command per node (in parallel); a node that does
    not answer becomes an error line of the Raw, never an exception."""
    raw = Raw(cluster=cluster, layout=layout, taken=clock())
    raw.since = raw.taken
    reads = layout.reads()

    def read(node: str) -> tuple[str, dict[str, tuple[int, str]] | None, str]:
        try:
            rc, out = probe.run(node, node_command(reads[node]))
        except Exception as err:  # noqa: BLE001 - a node down is shown, not raised
            return node, None, str(err).splitlines()[0] if str(err) else type(err).__name__
        first = next((line for line in out.splitlines() if line.strip()), "")
        return node, split_sections(out), (f"exit {rc}" if rc else "") + (
            f": {first[:200]}" if rc and first else "")

    with ThreadPoolExecutor(min(PARALLEL, max(1, len(reads)))) as pool:
        results = list(pool.map(read, reads))
    system_of = {n: s for s, names in layout.nodes.controllers.items() for n in names}
    for node, sections, problem in results:
        if sections is None:
            raw.errors.append(f"{node}: not read ({problem})")
            continue
        if not sections:
            raw.errors.append(f"{node}: no answer ({problem or 'nothing printed'})")
            continue
        _absorb(raw, node, reads[node], sections, system_of.get(node, ""))
    return raw


def _absorb(raw: Raw, node: str, asked: tuple[str, ...], sections: dict[str, tuple[int, str]],
            system: str) -> None:
    """What one node answered, into the Raw; a section missing or failed is an error line."""
    def text(name: str) -> str | None:
        if name not in sections:
            raw.errors.append(f"{node}: no answer for {name}")
            return None
        rc, out = sections[name]
        if rc != 0:
            first = next((line for line in out.splitlines() if line.strip()), "")
            raw.errors.append(f"{node}: {name} failed (exit {rc}){': ' + first if first else ''}")
            return None
        return out

    wanted = set(asked)
    clock = raw.taken
    if "clock" in wanted and (out := text("clock")) is not None:
        try:
            clock = float(out.strip())
        except ValueError:
            pass
    if "sshd" in wanted and (out := text("sshd")) is not None:
        raw.logins[node] = parse_logins(out)
    if "ps" in wanted and (out := text("ps")) is not None:
        raw.sessions[node] = parse_sessions(out, clock)
    if "jobcomp" in wanted and (out := text("jobcomp")) is not None:
        raw.finished.setdefault(system, []).extend(
            SlurmJob({**j.fields, "System": system}) for j in checks.parse_jobcomp(out))
    if "squeue" in wanted and (out := text("squeue")) is not None:
        raw.queue.setdefault(system, []).extend(parse_squeue(out, system))
    if "nodes" in wanted and (out := text("nodes")) is not None:
        raw.slurm_nodes.setdefault(system, []).extend(parse_nodes(out))
    if "snd" in wanted and (out := text("snd")) is not None:
        raw.journals[node] = checks.parse_json_lines(out)
    if "wsjobs" in wanted and (out := text("wsjobs")) is not None:
        try:
            items = json.loads(out).get("items") or []
            raw.wsjobs = [j for j in items if isinstance(j, dict) and isinstance(
                j.get("metadata"), dict) and isinstance(j.get("spec"), dict)]
        except (ValueError, AttributeError, TypeError):
            raw.errors.append(f"{node}: wsjobs: kubectl's answer is not JSON")
    if "audit" in wanted and (out := text("audit")) is not None:
        raw.listings = checks.parse_json_lines(out)
    if "qstat" in wanted and (out := text("qstat")) is not None:
        try:
            jobs = json.loads(out.strip() or "{}").get("Jobs") or {}
            raw.pbs_jobs = {str(k): v for k, v in jobs.items() if isinstance(v, dict)}
        except (ValueError, AttributeError, TypeError):
            raw.errors.append(f"{node}: qstat: its answer is not JSON")


def stamp(previous: dict[str, list[float | None]], logins: dict[str, list[tuple[str, str]]],
          now: float, first: bool) -> dict[str, list[float | None]]:
    """When each accepted login was first seen: kept from the previous cycle, `now` for
    new lines, None (unknown: before the page) for lines of the first cycle. A node whose
    log got shorter was recreated since the last cycle: all its lines are new."""
    seen = {}
    for node, lines in logins.items():
        before = previous.get(node, [])
        if first:
            seen[node] = [None] * len(lines)
        elif len(lines) >= len(before):
            seen[node] = before + [now] * (len(lines) - len(before))
        else:
            seen[node] = [now] * len(lines)
    for node, stamps in previous.items():  # a node not read this cycle keeps its stamps
        seen.setdefault(node, stamps)
    return seen
