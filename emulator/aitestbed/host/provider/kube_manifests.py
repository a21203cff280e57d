"""The Kubernetes objects a cluster's nodes are made of (pure: bodies as the API takes
them): the headless Services that give nodes and aliases their names, the login nodes'
NodePorts, the NetworkPolicies, a volume's claim, a files Secret, and a node's
Deployment with its init container (module docstring of kubernetes.py says why each).
"""

from __future__ import annotations

import re
import shlex

from aitestbed.host.inventory import Node
from aitestbed.host.naming import LABEL_CLASS, LABEL_CLUSTER, LABEL_NODE, LABEL_SYSTEM
from aitestbed.host.provider.kube_files import FILES_KEY
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

SERVICE = "nodes"  # the headless Service: <node>.nodes.<namespace>.svc.<domain>
STOP_GRACE = 15  # seconds, as the Docker provider's stop timeout
# How long a node's pod stays on a machine that stopped answering before it is made
# again elsewhere (Kubernetes' default is 300 s).
LOST_MACHINE_SECONDS = 10
SIDE = "/.aitestbed"  # where the init container sees the volumes it fills
# CPU and memory each node class asks for (the scheduler spreads nodes by them), unless the
# inventory gives the host `kubernetes_resources: {cpu: ..., memory: ...}`.
REQUESTS = {
    "login": {"cpu": "100m", "memory": "256Mi"},
    "slurmctld": {"cpu": "100m", "memory": "512Mi"},
}
COMPUTE_REQUESTS = {"cpu": "250m", "memory": "512Mi"}
LOGIN_LABEL = "aitestbed.login"


def object_name(text: str) -> str:
    """A Docker volume name (`ci-1-gc-slurmctld-var-spool-slurmctld`) as a Kubernetes name."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-")


def alias_label(alias: str) -> str:
    return f"alias.aitestbed/{alias}"


def volume_slug(path: str) -> str:
    return object_name(path.strip("/").replace("/", "-"))


def requests_for(node: Node, hostvars: dict) -> dict:
    own = (hostvars or {}).get("kubernetes_resources")
    if own:
        return {k: str(v) for k, v in own.items()}
    return dict(REQUESTS.get(node.node_class, COMPUTE_REQUESTS))


def init_script(volumes: list[tuple[str, str]]) -> str:
    """The init container's: unpack the host's files, and give each empty volume what the
    image has at its path (content, owner and mode), as Docker does for a new volume."""
    lines = [
        "set -eu",
        f"tar -xzf {SIDE}/host/node/{FILES_KEY} -C {SIDE}/node",
        f"tar -xzf {SIDE}/host/cluster/{FILES_KEY} -C {SIDE}/cluster",
        f"chmod 0700 {SIDE}/node && chmod 0711 {SIDE}/cluster",
        f"chmod 0755 {SIDE}/run && chmod 1777 {SIDE}/shm",
        'fill() { if [ -d "$1" ] && [ -z "$(ls -A "$2")" ]; then cp -a "$1/." "$2/"; '
        'chown --reference="$1" "$2"; chmod --reference="$1" "$2"; fi; }',
    ]
    lines += [f"fill {shlex.quote(path)} {SIDE}/volumes/{slug}" for path, slug in volumes]
    return "\n".join(lines) + "\n"


def headless_service(name: str, labels: dict, selector: dict) -> dict:
    """A Service with no address of its own: `name` resolves to the ready pods selected."""
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"clusterIP": "None", "selector": selector,
                     "ports": [{"name": "ssh", "port": 22}]}}


def nodes_service(cluster: str) -> dict:
    # Only ready pods' names: a pod left Terminating on a lost machine has the same
    # hostname as its replacement, and slurmctld would reach for the dead address.
    labels = {LABEL_CLUSTER: cluster}
    return headless_service(SERVICE, labels, labels)


def alias_service(cluster: str, alias: str) -> dict:
    """A short alias (`vipu`, a round-robin login name): a headless Service of its own over
    the pods that carry it; it resolves through the namespace's search domain."""
    return headless_service(alias, {LABEL_CLUSTER: cluster},
                            {LABEL_CLUSTER: cluster, alias_label(alias): "true"})


def login_service(cluster: str, node: str) -> dict:
    """A login node's ssh as a NodePort."""
    return {"metadata": {"name": f"{node}-ssh", "labels": {LABEL_CLUSTER: cluster}},
            "spec": {"type": "NodePort",
                     "selector": {LABEL_CLUSTER: cluster, LABEL_NODE: node},
                     "ports": [{"name": "ssh", "port": 22, "targetPort": 22}]}}


def network_policies(cluster: str) -> list[dict]:
    """The cluster's nodes reach each other; from outside only the login nodes' ssh."""
    labels = {LABEL_CLUSTER: cluster}
    login = {LABEL_CLUSTER: cluster, LOGIN_LABEL: "true"}
    return [
        {"metadata": {"name": f"{cluster}-nodes", "labels": labels},
         "spec": {"podSelector": {"matchLabels": labels},
                  "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}]}]}},
        {"metadata": {"name": f"{cluster}-ssh", "labels": labels},
         "spec": {"podSelector": {"matchLabels": login},
                  "policyTypes": ["Ingress"],
                  "ingress": [{"ports": [{"port": 22, "protocol": "TCP"}]}]}},
    ]


def volume_claim(cluster: str, volume: str, mount: str, storage_class: str | None) -> dict:
    spec = {"accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": object_name(volume),
                         "labels": {LABEL_CLUSTER: cluster,
                                    "aitestbed.mount": volume_slug(mount)}},
            "spec": spec}


def files_secret(cluster: str, name: str, encoded: str) -> dict:
    return {"metadata": {"name": name, "labels": {LABEL_CLUSTER: cluster}},
            "type": "Opaque", "data": {FILES_KEY: encoded}}


def cluster_files(cluster: str) -> str:
    """The Secret holding the state directory's files of the cluster (`common`)."""
    return f"{cluster}-cluster-files"


def node_files(cluster: str, node: str) -> str:
    """The Secret holding the state directory's files of one node (`nodes/<node>`)."""
    return f"{cluster}-{node}-files"


def node_deployment(cluster: str, namespace: str, node: Node, image: str,
                    claims: list[tuple[str, str]], hostvars: dict) -> dict:
    """The node as a one-replica Deployment (made at zero replicas): its pod's name and
    search path, its init container that unpacks the files and fills new volumes, and
    `claims` [(path, claim name)] mounted at their paths."""
    labels = {LABEL_CLUSTER: cluster, LABEL_NODE: node.name,
              LABEL_CLASS: node.node_class, LABEL_SYSTEM: node.system}
    if node.ssh_publish:
        labels[LOGIN_LABEL] = "true"
    labels.update({alias_label(a): "true" for a in node.dns_aliases if "." not in a})
    volumes = [
        {"name": "run", "emptyDir": {"medium": "Memory"}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        {"name": "node-files", "emptyDir": {"medium": "Memory"}},
        {"name": "cluster-files", "emptyDir": {"medium": "Memory"}},
        {"name": "host-node", "secret": {"secretName": node_files(cluster, node.name),
                                         "defaultMode": 0o400}},
        {"name": "host-cluster", "secret": {"secretName": cluster_files(cluster),
                                            "defaultMode": 0o400}},
    ]
    mounts = [{"name": "run", "mountPath": "/run"},
              {"name": "shm", "mountPath": "/dev/shm"},
              {"name": "node-files", "mountPath": str(NODE_DIR)},
              {"name": "cluster-files", "mountPath": str(CLUSTER_DIR)}]
    init_mounts = [{"name": "run", "mountPath": f"{SIDE}/run"},
                   {"name": "shm", "mountPath": f"{SIDE}/shm"},
                   {"name": "node-files", "mountPath": f"{SIDE}/node"},
                   {"name": "cluster-files", "mountPath": f"{SIDE}/cluster"},
                   {"name": "host-node", "mountPath": f"{SIDE}/host/node", "readOnly": True},
                   {"name": "host-cluster", "mountPath": f"{SIDE}/host/cluster",
                    "readOnly": True}]
    filled = []
    for index, (path, claim) in enumerate(claims):
        slug = f"v{index}"
        volumes.append({"name": slug, "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": slug, "mountPath": path})
        init_mounts.append({"name": slug, "mountPath": f"{SIDE}/volumes/{slug}"})
        filled.append((path, slug))
    security = {"privileged": False, "allowPrivilegeEscalation": True,
                "seccompProfile": {"type": "RuntimeDefault"}}
    resources = {"requests": requests_for(node, hostvars)}
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "hostname": node.name,
            "subdomain": SERVICE,
            "dnsConfig": {
                "searches": [f"{SERVICE}.{namespace}.svc.cluster.local"],
                "options": [{"name": "timeout", "value": "1"},
                            {"name": "attempts", "value": "1"}]},
            "enableServiceLinks": False,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": STOP_GRACE,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [
                {"key": key, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": LOST_MACHINE_SECONDS}
                for key in ("node.kubernetes.io/unreachable",
                            "node.kubernetes.io/not-ready")],
            "initContainers": [{
                "name": "files", "image": image,
                "command": ["/bin/sh", "-c", init_script(filled)],
                "volumeMounts": init_mounts, "securityContext": security,
                "resources": resources}],
            "containers": [{
                "name": "node", "image": image, "volumeMounts": mounts,
                "securityContext": security, "resources": resources}],
            "volumes": volumes,
        },
    }
    return {"metadata": {"name": node.name, "labels": labels},
            "spec": {"replicas": 0, "strategy": {"type": "Recreate"},
                     "selector": {"matchLabels": {LABEL_CLUSTER: cluster,
                                                  LABEL_NODE: node.name}},
                     "template": pod}}
