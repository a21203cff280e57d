"""Per-cluster set-up of a Cerebras node at start (a node-init hook of the appliance roles).

What it installs comes from the cluster's state directory (its record: cluster_record;
the credentials: aitestbed.host.systems.cerebras_pki):
  management node  /etc/kubernetes/pki (API server; etcd/: etcd's CA and certificates),
                   admin/ and controller/
                   credentials, /root/.kube/config, /etc/cerebras/controller.json
  agent nodes      /etc/kubernetes/agent/
  /n1 holders      /n1/wsjob and its workdir/<namespace> owned by root (the agent, root,
                   makes each job's dir there: the workloads must not be able to
                   swap it for a link), compile_root owned by the service user,
                   users/ (root's; release 2.10's per-user compile dirs, made by the agent)
  login nodes      /opt/cerebras/config_v2, each user's credentials in
                   /etc/cerebras/credentials/<user>/ (that user only), and pip's
                   configuration (the Cerebras wheels; PyPI is out of reach)
  every node       /etc/cerebras/cluster.json (release, system model, systems, support
                   servers), links /software/cerebras/{python3.8,dataset} into the image
                   (for Release 2.10: the current docs' dataset tree, and
                   /software/datasets)
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path

from aitestbed.cerebras import wsjob
from aitestbed.cerebras.cluster_record import ApplianceCluster
from aitestbed.cerebras.config import CLUSTER_SETTINGS, CREDENTIALS_ROOT, USERNODE_CONFIG
from aitestbed.cerebras.kubeapi import NAMESPACE
from aitestbed.cerebras.wsjob import COMPILE_ROOT, USER_COMPILE_ROOT, WORKDIR_ROOT
from aitestbed.node.config import ACCOUNTS, CLUSTER_DIR, NODE_DIR, NodeConfig
from aitestbed.node.init import install_file

SERVICE_USER = "wsjob"
SOFTWARE_SOURCE = Path("/opt/cerebras/software")
SOFTWARE = Path("/software/cerebras")
DATASETS = Path("/software/datasets")
PIP_CONF = """# Managed by aitestbed: PyPI cannot be reached from inside the cluster, so pip
# installs from the Cerebras wheels (`pip install cerebras_pytorch==2.1.1`).
[global]
no-index = true
find-links = /opt/cerebras/wheels
"""
KUBERNETES = Path("/etc/kubernetes")


def credentials_dir(dest: Path, server: str, cert: Path, key: Path,
                    uid: int = 0, gid: int = 0) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    install_file(CLUSTER_DIR / "kubernetes" / "ca.crt", dest / "ca.crt", 0o444)
    install_file(server + "\n", dest / "server", 0o444)
    install_file(cert, dest / "client.crt", 0o400, uid, gid)
    install_file(key, dest / "client.key", 0o400, uid, gid)
    shutil.chown(dest, uid, gid)
    dest.chmod(0o500)


def kubeconfig(directory: Path) -> str:
    server = (directory / "server").read_text().strip()
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: cerebras1\n  cluster:\n    server: {server}\n"
        f"    certificate-authority: {directory}/ca.crt\n"
        f"users:\n- name: admin\n  user:\n    client-certificate: {directory}/client.crt\n"
        f"    client-key: {directory}/client.key\n"
        "contexts:\n- name: cerebras1\n  context:\n    cluster: cerebras1\n    user: admin\n"
        f"    namespace: {NAMESPACE}\ncurrent-context: cerebras1\n")


def management_node(cluster: ApplianceCluster, own: Path) -> None:
    pki = KUBERNETES / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    install_file(CLUSTER_DIR / "kubernetes" / "ca.crt", pki / "ca.crt", 0o444)
    for name in ("apiserver.crt", "apiserver.key", "sa.key", "sa.pub"):
        install_file(own / name, pki / name, 0o600)
    # etcd's own CA, its serving certificate and the API server's client certificate:
    # root's alone (etcd and kube-apiserver run as root; workloads never do).
    etcd = pki / "etcd"
    etcd.mkdir(mode=0o700, exist_ok=True)
    etcd.chmod(0o700)
    install_file(own / "etcd" / "ca.crt", etcd / "ca.crt", 0o600)
    for name in ("server.crt", "server.key", "apiserver-client.crt", "apiserver-client.key"):
        install_file(own / "etcd" / name, etcd / name, 0o600)
    for identity in ("admin", "controller"):
        credentials_dir(KUBERNETES / identity, "https://127.0.0.1:6443",
                        own / f"{identity}.crt", own / f"{identity}.key")
    Path("/root/.kube").mkdir(mode=0o700, exist_ok=True)
    install_file(kubeconfig(KUBERNETES / "admin"), Path("/root/.kube/config"), 0o600)
    Path("/etc/cerebras").mkdir(exist_ok=True)
    install_file(json.dumps({"systems": cluster.systems,
                             "management_node": cluster.management_node,
                             "max_execute": cluster.max_execute}, indent=2) + "\n",
                 Path("/etc/cerebras/controller.json"), 0o644)


def appliance_dirs() -> None:
    service = pwd.getpwnam(SERVICE_USER)
    workdirs, compiles = Path(WORKDIR_ROOT) / NAMESPACE, Path(COMPILE_ROOT)
    for path in (workdirs, compiles):
        path.mkdir(parents=True, exist_ok=True)
    for part in (workdirs, workdirs.parent, workdirs.parent.parent):  # up to /n1/wsjob
        if part.is_symlink() or not part.is_dir():
            raise SystemExit(f"node-setup: {part} is not a directory")
        os.chown(part, 0, 0, follow_symlinks=False)
        part.chmod(0o755)
    os.chown(compiles, service.pw_uid, service.pw_gid, follow_symlinks=False)
    users = Path(USER_COMPILE_ROOT)  # release 2.10: each user's compiles, made by the agent
    users.mkdir(exist_ok=True)
    if users.is_symlink() or not users.is_dir():
        raise SystemExit(f"node-setup: {users} is not a directory")
    os.chown(users, 0, 0, follow_symlinks=False)
    users.chmod(0o755)


def login_node(cluster: ApplianceCluster, accounts: dict) -> None:
    ca = Path("/opt/cerebras/certs/ca.crt")
    ca.parent.mkdir(parents=True, exist_ok=True)
    install_file(CLUSTER_DIR / "kubernetes" / "ca.crt", ca, 0o444)
    install_file(json.dumps({
        "clusters": [{"name": "cerebras1", "server": cluster.server,
                      "certificateAuthority": str(ca)}],
        "contexts": [{"name": "cerebras1", "cluster": "cerebras1", "namespace": NAMESPACE}],
        "currentContext": "cerebras1",
    }, indent=2) + "\n", USERNODE_CONFIG, 0o644)
    install_file(PIP_CONF, Path("/etc/pip.conf"), 0o644)
    CREDENTIALS_ROOT.mkdir(parents=True, exist_ok=True)
    for user in accounts["users"]:
        source = CLUSTER_DIR / "users" / user["name"]
        if user.get("active", True) and (source / "kube.crt").is_file():
            credentials_dir(CREDENTIALS_ROOT / user["name"], cluster.server,
                            source / "kube.crt", source / "kube.key", user["uid"], user["gid"])


def software_links(release: str | None) -> dict[Path, Path]:
    """The links into this image's tree that the shared /software gets: the 2023 guide's
    dataset directory, or for Release 2.10 and later the current docs' (whose YAMLs
    share two of its paths in a newer format) and /software/datasets."""
    if wsjob.release_tuple(release) >= (2, 10):
        return {SOFTWARE / "python3.8": SOFTWARE_SOURCE / "python3.8",
                SOFTWARE / "dataset": SOFTWARE_SOURCE / "dataset-r2.10",
                DATASETS: SOFTWARE_SOURCE / "datasets"}
    return {SOFTWARE / name: SOFTWARE_SOURCE / name for name in ("python3.8", "dataset")}


def link_software(release: str | None = None) -> None:
    """Point the shared /software at this image's trees; nothing a user made is replaced."""
    for link, target in software_links(release).items():
        if not link.exists() and not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)


def main() -> None:
    node = NodeConfig.load()
    cluster_file = CLUSTER_DIR / "kubernetes" / "cluster.json"
    if node.system != "cerebras" or not cluster_file.is_file():
        return
    cluster = ApplianceCluster.load(cluster_file)
    CLUSTER_SETTINGS.parent.mkdir(parents=True, exist_ok=True)
    install_file(json.dumps(cluster.settings(), indent=2) + "\n", CLUSTER_SETTINGS, 0o644)
    if "/software" in node.mounts:
        link_software(cluster.release)
    own = NODE_DIR / "kubernetes"
    if (own / "apiserver.crt").is_file():
        management_node(cluster, own)
    if (own / "agent.crt").is_file():
        credentials_dir(KUBERNETES / "agent", cluster.server, own / "agent.crt",
                        own / "agent.key")
    if "/n1" in node.mounts:
        appliance_dirs()
    if node.node_class == "login":
        login_node(cluster, json.loads(ACCOUNTS.read_text()))


if __name__ == "__main__":
    main()
