"""Cerebras Wafer-Scale Cluster (CS-2; CS-3 on the alcf-2026 profile): the registry's entry
(host/systems/__init__.py says what one holds).

Its room is aitestbed.cerebras; its roles k8s_control_plane, wsjob_appliance,
cerebras_node and cerebras_login; its inventory group cerebras_system. Its jobs are the
appliance's wsjobs (the Kubernetes API on the management node): a user runs `python
run.py CSX` on a login node, and the record and credentials below are what its nodes
read at start (cerebras/node_setup.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from aitestbed.cerebras import guide
from aitestbed.cerebras.cluster_record import ApplianceCluster
from aitestbed.cerebras.cs3 import inventory_settings
from aitestbed.cerebras.wsjob import release_tuple
from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import project_root
from aitestbed.host.sdk_artifacts import copy_mnist_source, fresh_output, role_defaults
from aitestbed.host.systems import cerebras_pki
from aitestbed.host.systems.model import Artifact, RunTarget, System
from aitestbed.host.wheels import build_wheel

if TYPE_CHECKING:
    from aitestbed.host.inventory import Topology
    from aitestbed.host.state import ClusterState

# The system's site directories, after the venv's own (as --system-site-packages would
# add them): PyTorch, NumPy, PyYAML and the emulator runtime (aitestbed-runtime.pth).
SYSTEM_PACKAGES_PTH = (  # one line, run by site.py (no comprehension: it sees no `site`)
    "import site; list(map(site.addsitedir, ('/usr/local/lib/python3.11/dist-packages', "
    "'/usr/lib/python3/dist-packages')))\n")



def build_kubernetes(root: Path | None = None) -> Path:
    """build/kubernetes: kube-apiserver and kubectl, built once from the Go module and cached."""
    root = root or project_root()
    out = fresh_output(root, "kubernetes")
    version = role_defaults(root, "k8s_control_plane")["k8s_control_plane_version"]
    script = root / "scripts" / "build-kube-binaries.sh"
    env = {"AITESTBED_PYTHON": sys.executable, **os.environ}  # for ensure-base-image.sh
    if subprocess.run(["bash", str(script), version, str(out)], env=env,
                      check=False).returncode:
        raise AitestbedError(f"could not build kube-apiserver {version} (see above)")
    return out


def build_cerebras(root: Path | None = None) -> Path:
    """build/cerebras: each release's cerebras_pytorch wheel, and the MNIST source.

    The wheel also holds cerebras_appliance, the client library cerebras_pytorch is
    built on (the vendor ships it as a second wheel that cerebras_pytorch requires;
    one wheel keeps `pip install cerebras_pytorch==<release>` and the roles as they are).
    From release 2.10 it also holds the `cerebras.pytorch` and `cerebras.appliance`
    names, and a .pth that shows the venv the system's PyTorch: the docs make that
    venv without the system's packages (`/usr/bin/python3.11 -m venv`) and PyTorch
    cannot be downloaded inside the cluster.
    """
    root = root or project_root()
    out = fresh_output(root, "cerebras")
    for release in role_defaults(root, "cerebras_node")["cerebras_node_releases"]:
        version = release["version"]
        packages = {"cerebras_pytorch": root / "emulator" / "cerebras_pytorch",
                    "cerebras_appliance": root / "emulator" / "cerebras_appliance"}
        overrides = {f"{package}/_version.py":
                     f'"""The Cerebras software release this {package} belongs '
                     f'to."""\n\n__version__ = "{version}"\n'
                     for package in ("cerebras_pytorch", "cerebras_appliance")}
        requires = ["torch", "pyyaml"]
        if release_tuple(version) >= (2, 10):
            packages["cerebras"] = root / "emulator" / "cerebras"
            overrides["cerebras_pytorch-system-packages.pth"] = SYSTEM_PACKAGES_PTH
            requires = []
        build_wheel(out, release["wheel"], packages,
                    summary=f"cerebras_pytorch {version} for the emulated Cerebras cluster "
                            "(aitestbed)",
                    requires=requires, overrides=overrides)
    copy_mnist_source(root, out)
    return out


def cluster_record(topology: Topology) -> ApplianceCluster | None:
    """The appliance's record, from the inventory (None without a management node)."""
    managers = [n for n in topology.nodes if "kube-apiserver" in n.services]
    if not managers:
        return None
    manager = managers[0]
    try:
        settings = inventory_settings(topology.hostvars.get(manager.name, {}))
    except ValueError as err:
        raise AitestbedError(f"inventory: {err}") from None
    return ApplianceCluster(server=f"https://{manager.name}:6443",
                            management_node=manager.name,
                            systems=[n.name for n in topology.nodes if n.node_class == "cs2"],
                            **settings)


def publish(state: ClusterState, topology: Topology, accounts: dict) -> None:
    """The appliance's API: its record, CA, server and client certificates (cerebras_pki), each
    active Cerebras user's own."""
    record = cluster_record(topology)
    if record is None:
        return
    ca = cerebras_pki.ClusterCA(state.root / "kubernetes", state.common_dir / "kubernetes")
    state.write(state.common_dir / "kubernetes" / "cluster.json", record.to_json())
    for node in topology.nodes:
        directory = state.node_dir(node.name) / "kubernetes"
        if node.name == record.management_node:
            ca.server(directory, node.dns_names)
            # etcd takes client certificates from a CA of its own, which signs the API
            # server's alone: a certificate of the cluster's CA (every user has one) is
            # no key to it (D01).
            etcd_ca = cerebras_pki.ClusterCA(state.root / "kubernetes" / "etcd",
                                             directory / "etcd", "aitestbed-etcd-ca")
            etcd_ca.server(directory / "etcd", ["localhost"], stem="server")
            etcd_ca.client(directory / "etcd", "apiserver-client", "kube-apiserver",
                           cerebras_pki.ADMIN_GROUP)
            ca.client(directory, "admin", "aitestbed-admin", cerebras_pki.ADMIN_GROUP)
            ca.client(directory, "controller", "wsjob-controller", cerebras_pki.APPLIANCE_GROUP)
            cerebras_pki.service_account_keys(directory)
        if "wsjob-agent" in node.services:
            ca.client(directory, "agent", f"wsjob-agent:{node.name}",
                      cerebras_pki.APPLIANCE_GROUP)
    for user in accounts["users"]:
        if user["active"] and SYSTEM.name in user["groups"]:
            ca.client(state.common_dir / "users" / user["name"], "kube", user["name"],
                      cerebras_pki.USERS_GROUP)


def _logins(nodes):
    return [n for n in nodes if n.node_class == "login"]


SYSTEM = System(
    name="cerebras",
    title="Cerebras Wafer-Scale Cluster",
    node_classes=("login", "cs_mgmt", "cs2"),
    scheduler="wsjob",
    artifacts=(
        Artifact("the cerebras_pytorch wheels and the MNIST source",
                 lambda ctx: build_cerebras(ctx.root)),
        Artifact("kube-apiserver and kubectl", lambda ctx: build_kubernetes(ctx.root),
                 "built once from the k8s.io/kubernetes Go module, then cached"),
    ),
    run_targets=(RunTarget("cerebras", "cerebras", "wsjob",
                           "Cerebras (bash on its login node: `python run.py CSX`)", _logins),),
    publish=publish,
    guide=guide,
)
