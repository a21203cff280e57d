"""A node's status as the Kubernetes provider reports it (pure): a Deployment and its
pods read as a Docker container's status, and the problems worth stopping `up` or `wait`
for (an image the cluster cannot pull, claims not bound, no machine with room).
"""

from __future__ import annotations

import re

# The problem of a node whose claims are not bound; the provider names the claim and why.
CLAIMS_UNBOUND = "its volume claims are not bound"
# The problem of a node no machine has room for; how much is missing follows, where the
# caller may read the machines.
NO_ROOM = "no machine can take it"


def node_status(deployment, pods: list) -> tuple[str, str | None]:
    """(status as a Docker container's, a problem worth stopping `up` for, or None)."""
    if not pods:
        return ("exited" if not deployment.spec.replicas else "created"), None
    running = [p for p in pods if p.status.phase == "Running"]
    pod = (running or pods)[0]
    phase = pod.status.phase
    if phase in ("Succeeded", "Failed"):
        return "exited", None
    for status in (pod.status.init_container_statuses or []) + \
            (pod.status.container_statuses or []):
        waiting = status.state and status.state.waiting
        if waiting and waiting.reason in ("ErrImagePull", "ImagePullBackOff",
                                          "InvalidImageName"):
            return "pending", (f"the cluster cannot pull {status.image}: "
                               f"{' '.join((waiting.message or waiting.reason).split())}")
        if waiting and waiting.reason == "CrashLoopBackOff":
            return "restarting", None
        terminated = status.state and status.state.terminated
        if terminated and terminated.exit_code and status.name == "files":
            return "restarting", None
    if phase == "Pending":
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False" \
                    and re.search(r"PersistentVolumeClaim|volume", condition.message or ""):
                return "pending", f"{CLAIMS_UNBOUND}: {' '.join(condition.message.split())}"
            if condition.type == "PodScheduled" and condition.status == "False" \
                    and condition.reason == "Unschedulable":
                asked = pod.spec.containers[0].resources.requests or {}
                wants = ", ".join(f"{k} {v}" for k, v in sorted(asked.items()))
                return "pending", (f"{NO_ROOM} (it asks for {wants}): "
                                   f"{' '.join((condition.message or '').split())}")
        return "pending", None
    if phase == "Running":
        node = next((s for s in pod.status.container_statuses or [] if s.name == "node"), None)
        if node is not None and node.state and node.state.running:
            return "running", None
        return "pending", None
    return (phase or "unknown").lower(), None


def claim_problem(claim, events: list) -> str:
    """One line on an unbound claim: its name, its class, the last warning about it."""
    def when(event) -> str:
        stamp = event.last_timestamp or event.event_time or event.metadata.creation_timestamp
        return stamp.isoformat() if stamp else ""

    warnings = sorted((e for e in events if e.type == "Warning" and e.message), key=when)
    why = f" ({' '.join(warnings[-1].message.split())})" if warnings else ""
    storage_class = claim.spec.storage_class_name or "the cluster's default"
    return (f"its volume claim {claim.metadata.name} of storage class {storage_class} is "
            f"not bound{why}: the provider needs a class that makes ReadWriteMany volumes "
            "(--storage-class)")


def restarted(pod, container: str) -> bool:
    statuses = (pod.status.container_statuses or []) + (pod.status.init_container_statuses or [])
    return any(s.name == container and s.restart_count and s.state and s.state.waiting
               for s in statuses)
