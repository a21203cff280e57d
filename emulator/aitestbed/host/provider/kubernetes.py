"""The Kubernetes provider: each node a pod on a conformant cluster (docs/kubernetes.md).

- a node is a one-replica Deployment named after it (a StatefulSet's controller sets the
  pod's hostname to `<name>-0`): the pod's `hostname` is the guide's name, its
  `subdomain` the headless Service `nodes` (ready pods only), whose domain is in every
  pod's search path, so short names resolve on every node as under Docker. When a pod
  or its machine is lost, the Deployment makes it again (elsewhere) with the same name
  and volumes;
- `down` scales the Deployments to zero (volumes kept), `up` back to one;
- the shared file systems and each node's own volumes are PersistentVolumeClaims of the
  storage class the user names (ReadWriteMany: a node may come back on another machine).
  A new volume gets the image's content at its path, as a new Docker volume does;
- the state directory's files for a node (`nodes/<node>`) and the cluster's (`common`)
  are Secrets (they hold host keys, the munge key, passcode seeds): an init container
  unpacks them into memory-backed volumes at the paths the Docker provider binds, and
  `sync_files` brings running nodes up to date when the state directory changes;
- login nodes' ssh is a NodePort Service; once they started, `after_start` records
  where it is reached (`ssh_endpoints`);
- nothing privileged: no host path, no host network, RuntimeDefault seccomp, the
  runtime's default capabilities (Docker's); only namespaced objects (the Role in
  docs/kubernetes.md); a NetworkPolicy lets only the login nodes' ssh in from outside;
- commands run through the API's exec; terminals and Ansible through kubectl.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from aitestbed.host import storage
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.naming import LABEL_CLUSTER, LABEL_NODE, node_volume_name, volume_name
from aitestbed.host.provider import kube_manifests as manifests
from aitestbed.host.provider.base import (
    NOT_ENFORCED,
    ExecResult,
    Lasting,
    NodeGone,
    NodeHandle,
    Provider,
    Provisioned,
)
from aitestbed.host.provider.kube_client import (
    _DNS_LABEL,
    DEFAULT_NAMESPACE,
    KubeClient,
    Options,
    api_error,
    kubectl_path,
)
from aitestbed.host.provider.kube_files import FILES_KEY, REPLACE_TREE, tar_tree
from aitestbed.host.provider.kube_manifests import SERVICE, STOP_GRACE, object_name
from aitestbed.host.provider.kube_placement import free_on, pod_requests, shortfall, takes_pods
from aitestbed.host.provider.kube_status import (
    CLAIMS_UNBOUND,
    NO_ROOM,
    claim_problem,
    node_status,
    restarted,
)
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

if TYPE_CHECKING:
    from aitestbed.host.cluster import Cluster

PARALLEL = 4
ROOM_FRESH = 10.0  # seconds the machines' room, once read, is taken as still true


class KubernetesProvider(KubeClient, Provider):
    name = "kubernetes"

    def __init__(self, context: str | None = None, namespace: str | None = None,
                 registry: str | None = None, storage_class: str | None = None,
                 ssh_address: str | None = None, kubeconfig: str | None = None):
        super().__init__(Options(context, namespace or DEFAULT_NAMESPACE, registry,
                                 storage_class, ssh_address, kubeconfig))
        self._written: dict[str, str] = {}  # Secret -> what this process last wrote there
        self._room_read: tuple[float, dict | None] | None = None  # (when, _room's answer)

    def check(self) -> None:
        if not _DNS_LABEL.match(self.namespace):
            raise AitestbedError(f"bad namespace {self.namespace!r}: lower-case letters, "
                                 "digits and '-', starting with a letter")
        apis = self.api
        self._call("get the API server's version", apis.version.get_code)
        # The verbs every later step needs, asked up front: a missing Role is one line,
        # not a half-made cluster.
        self._call("list deployments", apis.apps.list_namespaced_deployment, self.namespace,
                   limit=1)
        self._call("list pods", apis.core.list_namespaced_pod, self.namespace, limit=1)
        self._call("list persistentvolumeclaims",
                   apis.core.list_namespaced_persistent_volume_claim, self.namespace, limit=1)
        self._call("list secrets", apis.core.list_namespaced_secret, self.namespace, limit=1)

    def _owner_check(self, cluster: str) -> None:
        """One testbed per namespace: its nodes' names resolve under the one Service."""
        service = self._call("read services", self.api.core.read_namespaced_service, SERVICE,
                             self.namespace, missing_ok=True)
        owner = service and (service.metadata.labels or {}).get(LABEL_CLUSTER)
        if owner and owner != cluster:
            raise AitestbedError(
                f"namespace {self.namespace} holds the testbed {owner!r}: give this one "
                "another --namespace (one testbed per namespace)")

    # the cluster's resources -----------------------------------------------------------
    def provision(self, cluster: Cluster) -> Provisioned:
        """/home and /projects are volumes of the storage class (quotas reported only), as
        every other; the Services, NetworkPolicies and claims. The login nodes' ports are
        the cluster's to choose: `after_start` records them."""
        record = cluster.record
        record.storage, record.storage_note = (
            "volume", f"on the {record.provider} provider they are volumes of its storage class")
        warnings = [NOT_ENFORCED + record.storage_note] if storage.image_mounts(
            storage.topology_mounts(cluster.topology)) else []
        warnings += self.ensure_network(cluster.name, cluster.topology)
        self.ensure_volumes(cluster)
        return Provisioned(warnings, [])

    def after_start(self, cluster: Cluster) -> bool:
        """Where the login nodes' ssh is reached (their NodePorts, on --ssh-address or the
        first login node's machine) into the record; True when that changed."""
        endpoints = self.ssh_endpoints(cluster.name, cluster.topology)
        record = cluster.record
        if not endpoints or (record.listen, record.ports) == endpoints:
            return False
        record.listen, record.ports = endpoints[0], dict(endpoints[1])
        return True

    def ensure_images(self, node_classes: list[str]) -> dict[str, str]:
        from aitestbed.host import images, registry
        from aitestbed.host.engine import connect
        if not self.options.registry:
            raise AitestbedError("the Kubernetes provider needs --registry HOST:PORT/PREFIX: "
                                 "the node images are pushed there and the cluster pulls them")
        where = registry.check_registry(self.options.registry)
        client = connect()
        local = images.ensure_class_images(client, node_classes)
        refs = {}
        for node_class in sorted(node_classes):
            remote = registry.remote_name(where, local[node_class])
            if _in_registry(client, remote):
                refs[node_class] = remote  # tags are hashes of what an image is made of
                continue
            started = time.monotonic()
            refs[node_class] = registry.push(client, where, local[node_class])
            images.say(f"pushed {refs[node_class]} in {time.monotonic() - started:.0f} s")
        return refs

    def _check_storage_class(self) -> None:
        """The named storage class exists, or the cluster has a default one: asked before
        anything is made. A Role that may not read storage classes (they are the
        cluster's, not the namespace's) skips it: claims that stay unbound are named
        while the nodes start (`_claims_problem`)."""
        from kubernetes.client.exceptions import ApiException
        name, storage = self.options.storage_class, self.api.storage
        try:
            if name:
                storage.read_storage_class(name, _request_timeout=30)
                return
            classes = storage.list_storage_class(_request_timeout=30).items
        except ApiException as err:
            if err.status in (401, 403):
                return  # a namespaced Role
            if err.status == 404:
                raise AitestbedError(
                    f"the cluster has no storage class {name!r}: --storage-class must name "
                    "a ReadWriteMany one (`kubectl get storageclass` lists them)") from None
            raise api_error(err, "read storageclasses", self.namespace) from None
        if not any(_is_default_class(c) for c in classes):
            raise AitestbedError(
                "the cluster has no default storage class: name a ReadWriteMany one with "
                "--storage-class (`kubectl get storageclass` lists them)")

    def ensure_network(self, cluster: str, topology: Topology) -> list[str]:
        self._check_storage_class()
        self._ensure_namespace()
        self._owner_check(cluster)
        core, net = self.api.core, self.api.net
        services = [manifests.nodes_service(cluster)]
        services += [manifests.alias_service(cluster, alias) for alias in
                     sorted({a for n in topology.nodes for a in n.dns_aliases if "." not in a})]
        services += [manifests.login_service(cluster, n.name) for n in topology.nodes
                     if n.ssh_publish]
        for body in services:
            self._apply(core.read_namespaced_service, core.create_namespaced_service, None,
                        body["metadata"]["name"], body, "services")
        for body in manifests.network_policies(cluster):
            self._apply(net.read_namespaced_network_policy,
                        net.create_namespaced_network_policy,
                        net.replace_namespaced_network_policy, body["metadata"]["name"], body,
                        "networkpolicies")
        return []

    def ensure_volume(self, cluster: str, volume: str, mount: str) -> None:
        name = object_name(volume)
        core = self.api.core
        if self._call("get persistentvolumeclaims",
                      core.read_namespaced_persistent_volume_claim, name, self.namespace,
                      missing_ok=True) is not None:
            return
        self._call("create persistentvolumeclaims",
                   core.create_namespaced_persistent_volume_claim, self.namespace,
                   manifests.volume_claim(cluster, volume, mount, self.options.storage_class))

    # the state directory's files --------------------------------------------------------
    def _secret(self, cluster: str, name: str, directory: Path) -> None:
        data = tar_tree(directory)
        if len(data) > 1_000_000:
            raise AitestbedError(
                f"{directory} holds {len(data) / 1e6:.1f} MB compressed: more than a "
                "Kubernetes Secret takes (1 MiB)")
        encoded = base64.b64encode(data).decode()
        with self._lock:  # nodes are made a few at a time: the cluster's Secret once
            if self._written.get(name) == encoded:
                return
            core = self.api.core
            body = manifests.files_secret(cluster, name, encoded)
            current = self._call("get secrets", core.read_namespaced_secret, name,
                                 self.namespace, missing_ok=True)
            if current is None:
                self._call("create secrets", core.create_namespaced_secret, self.namespace,
                           body)
            elif (current.data or {}).get(FILES_KEY) != encoded:
                body["metadata"]["resourceVersion"] = current.metadata.resource_version
                self._call("update secrets", core.replace_namespaced_secret, name,
                           self.namespace, body)
            self._written[name] = encoded

    def _files(self, cluster: Cluster, node: str) -> None:
        """The Secrets the node's init container unpacks: the cluster's files and its own."""
        state = cluster.state
        self._secret(state.name, manifests.cluster_files(state.name), state.common_dir)
        self._secret(state.name, manifests.node_files(state.name, node), state.node_dir(node))

    def sync_files(self, cluster: Cluster, nodes: list[str] | None = None) -> None:
        """The Secrets and the running nodes hold the state directory's files as they are
        now (the Docker provider's binds show them at once)."""
        state = cluster.state
        self._secret(state.name, manifests.cluster_files(state.name), state.common_dir)
        handles = self.nodes(state.name)
        chosen = [n for n in (nodes if nodes is not None else handles) if n in handles]
        for node in chosen:
            self._secret(state.name, manifests.node_files(state.name, node), state.node_dir(node))
        running = [n for n in chosen if handles[n].running]
        common = tar_tree(state.common_dir)

        def copy(node: str) -> None:
            for directory, data in ((CLUSTER_DIR, common),
                                    (NODE_DIR, tar_tree(state.node_dir(node)))):
                try:
                    self._exec_stdin(state.name, node, ["sh", "-c", REPLACE_TREE,
                                                        str(directory)], data)
                except NodeGone:
                    return

        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(copy, running))

    # nodes -----------------------------------------------------------------------------
    def nodes(self, cluster: str) -> dict[str, NodeHandle]:
        deployments = self._call("list deployments", self.api.apps.list_namespaced_deployment,
                                 self.namespace,
                                 label_selector=f"{LABEL_CLUSTER}={cluster}").items
        pods: dict[str, list] = {}
        for pod in self._pods(cluster):
            if pod.metadata.deletion_timestamp is None:
                pods.setdefault((pod.metadata.labels or {}).get(LABEL_NODE), []).append(pod)
        handles, claims = {}, None
        for deployment in deployments:
            node = (deployment.metadata.labels or {}).get(LABEL_NODE)
            if not node:
                continue
            image = deployment.spec.template.spec.containers[0].image
            status, problem = node_status(deployment, pods.get(node, []))
            if problem and problem.startswith(CLAIMS_UNBOUND):
                claims = claims or self._claims_problem(cluster) or problem
                problem = claims
            elif problem and problem.startswith(NO_ROOM):
                room = self._room()
                asked = deployment.spec.template.spec.containers[0].resources.requests or {}
                missing = shortfall(asked, room) if room is not None else None
                problem = f"{problem}; {missing}" if missing else problem
            handles[node] = NodeHandle(node, status, image, None, problem)
        return handles

    def _room(self) -> dict[str, dict] | None:
        """Each machine that takes pods: its CPU and memory not yet requested; None where
        the caller may not read machines (the docs' Role may not: they are the cluster's).
        Read at most every ROOM_FRESH seconds: `wait` polls nodes() several times a second,
        and every pod of the cluster is listed."""
        if self._room_read is None or time.monotonic() - self._room_read[0] >= ROOM_FRESH:
            self._room_read = (time.monotonic(), self._read_room())
        return self._room_read[1]

    def _read_room(self) -> dict[str, dict] | None:
        from kubernetes.client.exceptions import ApiException
        core = self.api.core
        try:
            machines = core.list_node(_request_timeout=30).items
            placed = core.list_pod_for_all_namespaces(
                _request_timeout=30,
                field_selector="status.phase!=Succeeded,status.phase!=Failed").items
        except ApiException:
            return None
        requested: dict[str, list] = {}
        for pod in placed:
            if pod.spec.node_name:
                requested.setdefault(pod.spec.node_name, []).append(pod_requests(pod.spec))
        return {m.metadata.name: free_on(m.status.allocatable or {},
                                         requested.get(m.metadata.name, []))
                for m in machines if takes_pods(m.spec)}

    def _claims_problem(self, cluster: str) -> str | None:
        """Which of the cluster's claims is not bound, and why (its last warning event,
        where the Role lets us read events)."""
        from kubernetes.client.exceptions import ApiException
        core = self.api.core
        claims = self._call("list persistentvolumeclaims",
                            core.list_namespaced_persistent_volume_claim, self.namespace,
                            label_selector=f"{LABEL_CLUSTER}={cluster}").items
        unbound = sorted((c for c in claims if c.status.phase != "Bound"),
                         key=lambda c: c.metadata.name)
        if not unbound:
            return None
        claim = unbound[0]
        try:
            events = core.list_namespaced_event(
                self.namespace, _request_timeout=30,
                field_selector="involvedObject.kind=PersistentVolumeClaim,"
                               f"involvedObject.name={claim.metadata.name}").items
        except ApiException:
            events = []  # a Role without events: the claim's name and class still help
        return claim_problem(claim, events)

    def create_node(self, handle: Cluster, node: Node, image: str) -> None:
        cluster = handle.name
        self._files(handle, node.name)
        hostvars = handle.topology.hostvars.get(node.name, {})
        claims = [(m, object_name(volume_name(cluster, m))) for m in node.mounts]
        claims += [(p, object_name(node_volume_name(cluster, node.name, p)))
                   for p in node.volumes]
        body = manifests.node_deployment(cluster, self.namespace, node, image, claims,
                                         hostvars)
        apps = self.api.apps
        if self._call("get deployments", apps.read_namespaced_deployment, node.name,
                      self.namespace, missing_ok=True) is not None:
            self._call("delete deployments", apps.delete_namespaced_deployment, node.name,
                       self.namespace, propagation_policy="Foreground")
            self._wait_gone(cluster, [node.name], deployments=True)
        self._call("create deployments", apps.create_namespaced_deployment, self.namespace,
                   body)

    def _scale(self, node: str, replicas: int) -> None:
        self._call("patch deployments", self.api.apps.patch_namespaced_deployment_scale,
                   node, self.namespace, {"spec": {"replicas": replicas}})

    def start_node(self, cluster: Cluster, node: Node) -> None:
        self._files(cluster, node.name)
        self._scale(node.name, 1)

    def _wait_gone(self, cluster: str, nodes: list[str], deployments: bool = False,
                   timeout: float = STOP_GRACE + 45) -> None:
        deadline = time.monotonic() + timeout
        wanted = set(nodes)
        while time.monotonic() < deadline:
            left = {(p.metadata.labels or {}).get(LABEL_NODE) for p in self._pods(cluster)}
            if deployments:
                left |= set(self.nodes(cluster))
            if not left & wanted:
                return
            time.sleep(0.5)
        raise AitestbedError(f"{', '.join(sorted(left & wanted))} still have pods after "
                             f"{timeout:.0f} s (is a machine of the cluster gone?)")

    def stop_nodes(self, cluster: str, nodes: list[str]) -> None:
        known = self.nodes(cluster)
        chosen = [n for n in nodes if n in known]
        with ThreadPoolExecutor(PARALLEL * 2) as pool:
            list(pool.map(lambda n: self._scale(n, 0), chosen))
        self._wait_gone(cluster, chosen)

    def remove_nodes(self, cluster: str, nodes: list[str]) -> None:
        # Scaled to zero first, as `down` stops: slurmctld saves its queue when asked to stop.
        self.stop_nodes(cluster, nodes)
        known = self.nodes(cluster)
        for node in nodes:
            if node in known:
                self._call("delete deployments", self.api.apps.delete_namespaced_deployment,
                           node, self.namespace, missing_ok=True)
        self._wait_gone(cluster, nodes, deployments=True)

    # commands --------------------------------------------------------------------------
    def exec(self, cluster: str, node: str, argv: list[str], user: str | None = None,
             workdir: str | None = None, separate: bool = False) -> ExecResult:
        client = self._stream(cluster, node, self._as(argv, user, workdir))
        return self._finish(client, separate)

    def logs(self, cluster: str, node: str, tail: int = 5) -> str:
        pod = self._pod(cluster, node)
        if pod is None:
            return ""
        for container in ("node", "files"):
            try:
                text = self.api.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container=container, tail_lines=tail,
                    previous=restarted(pod, container), _request_timeout=10)
            except Exception:  # noqa: BLE001 - no log yet is no log
                continue
            if text.strip():
                return text
        return ""

    def terminal_argv(self, cluster: str, node: str, argv: list[str], tty: bool,
                      user: str | None = None) -> list[str]:
        return [kubectl_path(), *self._kubeconfig_args(), "exec", "-i",
                *(["-t"] if tty else []), f"deploy/{node}", "-c", "node", "--",
                *self._as(argv, user, None)]

    def ansible_vars(self, cluster: str, node: str) -> dict:
        values = {"ansible_connection": "kubernetes.core.kubectl",
                  "ansible_kubectl_pod": f"deploy/{node}",
                  "ansible_kubectl_container": "node",
                  "ansible_kubectl_namespace": self.namespace,
                  "ansible_kubectl_executable": kubectl_path()}
        values["ansible_kubectl_kubeconfig"] = self.kubeconfig
        if self.options.context:
            values["ansible_kubectl_context"] = self.options.context
        return values

    def ssh_endpoints(self, cluster: str, topology: Topology, timeout: float = 60
                      ) -> tuple[str, dict[str, int]] | None:
        """(address, {login node: port}): the NodePorts of the login nodes' Services, on
        --ssh-address or the address of the machine the first login node runs on."""
        login = [n.name for n in topology.nodes if n.ssh_publish]
        if not login:
            return None
        ports = {}
        for node in login:
            service = self._call("get services", self.api.core.read_namespaced_service,
                                 f"{node}-ssh", self.namespace)
            ports[node] = int(service.spec.ports[0].node_port)
        address = self.options.ssh_address
        deadline, troubled = time.monotonic() + timeout, Lasting()
        while address is None:
            pod = self._pod(cluster, login[0])
            address = pod.status.host_ip if pod is not None and pod.status else None
            if address is None:
                # A pod no machine takes (its claims unbound, too little CPU) says why, as
                # `wait` does, once that has lasted.
                handle = self.nodes(cluster).get(login[0])
                problem = handle.problem if handle is not None else None
                if troubled.lasted(login[0], problem):
                    raise AitestbedError(f"{login[0]}: {problem}")
                if time.monotonic() > deadline:
                    raise AitestbedError(f"{login[0]} has no machine after {timeout:.0f} s: "
                                         "give --ssh-address")
                time.sleep(0.5 if problem is None else 2)
        return address, ports

    def destroy(self, cluster: str) -> list[str]:
        apis = self.api
        selector = f"{LABEL_CLUSTER}={cluster}"
        removed = []
        kinds = [
            ("deployments", apis.apps.list_namespaced_deployment,
             apis.apps.delete_namespaced_deployment),
            ("services", apis.core.list_namespaced_service, apis.core.delete_namespaced_service),
            ("networkpolicies", apis.net.list_namespaced_network_policy,
             apis.net.delete_namespaced_network_policy),
            ("secrets", apis.core.list_namespaced_secret, apis.core.delete_namespaced_secret),
            ("persistentvolumeclaims", apis.core.list_namespaced_persistent_volume_claim,
             apis.core.delete_namespaced_persistent_volume_claim),
        ]
        for kind, lister, deleter in kinds:
            items = self._call(f"list {kind}", lister, self.namespace,
                               label_selector=selector).items
            for item in items:
                self._call(f"delete {kind}", deleter, item.metadata.name, self.namespace,
                           missing_ok=True)
            if items:
                removed.append(f"{len(items)} {kind}")
            if kind == "deployments" and items:
                self._wait_gone(cluster, [i.metadata.name for i in items], deployments=True,
                                timeout=STOP_GRACE + 60)
        return [f"{what} in namespace {self.namespace}" for what in removed]


def _is_default_class(storage_class) -> bool:
    annotations = storage_class.metadata.annotations or {}
    return any(annotations.get(f"storageclass{beta}.kubernetes.io/is-default-class") == "true"
               for beta in ("", ".beta"))


def _in_registry(client, remote: str) -> bool:
    """Does the registry hold this tag already (the engine asks it for the manifest)?"""
    from docker.errors import DockerException
    try:
        client.api.inspect_distribution(remote)
        return True
    except DockerException:
        return False
