"""The Kubernetes provider's decisions, with no cluster: names, the init container's
script (run here with sh on real directories), the state files' tar, node status from
pod status, and the one-line errors for a missing context or an unreachable API."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from types import SimpleNamespace as NS

import pytest
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node
from aitestbed.host.provider import get
from aitestbed.host.provider.kube_files import REPLACE_TREE, tar_tree
from aitestbed.host.provider.kube_manifests import SIDE, init_script, object_name, requests_for
from aitestbed.host.provider.kube_placement import pod_requests, shortfall, takes_pods
from aitestbed.host.provider.kube_status import CLAIMS_UNBOUND, claim_problem, node_status
from aitestbed.host.provider.kubernetes import KubernetesProvider


def test_docker_volume_names_become_kubernetes_names():
    assert object_name("ci-1-gc-slurmctld-var-spool-slurmctld") == \
        "ci-1-gc-slurmctld-var-spool-slurmctld"
    assert object_name("My_Cluster-home") == "my-cluster-home"
    assert len(object_name("x" * 80)) == 63


def test_the_provider_is_chosen_by_name_with_its_options():
    provider = get("kubernetes", namespace="room-1", registry="reg.example:5000/tb")
    assert isinstance(provider, KubernetesProvider)
    assert provider.namespace == "room-1"
    assert get("kubernetes").namespace == "aitestbed"


def test_requests_come_from_the_class_or_the_inventory():
    login = Node("gc-login-01", "graphcore", "login", "alcf.anl.gov")
    compute = Node("gc-poplar-01", "graphcore", "ipu_node", "alcf.anl.gov")
    assert requests_for(login, {}) == {"cpu": "100m", "memory": "256Mi"}
    assert requests_for(compute, {})["cpu"] == "250m"
    assert requests_for(compute, {"kubernetes_resources": {"cpu": 2, "memory": "4Gi"}}) == \
        {"cpu": "2", "memory": "4Gi"}


def test_the_state_files_tar_is_roots_and_keeps_modes(tmp_path):
    (tmp_path / "users" / "ann").mkdir(parents=True)
    (tmp_path / "munge.key").write_text("k")
    (tmp_path / "munge.key").chmod(0o400)
    (tmp_path / "users" / "ann" / "authorized_keys").write_text("ssh-ed25519 A")
    with tarfile.open(fileobj=io.BytesIO(tar_tree(tmp_path)), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert {"./munge.key", "./users/ann/authorized_keys"} <= set(members)
    assert all(m.uid == 0 and m.uname == "root" for m in members.values())
    assert members["./munge.key"].mode == 0o400


def _fake_side(tmp_path, host_node: bytes, host_cluster: bytes):
    side = tmp_path / "side"
    for sub in ("run", "shm", "node", "cluster", "host/node", "host/cluster", "volumes/v0",
                "volumes/v1"):
        (side / sub).mkdir(parents=True)
    (side / "host/node/files.tgz").write_bytes(host_node)
    (side / "host/cluster/files.tgz").write_bytes(host_cluster)
    return side


def test_the_init_script_unpacks_and_fills_only_empty_volumes(tmp_path):
    node_files, cluster_files = tmp_path / "n", tmp_path / "c"
    node_files.mkdir()
    cluster_files.mkdir()
    (node_files / "node.json").write_text("{}")
    (cluster_files / "accounts.json").write_text("[]")
    side = _fake_side(tmp_path, tar_tree(node_files), tar_tree(cluster_files))
    image = tmp_path / "image"
    (image / "var/lib/mysql").mkdir(parents=True)
    (image / "var/lib/mysql/ibdata1").write_text("db")
    (image / "var/lib/mysql").chmod(0o750)
    (image / "home").mkdir()
    (side / "volumes/v1/alice").mkdir()  # /home already holds a home: left as it is
    script = init_script([(str(image / "var/lib/mysql"), "v0"), (str(image / "home"), "v1")])
    result = subprocess.run(["sh", "-c", script.replace(SIDE, str(side))],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert (side / "node/node.json").read_text() == "{}"
    assert (side / "cluster/accounts.json").read_text() == "[]"
    assert (side / "volumes/v0/ibdata1").read_text() == "db"
    assert (side / "volumes/v0").stat().st_mode & 0o777 == 0o750
    assert os.listdir(side / "volumes/v1") == ["alice"]
    assert (side / "node").stat().st_mode & 0o777 == 0o700


def test_a_running_nodes_tree_becomes_the_new_tar(tmp_path):
    """sync_files: files updated, new ones added, those the state dir lost removed."""
    target, new = tmp_path / "target", tmp_path / "new"
    (target / "users/gone").mkdir(parents=True)
    (target / "users/gone/authorized_keys").write_text("old")
    (target / "accounts.json").write_text("old")
    (new / "users/ann").mkdir(parents=True)
    (new / "users/ann/authorized_keys").write_text("ann")
    (new / "accounts.json").write_text("new")
    result = subprocess.run(["sh", "-c", REPLACE_TREE.replace("/run/", f"{tmp_path}/"),
                             str(target)], input=tar_tree(new), capture_output=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert (target / "accounts.json").read_text() == "new"
    assert (target / "users/ann/authorized_keys").read_text() == "ann"
    assert not (target / "users/gone").exists()


def _pod(phase="Running", node_state="running", waiting=None, scheduled=None, deleting=False):
    state = NS(running=node_state == "running" or None,
               waiting=NS(reason=waiting, message=f"{waiting}: refused") if waiting else None,
               terminated=None)
    conditions = [NS(type="PodScheduled", status="False", reason="Unschedulable",
                     message=scheduled)] if scheduled else []
    return NS(metadata=NS(deletion_timestamp="now" if deleting else None),
              spec=NS(containers=[NS(resources=NS(requests={"cpu": "250m",
                                                            "memory": "512Mi"}))]),
              status=NS(phase=phase, conditions=conditions, init_container_statuses=[],
                        container_statuses=[NS(name="node", state=state,
                                               image="reg:5000/tb/login:1")]))


def test_node_status_from_its_deployment_and_pod():
    stopped, one = NS(spec=NS(replicas=0)), NS(spec=NS(replicas=1))
    assert node_status(stopped, []) == ("exited", None)
    assert node_status(one, []) == ("created", None)
    assert node_status(one, [_pod()]) == ("running", None)
    status, problem = node_status(one, [_pod("Pending", None, waiting="ImagePullBackOff")])
    assert status == "pending" and "cannot pull reg:5000/tb/login:1" in problem
    status, problem = node_status(one, [_pod("Pending", None, scheduled="0/2 nodes are "
                                         "available: 2 Insufficient memory.")])
    assert "asks for cpu 250m, memory 512Mi" in problem and "Insufficient memory" in problem
    assert node_status(one, [_pod("Running", None, waiting="CrashLoopBackOff")])[0] == "restarting"
    status, problem = node_status(one, [_pod("Pending", None, scheduled="0/2 nodes are available: "
                                         "pod has unbound immediate PersistentVolumeClaims.")])
    assert status == "pending" and problem.startswith(CLAIMS_UNBOUND)
    assert "asks for" not in problem  # not a matter of CPU or memory


def _container(cpu=None, memory=None):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return NS(resources=NS(requests=requests))


def test_a_pod_holds_its_containers_requests_or_its_largest_init_containers():
    spec = NS(containers=[_container("250m", "512Mi"), _container("1")],
              init_containers=[_container("100m", "2Gi")])
    assert pod_requests(spec) == {"cpu": 1.25, "memory": 2 * 2**30}
    assert pod_requests(NS(containers=[NS(resources=None)], init_containers=None)) == \
        {"cpu": 0.0, "memory": 0.0}


def test_cordoned_and_tainted_machines_take_no_pods():
    assert takes_pods(NS(unschedulable=None, taints=None))
    assert takes_pods(NS(unschedulable=False, taints=[NS(effect="PreferNoSchedule")]))
    assert not takes_pods(NS(unschedulable=True, taints=None))
    assert not takes_pods(NS(unschedulable=None, taints=[NS(effect="NoSchedule")]))


@pytest.mark.parametrize("asked, expected", [
    # short of CPU everywhere: the machine short of least
    ({"cpu": "4", "memory": "512Mi"},
     "the machine with the most room, kw-2, has cpu 1.9, memory 2.0Gi free: cpu 2.1 missing"),
    # kw-2 lacks a third of the memory, kw-1 a twelfth of the CPU: the smaller share wins
    ({"cpu": "1800m", "memory": "3Gi"},
     "the machine with the most room, kw-1, has cpu 1.65, memory 3.0Gi free: cpu 150m missing"),
    ({"memory": "8Gi"}, "the machine with the most room, kw-1, has memory 3.0Gi free: "
                        "memory 5.0Gi missing"),
    ({"cpu": "1", "memory": "1Gi"}, None),  # there is room: the scheduler's reason is another
])
def test_how_much_is_missing_on_the_machine_with_the_most_room(asked, expected):
    room = {"kw-1": {"cpu": 1.65, "memory": 3 * 2**30},
            "kw-2": {"cpu": 1.9, "memory": 2 * 2**30}}
    assert shortfall(asked, room) == expected


def test_no_machine_that_takes_pods_is_said():
    assert "each is cordoned or tainted" in shortfall({"cpu": "1"}, {})


class _Machines:
    """CoreV1Api as the provider's nodes() reads it: a node pending for lack of CPU."""

    def __init__(self, forbidden=False):
        self.forbidden, self.reads = forbidden, 0
        pending = _pod("Pending", None, scheduled="0/3 nodes are available: 2 Insufficient cpu.")
        pending.metadata.labels = {"aitestbed.node": "gc-poplar-02"}
        self.pods = [pending]

    def list_namespaced_pod(self, namespace, label_selector=None, _request_timeout=None):
        return NS(items=self.pods)

    def list_node(self, _request_timeout=None):
        self.reads += 1
        if self.forbidden:
            from kubernetes.client.exceptions import ApiException
            raise ApiException(status=403, reason="Forbidden")
        return NS(items=[
            NS(metadata=NS(name="kw-1"), spec=NS(unschedulable=None, taints=None),
               status=NS(allocatable={"cpu": "2", "memory": "4Gi"})),
            NS(metadata=NS(name="kcp"), spec=NS(unschedulable=None,
                                                taints=[NS(effect="NoSchedule")]),
               status=NS(allocatable={"cpu": "2", "memory": "4Gi"}))])

    def list_pod_for_all_namespaces(self, field_selector=None, _request_timeout=None):
        assert "status.phase!=Succeeded" in field_selector
        return NS(items=[NS(spec=NS(node_name="kw-1", containers=[_container("1", "1Gi")],
                                    init_containers=None)),
                         NS(spec=NS(node_name=None, containers=[_container("8")],
                                    init_containers=None))])


@pytest.mark.parametrize("forbidden", [False, True])
def test_a_node_without_room_says_how_much_is_missing_where_machines_can_be_read(forbidden):
    deployment = NS(metadata=NS(labels={"aitestbed.node": "gc-poplar-02"}),
                    spec=NS(replicas=1, template=NS(spec=NS(containers=[NS(
                        image="reg/ipu_node:1",
                        resources=NS(requests={"cpu": "2", "memory": "512Mi"}))]))))
    provider = KubernetesProvider()
    provider._api = NS(core=_Machines(forbidden), apps=NS(
        list_namespaced_deployment=lambda *a, **k: NS(items=[deployment])))
    problem = provider.nodes("ci")["gc-poplar-02"].problem
    assert problem.startswith("no machine can take it (it asks for cpu 250m, memory 512Mi): "
                              "0/3 nodes are available: 2 Insufficient cpu."), problem
    missing = "; the machine with the most room, kw-1, has cpu 1, memory 3.0Gi free: " \
              "cpu 1 missing"
    assert problem.endswith(missing) != forbidden, problem
    provider.nodes("ci")  # `wait` polls: the machines are not read again at once
    assert provider._api.core.reads == 1


def test_an_unbound_claim_is_named_with_its_class_and_the_last_warning():
    claim = NS(metadata=NS(name="tb-home"), spec=NS(storage_class_name="rwo-only"))

    def event(kind, message, at):
        return NS(type=kind, message=message, last_timestamp=None, event_time=None,
                  metadata=NS(creation_timestamp=NS(isoformat=lambda at=at: at)))

    events = [event("Warning", "old failure", "2026-01-01T00:00:01"),
              event("Normal", "waiting for a volume", "2026-01-01T00:00:03"),
              event("Warning", "failed to provision volume with StorageClass \"rwo-only\": "
                    "NodePath only supports ReadWriteOnce access modes", "2026-01-01T00:00:02")]
    problem = claim_problem(claim, events)
    assert problem.startswith("its volume claim tb-home of storage class rwo-only is not bound")
    assert "only supports ReadWriteOnce" in problem and "old failure" not in problem
    assert "--storage-class" in problem and "\n" not in problem
    # A Role that may not read events: the claim and its class are still named.
    default = NS(metadata=NS(name="tb-home"), spec=NS(storage_class_name=None))
    assert "of storage class the cluster's default is not bound:" in claim_problem(default, [])


def test_no_context_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(AitestbedError, match="no Kubernetes context to use"):
        KubernetesProvider().check()


def test_an_unreachable_api_server_is_one_line(tmp_path, monkeypatch):
    config = tmp_path / "kubeconfig"
    config.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    monkeypatch.setenv("KUBECONFIG", str(config))
    with pytest.raises(AitestbedError, match="cannot be reached"):
        KubernetesProvider().check()


def test_a_bad_namespace_is_refused_before_any_call():
    with pytest.raises(AitestbedError, match="bad namespace"):
        KubernetesProvider(namespace="Not_A_Label").check()


class _Storage:
    """StorageV1Api's two calls the provider makes, answering as a cluster would."""

    def __init__(self, classes=(), status=None):
        self.classes, self.status = list(classes), status

    def _raise(self):
        from kubernetes.client.exceptions import ApiException
        if self.status:
            raise ApiException(status=self.status, reason="refused")

    def read_storage_class(self, name, _request_timeout=None):
        self._raise()
        found = [c for c in self.classes if c.metadata.name == name]
        if not found:
            from kubernetes.client.exceptions import ApiException
            raise ApiException(status=404, reason="Not Found")
        return found[0]

    def list_storage_class(self, _request_timeout=None):
        self._raise()
        return NS(items=self.classes)


def _storage_class(name, default=False):
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else None
    return NS(metadata=NS(name=name, annotations=annotations))


@pytest.mark.parametrize("storage_class, classes, status, error", [
    ("nosuch", [_storage_class("shared", True)], None, "no storage class 'nosuch'"),
    ("shared", [_storage_class("shared")], None, None),
    (None, [_storage_class("shared")], None, "no default storage class"),
    (None, [_storage_class("shared", True)], None, None),
    ("nosuch", [], 403, None),  # a namespaced Role cannot read classes: claims tell later
])
def test_the_storage_class_is_checked_before_anything_is_made(storage_class, classes, status,
                                                              error):
    provider = KubernetesProvider(storage_class=storage_class)
    provider._api = NS(storage=_Storage(classes, status))
    if error:
        with pytest.raises(AitestbedError, match=error) as raised:
            provider._check_storage_class()
        assert "--storage-class" in str(raised.value)
    else:
        provider._check_storage_class()


def test_a_token_kubeconfig_sends_its_bearer_token(tmp_path):
    """A service account's kubeconfig (a token, no certificate) must reach the API server
    as that account: kubernetes 36.0.0 sent no token (kubernetes-client/python#2582), so
    every call was system:anonymous's."""
    config = tmp_path / "kubeconfig"
    config.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: sa, user: {token: the-token}}]
contexts: [{name: sa, context: {cluster: c, user: sa}}]
current-context: sa
""")
    provider = KubernetesProvider(kubeconfig=str(config))
    headers: dict = {}
    provider.api.core.api_client.update_params_for_auth(headers, [], ["BearerToken"])
    assert headers.get("authorization") == "Bearer the-token"


@pytest.mark.parametrize("status, reason, gone", [
    (500, "error dialing backend", True), (404, "not found", True), (403, "forbidden", False),
    # kubernetes 35's websocket: status 0, the handshake's HTTP status in the reason
    (0, "Handshake status 500 Internal Server Error: error dialing backend", True),
    (0, "Handshake status 403 Forbidden", False)])
def test_exec_on_a_machine_the_api_server_cannot_reach_is_a_node_gone(monkeypatch, status,
                                                                       reason, gone):
    """A stopped machine's pod still listed Running: exec's handshake gets a 500 ("error
    dialing backend"), which `wait` must take as a node not ready, not as a refusal."""
    from aitestbed.host.provider.base import NodeGone
    from kubernetes import stream as stream_module
    from kubernetes.client.exceptions import ApiException

    def refused(*args, **kwargs):
        raise ApiException(status=status, reason=reason)

    provider = KubernetesProvider()
    monkeypatch.setattr(provider, "_running_pod", lambda cluster, node: "pod-1")
    monkeypatch.setattr(provider, "_exec_api", lambda: NS(connect_get_namespaced_pod_exec=None))
    monkeypatch.setattr(stream_module, "stream", refused)
    with pytest.raises(NodeGone if gone else AitestbedError):
        provider._stream("c", "gc-poplar-02", ["true"])


def test_a_problem_counts_only_once_it_lasted_without_a_break():
    from aitestbed.host.provider.base import PROBLEM_LASTS, Lasting
    now = [0.0]
    lasting = Lasting(clock=lambda: now[0])
    assert not lasting.lasted("n1", "no machine can take it")
    now[0] = PROBLEM_LASTS - 1
    assert not lasting.lasted("n1", "no machine can take it")
    assert not lasting.lasted("n1", None)  # it passed: the count starts over
    assert not lasting.lasted("n1", "no machine can take it")
    now[0] += PROBLEM_LASTS
    assert lasting.lasted("n1", "no machine can take it")
    assert not lasting.lasted("n2", "its image cannot be pulled")  # each node its own
