"""The Kubernetes provider (`aitestbed up --provider kubernetes`) on the session's test
cluster (conftest's kube_test_cluster: two workers, a registry, a ReadWriteMany class).

The Graphcore mini subset runs as pods made from the class images pushed to the
cluster's registry (conftest's mini_testbed, the same that brings up the session's
Docker testbed). The provider-neutral tests take either provider (`either`): a passcode
login, `sinfo`, `srun --ipus=1`, an `sbatch` job, the two-step login exercise and
`aitestbed run`, on Docker and on Kubernetes alike. Then what only Kubernetes has: the
pods are unprivileged, with no host path, the state files as Secrets; a worker is
stopped and every node comes back on the other with the same name, /home is kept, and
Slurm ends the job that ran there as Slurm does (NODE_FAIL); and bad input (a registry
that refuses the push, a Role without a verb, a storage class the cluster lacks, nodes
no machine has room for) is one line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aitestbed.host.driver import cli_argv

from .conftest import mini_testbed

pytestmark = [pytest.mark.cluster, pytest.mark.kube,
              pytest.mark.slow("a testbed on a Kubernetes test cluster: binaries built from Go, "
                               "the class images pushed, a lost worker")]

LOGIN, NODE = "gc-login-01", "gc-poplar-02"
NODES = {"gc-login-01", "gc-slurmctld", "gc-poplar-01", "gc-poplar-02"}


@pytest.fixture(scope="module")
def kcluster(kube_test_cluster):
    """The Graphcore mini subset on the Kubernetes provider (conftest's mini_testbed)."""
    with mini_testbed("kubernetes", kube=kube_test_cluster, systems="graphcore",
                      timeout=900) as cluster:
        yield cluster


@pytest.fixture(scope="module", params=["docker", "kubernetes"])
def either(request):
    """The same tests on each provider: the session's Docker testbed, this module's
    Kubernetes one (the Graphcore subset of the same mini profile)."""
    return request.getfixturevalue("cluster" if request.param == "docker" else "kcluster")


def kubectl_json(kube, *args: str) -> dict:
    return json.loads(kube.kubectl("-n", "aitestbed", *args, "-o", "json"))


def pods(kube, cluster: str) -> list[dict]:
    return [p for p in kubectl_json(kube, "get", "pods", "-l",
                                    f"aitestbed.cluster={cluster}")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def test_every_node_is_a_pod_with_the_guides_hostname(kcluster, kube_test_cluster):
    live = pods(kube_test_cluster, kcluster.name)
    assert {p["spec"]["hostname"] for p in live} == NODES
    assert all(p["status"]["phase"] == "Running" for p in live)
    for node in sorted(NODES):
        shell = kcluster.cli("shell", node, "--", "hostname; getent hosts gc-slurmctld vipu")
        lines = shell.stdout.splitlines()
        assert lines[0] == node, shell.stdout
        assert len(lines) == 3, shell.stdout  # the other nodes' names and aliases resolve
    status = kcluster.cli("status")
    assert "4/4 nodes ready" in status.stdout + status.stderr
    record = json.loads(kcluster.state.record_path.read_text())
    assert record["provider"] == "kubernetes"
    assert record["provider_options"]["kubeconfig"] == kube_test_cluster.info["kubeconfig"]


def test_login_with_a_passcode_then_slurm(either):
    # Idle once the nodes a test before left are free again (on the session's testbed).
    deadline = time.monotonic() + 60
    while True:
        rc, out = either.run(LOGIN, "sinfo -h -p p64 -o '%P %a %D %T'")
        if out.split() == ["p64*", "up", "2", "idle"] or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert rc == 0 and out.split() == ["p64*", "up", "2", "idle"], out
    rc, out = either.run(LOGIN, "srun --ipus=1 printenv IPUOF_VIPU_API_PARTITION_ID")
    assert rc == 0 and out.strip().startswith("slurm_"), out
    rc, out = either.run(LOGIN, "cd ~ && printf '#!/bin/bash\\n#SBATCH --ipus=1\\nhostname\\n'"
                                " > kube.sh && sbatch --wait -o kube.out kube.sh && cat kube.out")
    assert rc == 0 and out.splitlines()[-1] in ("gc-poplar-01", "gc-poplar-02"), out


def test_the_two_step_login_exercise_passes(either):
    rc, out = either.run(LOGIN, f"ssh {NODE} hostname")
    assert rc == 0 and out.strip() == NODE, out
    result = either.cli("exercise", "check", "graphcore-login", check=False)
    assert result.returncode == 0, result.stdout
    assert f"[sshd on {NODE}]" in result.stdout


def test_aitestbed_run_submits_and_collects(either, tmp_path):
    (tmp_path / "job.sh").write_text("#!/bin/bash\n#SBATCH --ipus=1\necho from-k8s > r.txt\n")
    result = subprocess.run(
        cli_argv(either.name, "run", "--system", "graphcore", "-C", str(tmp_path),
                 "-o", str(tmp_path / "out"), "job.sh"),
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "job.sh" / "r.txt").read_text() == "from-k8s\n"


def test_pods_are_unprivileged_and_secrets_stay_secrets(kcluster, kube_test_cluster):
    kube = kube_test_cluster
    selector = f"aitestbed.cluster={kcluster.name}"
    for deployment in kubectl_json(kube, "get", "deployments", "-l", selector)["items"]:
        spec = deployment["spec"]["template"]["spec"]
        assert not spec.get("hostNetwork") and not spec.get("hostPID")
        assert not any("hostPath" in v for v in spec["volumes"])
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"] + spec["initContainers"]:
            context = container.get("securityContext", {})
            assert context.get("privileged") is False
            assert not context.get("capabilities", {}).get("add")
            assert container["resources"]["requests"]["cpu"]
        secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        assert secrets == {f"{kcluster.name}-cluster-files",
                           f"{kcluster.name}-{deployment['metadata']['name']}-files"}
    assert kubectl_json(kube, "get", "configmaps", "-l", selector)["items"] == []
    policies = {p["metadata"]["name"] for p in
                kubectl_json(kube, "get", "networkpolicies", "-l", selector)["items"]}
    assert policies == {f"{kcluster.name}-nodes", f"{kcluster.name}-ssh"}
    claims = kubectl_json(kube, "get", "pvc", "-l", selector)["items"]
    assert {c["spec"]["accessModes"][0] for c in claims} == {"ReadWriteMany"}


def test_a_learner_cannot_read_the_nodes_secrets(kcluster):
    """As the attacker, a learner on the login pod: the munge key and the host key the
    init container unpacked are root's, the Secrets themselves are not mounted in the
    node's container, and the pod holds no Kubernetes credentials."""
    rc, out = kcluster.run(LOGIN, "cat /etc/aitestbed/cluster/munge.key")
    assert rc != 0 and "Permission denied" in out, out
    rc, out = kcluster.run(LOGIN, "cat /etc/aitestbed/node/ssh_host_ed25519_key")
    assert rc != 0 and "Permission denied" in out, out
    rc, out = kcluster.run(LOGIN, "ls /.aitestbed /var/run/secrets/kubernetes.io")
    assert rc != 0 and out.count("No such file or directory") == 2, out


def test_a_lost_worker_brings_every_node_back_on_the_other(kcluster, kube_test_cluster):
    kube = kube_test_cluster
    placed = {p["spec"]["hostname"]: p["spec"]["nodeName"] for p in pods(kube, kcluster.name)}
    if placed[NODE] == placed["gc-slurmctld"]:
        # The harder case, made certain: the controller stays up while the node comes
        # back at a new address (a controller that cached the old one set it DOWN again
        # and again). The node's pod is first moved off the controller's machine.
        kube.kubectl("cordon", placed[NODE])
        try:
            kube.kubectl("-n", "aitestbed", "delete", "pod", "-l",
                         f"aitestbed.cluster={kcluster.name},aitestbed.node={NODE}",
                         timeout=180)
            kcluster.cli("wait", "--timeout", "180", timeout=240)
        finally:
            kube.kubectl("uncordon", placed[NODE])
        # The cluster's DNS answers with the new address once its cache of the old one
        # expires (CoreDNS's ttl: 5 s on the test cluster, 30 s as kubeadm sets it).
        deadline = time.monotonic() + 60
        while True:
            rc, out = kcluster.run(LOGIN, f"srun -w {NODE} hostname")
            if rc == 0 or time.monotonic() > deadline:
                break
            time.sleep(3)
        assert rc == 0 and out.strip().splitlines()[-1] == NODE, out
    token = uuid.uuid4().hex
    rc, out = kcluster.run(LOGIN, f"echo {token} > ~/kept.txt && sbatch --parsable --ipus=1 "
                                  f"-w {NODE} -o /dev/null --wrap 'sleep 900'")
    assert rc == 0, out
    job = out.strip().splitlines()[-1]
    # Running, and in the controller's saved state (slurmctld saves within seconds of a
    # change; a controller lost before that forgets the job, as Slurm does).
    for _ in range(60):
        rc, out = kcluster.run(LOGIN, f"squeue -h -j {job} -o %T")
        if out.strip() == "RUNNING":
            break
        time.sleep(1)
    assert out.strip() == "RUNNING", out
    running_at = int(kcluster.cli("shell", "gc-slurmctld", "--", "date +%s").stdout.split()[-1])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        saved = kcluster.cli("shell", "gc-slurmctld", "--",
                             "stat -c %Y /var/spool/slurmctld/job_state").stdout.split()
        if saved and int(saved[-1]) > running_at:
            break
        time.sleep(1)
    before = {p["spec"]["hostname"]: p["spec"]["nodeName"] for p in pods(kube, kcluster.name)}
    worker = before[NODE]
    kube_worker = next(n for n in kube.info["nodes"] if n == worker)
    started = time.monotonic()
    subprocess.run(["docker", "stop", "-t", "1", kube_worker], check=True, capture_output=True)
    try:
        time.sleep(2)  # the health checks still reach it for a moment
        waited = kcluster.cli("wait", "--timeout", "240", timeout=300)
        after = {p["spec"]["hostname"]: p["spec"]["nodeName"]
                 for p in pods(kube, kcluster.name)}
        assert set(after) == NODES and worker not in after.values(), (before, after, waited)
        print(f"every node ready {time.monotonic() - started:.0f} s after {worker} stopped")
        # Without --ssh-address the ssh config names the machine the login pod ran on:
        # when that machine is the lost one, `up` points it at the new one (docs).
        kcluster.cli("up", timeout=600)
        kcluster.log_out(LOGIN)  # the login node may have moved: a new passcode login
        login = kcluster.log_in(LOGIN)
        assert login.returncode == 0, login.stderr
        rc, out = kcluster.run(LOGIN, "cat ~/kept.txt")
        assert rc == 0 and out.strip() == token, out
        # Slurm ends it when the node's new slurmd registers without it (the controller
        # may have moved too: it reads its state back from its claim).
        deadline, state = time.monotonic() + 180, ""
        while time.monotonic() < deadline:
            rc, out = kcluster.run(LOGIN, f"scontrol -o show job {job}")
            found = re.search(r"JobState=(\S+)", out)
            state = found.group(1) if found else ""
            if state and state not in ("RUNNING", "COMPLETING", "CONFIGURING"):
                break
            time.sleep(5)
        assert state == "NODE_FAIL", out
        rc, out = kcluster.run(LOGIN, "sinfo -h -N -o '%N %T'")
        assert rc == 0 and sorted(out.split()) == sorted(
            ["gc-poplar-01", "idle", "gc-poplar-02", "idle"]), out
    finally:
        subprocess.run(["docker", "start", kube_worker], check=False, capture_output=True)
        kube.kubectl("wait", "--for=condition=Ready", f"node/{kube_worker}", "--timeout=120s",
                     check=False, timeout=150)


def test_down_scales_to_zero_keeping_the_volumes_then_up_and_login(kcluster,
                                                                    kube_test_cluster):
    """`down`: every Deployment at zero replicas, no pod left, every claim kept; `up`
    brings the nodes back with /home as it was; `passcode` and `login` as on Docker."""
    kube, selector = kube_test_cluster, f"aitestbed.cluster={kcluster.name}"
    token = uuid.uuid4().hex
    rc, out = kcluster.run(LOGIN, f"echo {token} > ~/down.txt")
    assert rc == 0, out
    claims = {c["metadata"]["name"] for c in kubectl_json(kube, "get", "pvc", "-l",
                                                          selector)["items"]}
    kcluster.log_out(LOGIN)
    down = kcluster.cli("down", timeout=300)
    assert "stopped (4 nodes)" in down.stdout + down.stderr, down.stdout + down.stderr
    deployments = kubectl_json(kube, "get", "deployments", "-l", selector)["items"]
    assert {d["spec"]["template"]["spec"]["hostname"] for d in deployments} == NODES
    assert all(d["spec"]["replicas"] == 0 for d in deployments)
    assert pods(kube, kcluster.name) == []
    kept = kubectl_json(kube, "get", "pvc", "-l", selector)["items"]
    assert {c["metadata"]["name"] for c in kept} == claims
    assert all(c["status"]["phase"] == "Bound" for c in kept)

    kcluster.cli("up", timeout=600)
    code = kcluster.cli("passcode").stdout
    assert re.search(r"\b\d{8}\b", code), code
    login = kcluster.cli("login", LOGIN, check=False)
    assert login.returncode == 0, login.stderr
    assert kcluster.log_in(LOGIN).returncode == 0
    rc, out = kcluster.run(LOGIN, "cat ~/down.txt")
    assert rc == 0 and out.strip() == token, out


def test_kubeconfig_is_kept_and_options_are_checked(kcluster):
    """Later commands use the kubeconfig the cluster was made with; another provider or
    other options for the same name are refused in one line."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    status = subprocess.run(cli_argv(kcluster.name, "status"), capture_output=True,
                            text=True, env=env, timeout=120, check=False)
    assert status.returncode == 0 and "ready" in status.stdout, status.stderr
    other = kcluster.cli("up", "--provider", "docker", check=False)
    assert other.returncode != 0 and "runs on the kubernetes provider" in other.stderr
    assert "Traceback" not in other.stderr
    moved = kcluster.cli("up", "--provider", "kubernetes", "--namespace", "elsewhere",
                         check=False)
    assert moved.returncode != 0 and "other provider options" in moved.stderr, moved.stderr


def test_a_registry_that_refuses_the_push_is_one_line(kube_test_cluster):
    """Nothing is made in the cluster, and the next `up` may name another registry."""
    kube = kube_test_cluster
    name = f"k8s-bad-{uuid.uuid4().hex[:4]}"
    result = subprocess.run(
        cli_argv(name, "up", "--profile", "mini", "--systems", "graphcore", "--provider",
                        "kubernetes", "--kubeconfig", kube.info["kubeconfig"], "--namespace",
                        "bad-push", "--registry", "127.0.0.1:9/aitestbed"),
        capture_output=True, text=True, timeout=600, check=False)
    try:
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert "registry 127.0.0.1:9/aitestbed: cannot push" in result.stderr
        assert "it is unreachable" in result.stderr
        made = kube.kubectl("-n", "bad-push", "get", "deployments,pods", "-o", "name",
                            check=False)
        assert made.strip() == "", made
    finally:
        subprocess.run(cli_argv(name, "destroy"), capture_output=True, timeout=300,
                       check=False)


def _service_account(kube, ns: str, tmp_path, role: str) -> str:
    """A service account in namespace ns bound to the Role given as YAML; its token's
    kubeconfig (the caller a centre gives a workshop's operator)."""
    kube.kubectl("-n", ns, "create", "serviceaccount", "learner")
    kube.kubectl("-n", ns, "apply", "-f", "-", stdin=role)
    kube.kubectl("-n", ns, "create", "rolebinding", "testbed", "--role=aitestbed",
                 f"--serviceaccount={ns}:learner")
    token = kube.kubectl("-n", ns, "create", "token", "learner").strip()
    server = json.loads(kube.kubectl("config", "view", "--raw", "-o", "json"))[
        "clusters"][0]["cluster"]
    config = tmp_path / f"kubeconfig-{ns}"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa",
                                                "namespace": ns}}]}))
    return str(config)


def _up(name: str, kube, *args: str, timeout: float = 300,
        profile: tuple[str, ...] = ("--profile", "mini", "--systems", "graphcore")
        ) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            cli_argv(name, "up", *profile, "--provider", "kubernetes", "--registry",
                     f"{kube.info['registry']}/aitestbed", *args),
            capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        subprocess.run(cli_argv(name, "destroy"), capture_output=True, timeout=120,
                       check=False)


def test_a_role_without_a_verb_is_named(kube_test_cluster, tmp_path):
    """A namespace whose Role lets the caller read pods but not list deployments: `up`
    names the verb and the resource, before anything is made."""
    kube, ns = kube_test_cluster, f"role-{uuid.uuid4().hex[:4]}"
    kube.kubectl("create", "namespace", ns)
    try:
        config = _service_account(kube, ns, tmp_path, """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: aitestbed}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
""")
        result = _up(f"k8s-role-{uuid.uuid4().hex[:4]}", kube, "--kubeconfig", config,
                     "--namespace", ns)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert f"namespace {ns}: not allowed to list deployments" in result.stderr, \
            result.stderr
        assert "docs/kubernetes.md" in result.stderr
    finally:
        kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _docs_role_up(kube, tmp) -> subprocess.CompletedProcess:
    """A service account bound to the Role copied from docs/kubernetes.md runs `up` with a
    storage class the cluster lacks (the Role may not read classes: they are the cluster's)."""
    docs = (Path(__file__).parents[2] / "docs" / "kubernetes.md").read_text()
    role = re.search(r"```yaml\n(apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n.*?)```",
                     docs, re.S).group(1)
    ns = f"sc-{uuid.uuid4().hex[:4]}"
    kube.kubectl("create", "namespace", ns)
    try:
        config = _service_account(kube, ns, tmp,
                                  role.replace("namespace: aitestbed", f"namespace: {ns}"))
        return _up(f"k8s-sc-{uuid.uuid4().hex[:4]}", kube, "--kubeconfig", config,
                   "--namespace", ns, "--storage-class", "nosuch", "--timeout", "180")
    finally:
        kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _too_big_up(kube, tmp) -> subprocess.CompletedProcess:
    """An inventory whose nodes ask for more CPU than any worker has."""
    inventory = tmp / "too-big.yml"
    asks = '{kubernetes_resources: {cpu: "64", memory: 256Mi}}'
    inventory.write_text(f"""all:
  children:
    graphcore_system:
      children:
        graphcore_login:
          hosts:
            gc-login-01: {asks}
        graphcore_slurm:
          hosts:
            gc-slurmctld: {asks}
        graphcore_ipu:
          hosts:
            gc-poplar-01: {asks}
""")
    name = f"k8s-big-{uuid.uuid4().hex[:4]}"
    try:
        return _up(name, kube, "--kubeconfig", kube.info["kubeconfig"], "--namespace", name,
                   "--timeout", "120", profile=("--profile", str(inventory)))
    finally:
        kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def stuck(kube_test_cluster, tmp_path_factory):
    """Two `up`s whose nodes stay Pending until `up` gives up (15 s of a lasting
    problem), run at once: {"class": the docs' Role with a class the cluster lacks,
    "room": nodes no machine has room for}."""
    kube, tmp = kube_test_cluster, tmp_path_factory.mktemp("stuck")
    with ThreadPoolExecutor(2) as pool:
        runs = {"class": pool.submit(_docs_role_up, kube, tmp),
                "room": pool.submit(_too_big_up, kube, tmp)}
        return {what: run.result() for what, run in runs.items()}


def test_a_storage_class_the_cluster_lacks_is_named(kube_test_cluster, stuck):
    """`--storage-class` naming a class the cluster lacks: refused before anything is made
    by a caller that may read storage classes; with the Role of docs/kubernetes.md (which
    may not), `up` runs as far as the nodes, whose claim stays unbound, and names the
    claim, its class and the provisioner's words."""
    kube = kube_test_cluster
    absent = f"sc-{uuid.uuid4().hex[:4]}"
    result = _up(f"k8s-sc-{uuid.uuid4().hex[:4]}", kube, "--kubeconfig",
                 kube.info["kubeconfig"], "--namespace", absent, "--storage-class", "nosuch")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "the cluster has no storage class 'nosuch'" in result.stderr, result.stderr
    assert not kube.kubectl("get", "namespace", absent, check=False).strip()  # nothing made

    result = stuck["class"]
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert re.search(r"its volume claim \S+ of storage class nosuch is not bound "
                     r"\(storageclass\.storage\.k8s\.io \"nosuch\" not found\)",
                     result.stderr), result.stderr


def test_nodes_no_machine_has_room_for_say_how_much_is_missing(stuck):
    """`up` stops once that has lasted, naming the node, what it asks, the scheduler's
    reason and how much the machine with the most room lacks (the admin may read
    machines)."""
    result = stuck["room"]
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert re.search(r"gc-login-01: no machine can take it \(it asks for cpu 64, memory "
                     r"256Mi\): 0/\d+ nodes are available: .*Insufficient cpu.*; the machine "
                     r"with the most room, \S+, has cpu [\d.]+m?, memory [\d.]+[MG]i free: "
                     r"cpu [\d.]+ missing", result.stderr), result.stderr
