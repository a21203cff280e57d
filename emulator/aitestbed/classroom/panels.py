"""The instructor's page's panel per system, pure: a Slurm system's nodes and queue, the
GroqRack's cards from PBS's jobs, the Cerebras systems from the wsjobs."""

from __future__ import annotations

from aitestbed.cerebras import wsjob as wsjobs_
from aitestbed.classroom.collect import Raw
from aitestbed.classroom.judge import PBS_QUEUED, PBS_RUNNING, QUEUED_STATES, WSJOB_ACTIVE
from aitestbed.classroom.page import NodeUse, Panel, WsjobLine
from aitestbed.exercises import checks
from aitestbed.groq import pbs_hooks
from aitestbed.groq.card import CARDS_PER_NODE

UNITS = {"ipu": "IPU", "rdu": "RDU"}


def panels(raw: Raw) -> list[Panel]:
    """A panel per system of the layout, in its order."""
    found = []
    for system in raw.layout.systems:
        if system == "cerebras":
            found.append(_cerebras_panel(raw))
            continue
        if system == "groq":
            found.append(_groq_panel(raw))
            continue
        if system not in raw.layout.nodes.controllers:
            found.append(Panel(system, "", [], 0, 0, 0, 0, 0,
                               notes=["not shown on this page (no scheduler read)"]))
            continue
        nodes = raw.slurm_nodes.get(system, [])
        gres = next((g for n in nodes for g in n.total), "")
        queue = raw.queue.get(system, [])
        queued = sum(1 for j in queue if j.state in QUEUED_STATES)
        down = [n.name for n in nodes if n.down]
        found.append(Panel(
            system=system, unit=UNITS.get(gres, gres.upper()),
            nodes=[NodeUse(n.name, n.state, n.used.get(gres, 0), n.total.get(gres, 0))
                   for n in nodes],
            nodes_in_use=sum(1 for n in nodes if n.busy),
            accelerators_in_use=sum(n.used.get(gres, 0) for n in nodes),
            accelerators=sum(n.total.get(gres, 0) for n in nodes),
            running=len(queue) - queued, queued=queued,
            notes=[f"down or drained: {', '.join(down)}"] if down else []))
    return found


def _groq_panel(raw: Raw) -> Panel:
    jobs = list((raw.pbs_jobs or {}).values())
    running = [j for j in jobs if j.get("job_state") in PBS_RUNNING]
    queued = sum(1 for j in jobs if j.get("job_state") in PBS_QUEUED)
    nodes = []
    for name in raw.layout.groq_nodes:
        used = sum(pbs_hooks.cards_on_node(
            str(j.get("exec_vnode") or ""), str((j.get("Resource_List") or {}).get("place", "")),
            name) for j in running)
        nodes.append(NodeUse(name, "IN USE" if used else "FREE", min(used, CARDS_PER_NODE),
                             CARDS_PER_NODE))
    return Panel(
        system="groq", unit="GroqCard", nodes=nodes,
        nodes_in_use=sum(1 for n in nodes if n.used), accelerators_in_use=sum(
            n.used for n in nodes), accelerators=CARDS_PER_NODE * len(nodes),
        running=len(running), queued=queued,
        notes=[] if raw.pbs_jobs is not None or not raw.layout.pbs else [
            "PBS's jobs were not read"])


def _cerebras_panel(raw: Raw) -> Panel:
    wafers = list(raw.layout.wafers)
    unit = "CS-3" if any("cs3" in w for w in wafers) else "CS-2"
    jobs = raw.wsjobs or []
    active = [j for j in jobs if checks.phase(j) in WSJOB_ACTIVE]
    held = {s: j for j in active for s in (j.get("status") or {}).get("systems") or []}
    queued = [j for j in jobs if checks.phase(j) == wsjobs_.QUEUEING]
    shown = sorted(active + queued, key=lambda j: str(j["metadata"].get("creationTimestamp")))
    notes = [] if raw.wsjobs is not None else ["the wsjobs were not read"]
    return Panel(
        system="cerebras", unit=unit,
        nodes=[NodeUse(w, "IN USE" if w in held else "FREE", int(w in held), 1) for w in wafers],
        nodes_in_use=sum(1 for w in wafers if w in held), accelerators_in_use=len(held),
        accelerators=len(wafers), running=len(active), queued=len(queued),
        wsjobs=[WsjobLine(
            name=str(j["metadata"].get("name", "")),
            user=str((j["spec"].get("user") or {}).get("username", "")),
            job_type=str(j["spec"].get("jobType", "")), phase=checks.phase(j),
            systems=list((j.get("status") or {}).get("systems") or []),
            message=str((j.get("status") or {}).get("message") or "")) for j in shown],
        notes=notes)
