"""The cluster state directory: per-cluster secrets and bookkeeping on the host.

Layout under $XDG_STATE_HOME/aitestbed/<cluster>/ (default ~/.local/state):
  cluster.json        profile, systems, practice user, published ports, storage kind
  inventory.yml       the rendered inventory (Ansible reaches the containers)
  login/              host side: ssh_config, known_hosts, the user's login key
  common/             mounted read-only on every node at /etc/aitestbed/cluster
  nodes/<node>/       mounted read-only on that node at /etc/aitestbed/node
                      (what the nodes find there: aitestbed.node.config)
  storage/            /home and /projects: home.img, projects.img and where they are
                      mounted (aitestbed.host.storage), when the cluster has them
Secrets are generated here at the first `up` and never baked into images.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from aitestbed.host import accounts, slurmconf, sshdconf, systems
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
from aitestbed.node.config import ACCESS_CONF, NODE_JSON, OATH_USERS, NodeConfig

DEFAULT_USER = "trainee"
ASKPASS = """#!/bin/sh
# What {user} types at the login nodes' Password: prompt, for ssh's SSH_ASKPASS.
exec {python} -m aitestbed.cli --name {cluster} passcode --typed {user}
"""
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def state_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "aitestbed"


def practice_user_name() -> str:
    """$AITESTBED_USER, else the host user, else `trainee` when that is root."""
    name = os.environ.get("AITESTBED_USER")
    if not name:
        try:
            name = getpass.getuser()
        except Exception:  # noqa: BLE001 - no passwd entry for the host uid
            name = ""
        if name in ("", "root"):
            name = DEFAULT_USER
    if not _USER_NAME.match(name):
        raise AitestbedError(
            f"cannot use {name!r} as the practice account name: set AITESTBED_USER to a name "
            "of lower-case letters, digits, '_' and '-'"
        )
    return name


@dataclass
class ClusterRecord:
    """What `up` decided once for a cluster and must keep on later `up`s."""

    name: str
    profile: str
    inventory: str
    systems: list[str] | None
    user: str
    ports: dict[str, int] = field(default_factory=dict)
    # Other services published for the host, always on 127.0.0.1 (the Metis gateway's
    # HTTPS): {"<node>:<its port>": port on this host}.
    services: dict[str, int] = field(default_factory=dict)
    # Where /home and /projects live (aitestbed.host.storage): "image", the cluster's
    # own file systems with quotas enforced; "volume", Docker volumes (quotas reported
    # only), with the reason in storage_note. A record from before this field is
    # "volume": such a cluster keeps its volumes. "" until the first `up` decides.
    storage: str = "volume"
    storage_note: str = ""
    # Where the login nodes' ssh ports are published: 127.0.0.1, or the address a
    # workshop's instructor named (`classroom create --listen`).
    listen: str = "127.0.0.1"
    # Where the nodes run (aitestbed.host.provider): kept for the cluster's life.
    provider: str = "docker"
    # Its options (the Kubernetes provider's context, namespace, registry, storage class).
    provider_options: dict = field(default_factory=dict)


class ClusterState:
    def __init__(self, name: str):
        self.name = name
        self.root = state_home() / name

    # paths --------------------------------------------------------------
    @property
    def record_path(self) -> Path:
        return self.root / "cluster.json"

    @property
    def common_dir(self) -> Path:
        return self.root / "common"

    @property
    def login_dir(self) -> Path:
        return self.root / "login"

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / node

    @property
    def ssh_config_path(self) -> Path:
        return self.login_dir / "ssh_config"

    @property
    def inventory_path(self) -> Path:
        return self.root / "inventory.yml"

    def askpass_path(self, user: str) -> Path:
        return self.login_dir / f"askpass-{user}"

    # record -------------------------------------------------------------
    def exists(self) -> bool:
        return self.record_path.is_file()

    def load(self) -> ClusterRecord:
        if not self.exists():
            raise AitestbedError(
                f"cluster {self.name!r} does not exist: "
                f"create it with `aitestbed up --name {self.name}`"
            )
        return ClusterRecord(**json.loads(self.record_path.read_text()))

    def save(self, record: ClusterRecord) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.root.chmod(0o700)
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record), indent=2) + "\n")
        tmp.replace(self.record_path)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # secrets and rendered files -----------------------------------------
    def prepare(self, topology: Topology, record: ClusterRecord,
                reach: dict[str, dict] | None = None) -> None:
        """Generate what is missing (keys) and render what derives from the inventory.
        `reach`: node -> how Ansible reaches it (its provider's `ansible_vars`; the
        cluster handle gives them); without it the inventory names the nodes only."""
        for d in (self.common_dir, self.login_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Users on the nodes read accounts.json (myquota, exercises); every secret
        # below is in a 0700 directory or a 0600 file of its own.
        self.common_dir.chmod(0o711)
        host_keys = {node.name: self._host_key(node) for node in topology.nodes}
        self._write(self.common_dir / "ssh_known_hosts",
                    "".join(f"{','.join(n.dns_names)} {host_keys[n.name]}\n"
                            for n in topology.nodes))
        # Host side: ssh_config uses HostKeyAlias=<node>; the round-robin name
        # may land on any login node that carries it.
        lines = []
        for node in topology.nodes:
            if node.name in record.ports:
                names = [node.name, *(a for a in node.dns_aliases if "." not in a)]
                lines.extend(f"{name} {host_keys[node.name]}\n" for name in names)
        self._write(self.login_dir / "known_hosts", "".join(lines))
        self._accounts(topology, record.user)
        access = sshdconf.access(topology)
        for node in topology.nodes:
            self._write(self.node_dir(node.name) / NODE_JSON, node_config(node).to_json())
            self._write(self.node_dir(node.name) / ACCESS_CONF, access[node.name])
        self._render_inventory(topology, record, reach or {})
        self._slurm(topology)
        for system in systems.of(topology.systems):
            if system.prepare:
                system.prepare(self, topology)

    def _slurm(self, topology: Topology) -> None:
        """The munge key (one per cluster) and each Slurm cluster's configuration."""
        rendered = slurmconf.render(topology)
        if not rendered:
            return
        key = self.common_dir / "munge.key"
        if not key.is_file():
            with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(os.urandom(1024))
        for cluster, files in rendered.items():
            for name, text in files.items():
                self._write(self.common_dir / "slurm" / cluster / name, text)

    def _host_key(self, node: Node) -> str:
        key = self.node_dir(node.name) / "ssh_host_ed25519_key"
        _keygen(key, comment=f"root@{node.name}")
        return " ".join(key.with_suffix(".pub").read_text().split()[:2])

    def registry(self) -> accounts.Registry:
        return accounts.Registry(self.root / "accounts")

    def _accounts(self, topology: Topology, user: str) -> dict:
        """Onboard the practice user and the inventory's accounts (not those offboarded)."""
        registry = self.registry()
        spec = account_spec(topology.common_vars, user)
        active = [n for n in spec.accounts if registry.users.get(n, {}).get("active", True)]
        registry.onboard(spec, active)
        return self.publish_accounts(topology, registry, spec.system_groups)

    def publish_accounts(self, topology: Topology, registry: accounts.Registry,
                         system_groups: dict[str, int]) -> dict:
        """Render the registry for the nodes: accounts.json, users' keys, passcode tokens.

        Tokens go to the login nodes' own directories only: mfa.json for the roles,
        and oath/<user>.oath, each user's pam_oath enrolment, for node-init. Each
        user also gets an askpass program on the host (what they type at
        `Password:`, for SSH_ASKPASS).
        """
        keys = {}
        for name in registry.users:
            internal = self.common_dir / "users" / name / "id_ed25519"
            _keygen(internal, comment=f"{name}@aitestbed")
            keys[name] = [_pub(internal)]
        resolved = registry.resolved(system_groups, keys)
        self._write(self.common_dir / "accounts.json", json.dumps(resolved, indent=2) + "\n")
        (self.common_dir / "accounts.json").chmod(0o644)
        active = [u["name"] for u in resolved["users"] if u["active"]]
        tokens = {name: registry.token(name) for name in active}
        enrolments = sshdconf.oath_files(tokens)
        for node in topology.nodes:
            if node.ssh_mfa:
                self._write(self.node_dir(node.name) / "mfa.json",
                            json.dumps({"users": tokens}, indent=2, sort_keys=True) + "\n")
                self._replace_dir(self.node_dir(node.name) / OATH_USERS, enrolments)
        for name in registry.users:
            askpass = self.askpass_path(name)
            if name in active:
                self._write(askpass, ASKPASS.format(python=sys.executable, cluster=self.name,
                                                    user=name))
                askpass.chmod(0o700)
            else:
                askpass.unlink(missing_ok=True)
        for system in systems.of(topology.systems):
            if system.publish:
                system.publish(self, topology, resolved)
        return resolved

    def _render_inventory(self, topology: Topology, record: ClusterRecord,
                          reach: dict[str, dict]) -> None:
        """The profile's inventory plus how Ansible reaches this cluster's nodes."""
        hosts = {n.name: reach.get(n.name, {}) for n in topology.nodes}
        rendered = {
            "all": {
                "vars": {
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "aitestbed_cluster": self.name,
                    "aitestbed_state_dir": str(self.root),
                    "practice_user": record.user,
                    # The plays of these systems only (playbooks/plays/node-classes.yml).
                    "image_systems": topology.systems,
                },
                "hosts": hosts,
            }
        }
        self._write(self.inventory_path, yaml.safe_dump(rendered, sort_keys=False))

    def write(self, path: Path, text: str) -> None:
        """Write a file of the state directory (only when its text changed), its
        directories 0700."""
        self._write(path, text)

    @classmethod
    def _replace_dir(cls, directory: Path, files: dict[str, str]) -> None:
        """directory holds exactly these files (name -> text)."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, text in files.items():
            cls._write(directory / name, text)
        for path in directory.iterdir():
            if path.name not in files:
                path.unlink()

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.is_file() and path.read_text() == text:
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def node_config(node: Node) -> NodeConfig:
    """node.json: what node-init and the node's start-up steps read of the inventory."""
    return NodeConfig(
        name=node.name, system=node.system, node_class=node.node_class, fqdn=node.fqdn,
        ssh_allow_groups=list(node.ssh_allow_groups), ssh_mfa=node.ssh_mfa,
        mounts=list(node.mounts), services=list(node.services),
        slurm_cluster=node.slurm_cluster)


def account_spec(common_vars: dict, practice_user: str) -> accounts.Spec:
    """The inventory's accounts and projects, with the practice account first."""
    practice = dict(common_vars["practice_account"], name=practice_user)
    return accounts.Spec.from_vars(
        common_vars["system_groups"],
        [practice, *(a for a in common_vars["accounts"] or [] if a.get("name") != practice_user)],
        common_vars.get("projects"), common_vars.get("account_policy"))


def _keygen(path: Path, comment: str) -> None:
    if path.is_file():
        return
    if shutil.which("ssh-keygen") is None:
        raise AitestbedError("ssh-keygen is missing: install the openssh-client package")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


def _pub(private: Path) -> str:
    return private.with_name(private.name + ".pub").read_text().strip()


PORT_RANGE = range(22001, 23000)  # below the ephemeral range outgoing connections use


def recorded_ports() -> set[int]:
    """Ports any cluster on this host has recorded, running or not."""
    ports: set[int] = set()
    for record in state_home().glob("*/cluster.json"):
        try:
            data = json.loads(record.read_text())
            ports.update(data.get("ports", {}).values())
            ports.update(data.get("services", {}).values())
        except (OSError, ValueError):
            continue
    return ports


def free_port(taken: set[int]) -> int:
    """A port on 127.0.0.1 that no cluster has recorded and nothing listens on now."""
    for port in PORT_RANGE:
        if port not in taken and not port_in_use(port):
            return port
    raise AitestbedError(
        f"no free port left in 127.0.0.1:{PORT_RANGE.start}-{PORT_RANGE.stop - 1} to publish: "
        "destroy clusters you no longer need"
    )


def port_in_use(port: int, address: str = "127.0.0.1") -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return True
    return False
