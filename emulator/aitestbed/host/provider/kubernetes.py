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
- login nodes' ssh is a NodePort Service; `ssh_endpoints` says where it is reached;
- nothing privileged: no host path, no host network, RuntimeDefault seccomp, the
  runtime's default capabilities (Docker's); only namespaced objects (the Role in
  docs/kubernetes.md); a NetworkPolicy lets only the login nodes' ssh in from outside;
- commands run through the API's exec; terminals and Ansible through kubectl.
"""

from __future__ import annotations

import base64
import glob
import io
import os
import re
import shlex
import shutil
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.naming import LABEL_CLASS, LABEL_CLUSTER, LABEL_NODE, LABEL_SYSTEM
from aitestbed.host.provider.base import (
    ExecResult,
    Lasting,
    NodeGone,
    NodeHandle,
    Provider,
)
from aitestbed.host.state import ClusterRecord, ClusterState
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR

DEFAULT_NAMESPACE = "aitestbed"
SERVICE = "nodes"  # the headless Service: <node>.nodes.<namespace>.svc.<domain>
FILES_KEY = "files.tgz"
PARALLEL = 4
STOP_GRACE = 15  # seconds, as the Docker provider's stop timeout
# How long a node's pod stays on a machine that stopped answering before it is made
# again elsewhere (Kubernetes' default is 300 s).
LOST_MACHINE_SECONDS = 10
# The problem of a node whose claims are not bound; the provider names the claim and why.
CLAIMS_UNBOUND = "its volume claims are not bound"
# The problem of a node no machine has room for; how much is missing follows, where the
# caller may read the machines.
NO_ROOM = "no machine can take it"
ROOM_FRESH = 10.0  # seconds the machines' room, once read, is taken as still true
SIDE = "/.aitestbed"  # where the init container sees the volumes it fills
# CPU and memory each node class asks for (the scheduler spreads nodes by them), unless the
# inventory gives the host `kubernetes_resources: {cpu: ..., memory: ...}`.
REQUESTS = {
    "login": {"cpu": "100m", "memory": "256Mi"},
    "slurmctld": {"cpu": "100m", "memory": "512Mi"},
}
COMPUTE_REQUESTS = {"cpu": "250m", "memory": "512Mi"}
# A running node's copy of a tree becomes the tar on stdin: files extracted over (tar
# unlinks each old file first), then what the tar no longer holds removed.
REPLACE_TREE = r"""set -eu
t=$(mktemp /run/aitestbed-files.XXXXXX)
trap 'rm -f "$t" "$t.list"' EXIT
cat > "$t"
tar -xzf "$t" -C "$0"
tar -tzf "$t" | sed -e 's#^\./##' -e 's#/$##' | grep -v '^\.\?$' | sort > "$t.list"
cd "$0" && find . -mindepth 1 | sed 's#^\./##' | sort | comm -13 "$t.list" - | sort -r |
  while IFS= read -r p; do rm -rf -- "$p"; done
"""
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Options:
    """What `aitestbed up --provider kubernetes` was given (kept in the cluster record)."""

    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    registry: str | None = None  # HOST[:PORT][/PREFIX] the host pushes to and pods pull from
    storage_class: str | None = None  # None: the cluster's default class
    ssh_address: str | None = None  # where the login nodes' NodePorts are reached
    kubeconfig: str | None = None  # None: $KUBECONFIG, else ~/.kube/config


def object_name(text: str) -> str:
    """A Docker volume name (`ci-1-gc-slurmctld-var-spool-slurmctld`) as a Kubernetes name."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-")


def alias_label(alias: str) -> str:
    return f"alias.aitestbed/{alias}"


def volume_slug(path: str) -> str:
    return object_name(path.strip("/").replace("/", "-"))


def kubectl_path() -> str:
    """kubectl: AITESTBED_KUBECTL, the PATH, or the one the project builds and caches."""
    if os.environ.get("AITESTBED_KUBECTL"):
        return os.environ["AITESTBED_KUBECTL"]
    if found := shutil.which("kubectl"):
        return found
    cache = os.environ.get("AITESTBED_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aitestbed")
    def version(path: str) -> tuple[int, ...]:  # v1.32.13 after v1.32.9
        name = Path(path).parent.name.lstrip("v")
        return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))

    built = sorted(glob.glob(os.path.join(cache, "kubernetes", "v*", "kubectl")), key=version)
    if built:
        return built[-1]
    raise AitestbedError("kubectl is missing: install it, or `make kube-test-cluster` "
                         "(which builds one into ~/.cache/aitestbed/kubernetes/)")


def tar_tree(directory: Path) -> bytes:
    """A directory of the state dir as a gzip'd tar, every file root's, modes kept."""
    buffer = io.BytesIO()

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        if directory.is_dir():
            tar.add(str(directory), arcname=".", filter=as_root)
    return buffer.getvalue()


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


class KubernetesProvider(Provider):
    name = "kubernetes"
    local_ports = False
    host_storage = False

    def __init__(self, context: str | None = None, namespace: str | None = None,
                 registry: str | None = None, storage_class: str | None = None,
                 ssh_address: str | None = None, kubeconfig: str | None = None):
        self.options = Options(context, namespace or DEFAULT_NAMESPACE, registry,
                               storage_class, ssh_address, kubeconfig)
        # The cluster keeps the kubeconfig it was made with (its record); else KUBECONFIG
        # as it is now (the client reads it once, when imported).
        self.kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser(
            "~/.kube/config")
        self.namespace = self.options.namespace
        self._api = None
        self._lock = threading.Lock()
        self._written: dict[str, str] = {}  # Secret -> what this process last wrote there
        self._hostvars: dict[tuple, dict] = {}
        self._room_read: tuple[float, dict | None] | None = None  # (when, _room's answer)

    # the client ------------------------------------------------------------------------
    @property
    def api(self):
        if self._api is None:
            self._api = self._connect()
        return self._api

    def _connect(self):
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
        try:
            api_client = config.new_client_from_config(config_file=self.kubeconfig,
                                                       context=self.options.context)
        except ConfigException as err:
            where = self.kubeconfig
            raise AitestbedError(
                f"no Kubernetes context to use ({' '.join(str(err).split())}): point "
                f"KUBECONFIG (or --kubeconfig) at the cluster's kubeconfig (now {where}) or give "
                "--context") from None
        except (OSError, ValueError) as err:
            raise AitestbedError(f"cannot read the kubeconfig: {err}") from None
        self._server = api_client.configuration.host
        self._configuration = api_client.configuration
        return _Apis(client, api_client)

    def _exec_api(self):
        """A CoreV1Api of its own: the client's `stream` swaps its ApiClient's request
        function for a websocket while it runs, so a client shared with other threads
        would send their calls down the websocket."""
        from kubernetes import client
        self.api  # noqa: B018 - connects first
        return client.CoreV1Api(client.ApiClient(self._configuration))

    def _kubeconfig_args(self) -> list[str]:
        args = []
        args += ["--kubeconfig", self.kubeconfig]
        if self.options.context:
            args += ["--context", self.options.context]
        return args + ["-n", self.namespace]

    def _call(self, what: str, call, *args, missing_ok: bool = False, **kwargs):
        """One API call; refusals become one line naming the verb and resource."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError
        try:
            return call(*args, _request_timeout=30, **kwargs)
        except ApiException as err:
            if err.status == 404 and missing_ok:
                return None
            raise _api_error(err, what, self.namespace) from None
        except (HTTPError, OSError) as err:
            raise AitestbedError(
                f"the Kubernetes API server {getattr(self, '_server', '')} cannot be reached "
                f"({' '.join(str(err).split())[:200]}): is the cluster up, and is this the "
                "right context?") from None

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

    def _ensure_namespace(self) -> None:
        core = self.api.core
        from kubernetes.client.exceptions import ApiException
        try:
            core.read_namespace(self.namespace, _request_timeout=30)
            return
        except ApiException as err:
            if err.status == 403:
                return  # a namespaced Role: its namespace exists
            if err.status != 404:
                raise _api_error(err, "read namespaces", self.namespace) from None
        body = {"metadata": {"name": self.namespace}}
        try:
            core.create_namespace(body, _request_timeout=30)
        except ApiException as err:
            if err.status != 409:
                raise AitestbedError(
                    f"namespace {self.namespace} does not exist and cannot be made here "
                    f"({err.reason}): ask the cluster's administrator for it and its Role "
                    "(docs/kubernetes.md)") from None

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
            raise _api_error(err, "read storageclasses", self.namespace) from None
        if not any(_is_default_class(c) for c in classes):
            raise AitestbedError(
                "the cluster has no default storage class: name a ReadWriteMany one with "
                "--storage-class (`kubectl get storageclass` lists them)")

    def ensure_network(self, cluster: str, topology: Topology) -> list[str]:
        self._check_storage_class()
        self._ensure_namespace()
        self._owner_check(cluster)
        core, net = self.api.core, self.api.net
        labels = {LABEL_CLUSTER: cluster}
        self._apply(core.read_namespaced_service, core.create_namespaced_service, None, SERVICE, {
            "metadata": {"name": SERVICE, "labels": labels},
            "spec": {"clusterIP": "None", "selector": labels,
                     # Only ready pods' names: a pod left Terminating on a lost machine
                     # has the same hostname as its replacement, and slurmctld would
                     # reach for the dead address.
                     "ports": [{"name": "ssh", "port": 22}]},
        }, "services")
        # A short alias (`vipu`, a round-robin login name) is a headless Service of its
        # own over the pods that carry it: it resolves through the namespace's search domain.
        aliases = sorted({a for n in topology.nodes for a in n.dns_aliases if "." not in a})
        for alias in aliases:
            self._apply(core.read_namespaced_service, core.create_namespaced_service, None,
                        alias, {
                            "metadata": {"name": alias, "labels": labels},
                            "spec": {"clusterIP": "None",
                                     "selector": {LABEL_CLUSTER: cluster,
                                                  alias_label(alias): "true"},
                                     "ports": [{"name": "ssh", "port": 22}]}}, "services")
        login = {LABEL_CLUSTER: cluster, "aitestbed.login": "true"}
        for node in topology.nodes:
            if node.ssh_publish:
                self._apply(core.read_namespaced_service, core.create_namespaced_service, None,
                            f"{node.name}-ssh", {
                                "metadata": {"name": f"{node.name}-ssh", "labels": labels},
                                "spec": {"type": "NodePort",
                                         "selector": {LABEL_CLUSTER: cluster,
                                                      LABEL_NODE: node.name},
                                         "ports": [{"name": "ssh", "port": 22,
                                                    "targetPort": 22}]}}, "services")
        self._apply(net.read_namespaced_network_policy, net.create_namespaced_network_policy,
                    net.replace_namespaced_network_policy, f"{cluster}-nodes", {
                        "metadata": {"name": f"{cluster}-nodes", "labels": labels},
                        "spec": {"podSelector": {"matchLabels": labels},
                                 "policyTypes": ["Ingress"],
                                 "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}]}]},
                    }, "networkpolicies")
        self._apply(net.read_namespaced_network_policy, net.create_namespaced_network_policy,
                    net.replace_namespaced_network_policy, f"{cluster}-ssh", {
                        "metadata": {"name": f"{cluster}-ssh", "labels": labels},
                        "spec": {"podSelector": {"matchLabels": login},
                                 "policyTypes": ["Ingress"],
                                 "ingress": [{"ports": [{"port": 22, "protocol": "TCP"}]}]},
                    }, "networkpolicies")
        return []

    def _apply(self, read, create, replace, name: str, body: dict, resource: str) -> None:
        current = self._call(f"get {resource}", read, name, self.namespace, missing_ok=True)
        if current is None:
            self._call(f"create {resource}", create, self.namespace, body)
        elif replace is not None:
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            self._call(f"update {resource}", replace, name, self.namespace, body)

    def ensure_volume(self, cluster: str, volume: str, mount: str) -> None:
        name = object_name(volume)
        core = self.api.core
        if self._call("get persistentvolumeclaims",
                      core.read_namespaced_persistent_volume_claim, name, self.namespace,
                      missing_ok=True) is not None:
            return
        spec = {"accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "1Gi"}}}
        if self.options.storage_class:
            spec["storageClassName"] = self.options.storage_class
        self._call("create persistentvolumeclaims",
                   core.create_namespaced_persistent_volume_claim, self.namespace,
                   {"metadata": {"name": name, "labels": {LABEL_CLUSTER: cluster,
                                                          "aitestbed.mount": volume_slug(mount)}},
                    "spec": spec})

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
            body = {"metadata": {"name": name, "labels": {LABEL_CLUSTER: cluster}},
                    "type": "Opaque", "data": {FILES_KEY: encoded}}
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

    def sync_files(self, state: ClusterState, nodes: list[str] | None = None) -> None:
        """The Secrets and the running nodes hold the state directory's files as they are
        now (the Docker provider's binds show them at once)."""
        self._secret(state.name, f"{state.name}-cluster-files", state.common_dir)
        handles = self.nodes(state.name)
        chosen = [n for n in (nodes if nodes is not None else handles) if n in handles]
        for node in chosen:
            self._secret(state.name, f"{state.name}-{node}-files", state.node_dir(node))
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
    def _pods(self, cluster: str, node: str | None = None) -> list:
        selector = f"{LABEL_CLUSTER}={cluster}" + (f",{LABEL_NODE}={node}" if node else "")
        return self._call("list pods", self.api.core.list_namespaced_pod, self.namespace,
                          label_selector=selector).items

    def _pod(self, cluster: str, node: str):
        """The node's live pod (not one being deleted), or None."""
        pods = [p for p in self._pods(cluster, node) if p.metadata.deletion_timestamp is None]
        running = [p for p in pods if p.status.phase == "Running"]
        return (running or pods or [None])[0]

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
            status, problem = _status(deployment, pods.get(node, []))
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

    def create_node(self, state: ClusterState, record: ClusterRecord, node: Node,
                    image: str) -> None:
        cluster = state.name
        self._secret(cluster, f"{cluster}-cluster-files", state.common_dir)
        self._secret(cluster, f"{cluster}-{node.name}-files", state.node_dir(node.name))
        from aitestbed.host.inventory import load as load_inventory
        from aitestbed.host.naming import node_volume_name, volume_name
        key = (record.profile, tuple(record.systems or ()))
        with self._lock:  # one ansible-inventory run for all the nodes `up` makes
            if key not in self._hostvars:
                self._hostvars[key] = load_inventory(record.profile, record.systems).hostvars
        hostvars = self._hostvars[key].get(node.name, {})
        claims = [(m, object_name(volume_name(cluster, m))) for m in node.mounts]
        claims += [(p, object_name(node_volume_name(cluster, node.name, p)))
                   for p in node.volumes]
        labels = {LABEL_CLUSTER: cluster, LABEL_NODE: node.name,
                  LABEL_CLASS: node.node_class, LABEL_SYSTEM: node.system}
        if node.ssh_publish:
            labels["aitestbed.login"] = "true"
        labels.update({alias_label(a): "true" for a in node.dns_aliases if "." not in a})
        volumes = [
            {"name": "run", "emptyDir": {"medium": "Memory"}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "node-files", "emptyDir": {"medium": "Memory"}},
            {"name": "cluster-files", "emptyDir": {"medium": "Memory"}},
            {"name": "host-node", "secret": {"secretName": f"{cluster}-{node.name}-files",
                                             "defaultMode": 0o400}},
            {"name": "host-cluster", "secret": {"secretName": f"{cluster}-cluster-files",
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
                    "searches": [f"{SERVICE}.{self.namespace}.svc.cluster.local"],
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
        body = {"metadata": {"name": node.name, "labels": labels},
                "spec": {"replicas": 0, "strategy": {"type": "Recreate"},
                         "selector": {"matchLabels": {LABEL_CLUSTER: cluster,
                                                      LABEL_NODE: node.name}},
                         "template": pod}}
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

    def start_node(self, state: ClusterState, record: ClusterRecord, node: Node) -> None:
        self._secret(state.name, f"{state.name}-cluster-files", state.common_dir)
        self._secret(state.name, f"{state.name}-{node.name}-files", state.node_dir(node.name))
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
    def _running_pod(self, cluster: str, node: str) -> str:
        pod = self._pod(cluster, node)
        if pod is None or pod.status.phase != "Running":
            raise NodeGone(f"node {node} of cluster {cluster!r} has no running pod")
        return pod.metadata.name

    @staticmethod
    def _as(argv: list[str], user: str | None, workdir: str | None) -> list[str]:
        """The API's exec runs as the container's user in its working directory: `user`
        and `workdir` as `docker exec -u -w` gives them."""
        if workdir:
            argv = ["sh", "-c", 'cd "$0" && exec "$@"', workdir, *argv]
        if user:
            argv = ["runuser", "-u", user, "--", *argv]
        return argv

    def _stream(self, cluster: str, node: str, argv: list[str], stdin: bytes | None = None):
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
        pod = self._running_pod(cluster, node)
        try:
            return stream(self._exec_api().connect_get_namespaced_pod_exec, pod, self.namespace,
                          container="node", command=argv, stdin=stdin is not None,
                          stdout=True, stderr=True, tty=False, _preload_content=False,
                          binary=True)
        except ApiException as err:
            reason = " ".join(str(err.reason).split())
            # The websocket's handshake failing is status 0, its HTTP status in the text.
            found = re.search(r"Handshake status (\d+)", reason)
            status = err.status or (int(found.group(1)) if found else 0)
            if status == 403:
                raise self._exec_refused() from None
            # 5xx: the API server cannot reach the pod's machine (its kubelet is gone:
            # "error dialing backend"), a node not ready, not a refusal.
            if status in (0, 400, 404) or status >= 500:
                raise NodeGone(f"node {node}: {reason[:300]}") from err
            raise _api_error(err, "create pods/exec", self.namespace) from None
        except Exception as err:  # the websocket's own errors (handshake refused, closed)
            text = " ".join(str(err).split())
            if "403" in text:
                raise self._exec_refused() from None
            raise NodeGone(f"node {node}: {text}") from err

    def _exec_refused(self) -> AitestbedError:
        return AitestbedError(f"namespace {self.namespace}: the Role does not allow create on "
                              "pods/exec (docs/kubernetes.md lists the verbs)")

    def _finish(self, client, separate: bool) -> ExecResult:
        from kubernetes.stream.ws_client import ERROR_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL
        out, err = bytearray(), bytearray()
        while client.is_open():
            client.update(timeout=1)
            if client.peek_channel(STDOUT_CHANNEL):
                out += client.read_channel(STDOUT_CHANNEL)
            if client.peek_channel(STDERR_CHANNEL):
                chunk = client.read_channel(STDERR_CHANNEL)
                (err if separate else out).extend(chunk)
        out += client.read_channel(STDOUT_CHANNEL) or b""
        (err if separate else out).extend(client.read_channel(STDERR_CHANNEL) or b"")
        try:
            code = client.returncode
        except (ValueError, KeyError, IndexError, TypeError) as error:
            # The error channel holds no exit code: the kubelet could not run it (its
            # machine is gone, the container stopped).
            text = client.read_channel(ERROR_CHANNEL)
            raise NodeGone(" ".join(str(text or error).split())[:300]) from None
        finally:
            client.close()
        if code is None:
            raise NodeGone("the command's connection closed before it ended")
        return ExecResult(int(code), bytes(out), bytes(err))

    def exec(self, cluster: str, node: str, argv: list[str], user: str | None = None,
             workdir: str | None = None, separate: bool = False) -> ExecResult:
        client = self._stream(cluster, node, self._as(argv, user, workdir))
        return self._finish(client, separate)

    def _exec_stdin(self, cluster: str, node: str, argv: list[str], data: bytes) -> ExecResult:
        from kubernetes.stream.ws_client import STDIN_CHANNEL
        client = self._stream(cluster, node, argv, stdin=data)
        for start in range(0, len(data), 1 << 16):
            client.write_channel(STDIN_CHANNEL, data[start:start + (1 << 16)])
        client.close_channel(STDIN_CHANNEL)
        return self._finish(client, False)

    def logs(self, cluster: str, node: str, tail: int = 5) -> str:
        pod = self._pod(cluster, node)
        if pod is None:
            return ""
        for container in ("node", "files"):
            try:
                text = self.api.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container=container, tail_lines=tail,
                    previous=_restarted(pod, container), _request_timeout=10)
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


class _Apis:
    def __init__(self, client, api_client):
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.net = client.NetworkingV1Api(api_client)
        self.storage = client.StorageV1Api(api_client)
        self.version = client.VersionApi(api_client)


def _api_error(err, what: str, namespace: str) -> AitestbedError:
    reason = err.reason or ""
    try:
        import json
        reason = json.loads(err.body).get("message") or reason
    except (TypeError, ValueError, AttributeError):
        pass
    if err.status == 403:
        return AitestbedError(
            f"namespace {namespace}: not allowed to {what} ({reason}): the Role must allow "
            "it (docs/kubernetes.md lists every verb on every resource)")
    if err.status == 401:
        return AitestbedError(f"the Kubernetes API server refused the credentials: {reason}")
    if err.status == 404 and "namespaces" in reason:
        return AitestbedError(f"namespace {namespace} does not exist: {reason}")
    return AitestbedError(f"Kubernetes refused to {what}: {reason}")


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


def _restarted(pod, container: str) -> bool:
    statuses = (pod.status.container_statuses or []) + (pod.status.init_container_statuses or [])
    return any(s.name == container and s.restart_count and s.state and s.state.waiting
               for s in statuses)


def _status(deployment, pods: list) -> tuple[str, str | None]:
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


# Room on the machines (pure) -----------------------------------------------------------
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
