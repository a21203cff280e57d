"""Room on the machines, as the scheduler counts it (pure arithmetic): what a pod asks
of a machine, which machines take pods, what each has free, and how much a node that no
machine takes is missing on the one with the most room.
"""

from __future__ import annotations

RESOURCES = ("cpu", "memory")


def _quantity(text) -> float:
    from kubernetes.utils.quantity import parse_quantity
    return float(parse_quantity(str(text)))


def pod_requests(spec) -> dict[str, float]:
    """What a pod holds of a machine: its containers' requests, or its largest init
    container's where that asks more (as the scheduler counts)."""
    def of(containers) -> list[dict[str, float]]:
        return [{r: _quantity((c.resources and c.resources.requests or {}).get(r, 0))
                 for r in RESOURCES} for c in containers or []]
    running, init = of(spec.containers), of(spec.init_containers)
    return {r: max(sum(c[r] for c in running), max((c[r] for c in init), default=0.0))
            for r in RESOURCES}


def takes_pods(spec) -> bool:
    """A machine the scheduler may place a node's pod on (not cordoned, no taint that
    keeps pods off: the control plane's, a lost machine's)."""
    return not spec.unschedulable and not any(
        t.effect in ("NoSchedule", "NoExecute") for t in spec.taints or [])


def free_on(allocatable: dict, requests: list[dict[str, float]]) -> dict[str, float]:
    return {r: _quantity(allocatable.get(r, 0)) - sum(q[r] for q in requests)
            for r in RESOURCES}


def _cpu(cores: float) -> str:
    milli = round(cores * 1000)
    return f"{milli}m" if milli < 1000 else f"{milli / 1000:g}"


def _memory(size: float) -> str:
    gib = size / 2**30
    return f"{gib:.1f}Gi" if abs(gib) >= 1 else f"{round(size / 2**20)}Mi"


def _amounts(values: dict[str, float]) -> str:
    show = {"cpu": _cpu, "memory": _memory}
    return ", ".join(f"{r} {show[r](max(values[r], 0.0))}" for r in RESOURCES if r in values)


def shortfall(asked: dict, room: dict[str, dict[str, float]]) -> str | None:
    """How much a pod asking `asked` lacks on the machine with the most room for it (the
    one short of fewest resources, then of the least); None when one has room (then the
    scheduler's reason is another: affinity, a taint)."""
    wants = {r: _quantity(asked[r]) for r in RESOURCES if r in asked}
    if not room:
        return "no machine takes pods (each is cordoned or tainted)"

    def lacks(free: dict[str, float]) -> dict[str, float]:
        return {r: q - free[r] for r, q in wants.items() if q > free[r]}

    def rank(machine: str) -> tuple:
        missing = lacks(room[machine])
        return len(missing), sum(v / wants[r] for r, v in missing.items()), machine

    best = min(room, key=rank)
    missing = lacks(room[best])
    if not missing:
        return None
    free = {r: room[best][r] for r in wants}
    return (f"the machine with the most room, {best}, has {_amounts(free)} free: "
            f"{_amounts(missing)} missing")
