"""Read a profile's inventory: the single source of truth for the topology.

Ansible itself resolves the inventory (`ansible-inventory --list`: host ranges,
group_vars, host vars), so the CLI and the playbooks always agree on it. This
module adds the checks Ansible does not make and turns hosts into `Node`s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aitestbed.host import systems as system_registry
from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import project_root

PROFILE_ALIASES = {"full": "alcf"}
_NODE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class Node:
    name: str
    system: str
    node_class: str
    dns_domain: str
    dns_aliases: tuple[str, ...] = ()
    ssh_allow_groups: tuple[str, ...] = ()
    ssh_publish: bool = False
    ssh_mfa: bool = False  # logins take a one-time passcode (login nodes, as at ALCF)
    ssh_port: int | None = None
    # ports of this node's services published for the host on 127.0.0.1 through the
    # cluster's gate (the Metis gateway's HTTPS); ssh is ssh_publish's
    publish_ports: tuple[int, ...] = ()
    mounts: tuple[str, ...] = ()  # cluster-wide volumes: shared trees, the passcode store
    volumes: tuple[str, ...] = ()  # node-local directories kept on a volume of their own
    services: tuple[str, ...] = ()  # runit services enabled besides sshd
    slurm_cluster: str = ""

    @property
    def fqdn(self) -> str:
        return f"{self.name}.{self.dns_domain}"

    @property
    def dns_names(self) -> list[str]:
        """Names other nodes resolve to this node (Docker network aliases)."""
        return [self.name, self.fqdn, *self.dns_aliases]


@dataclass
class Topology:
    profile: str
    inventory_path: Path
    nodes: list[Node]
    hostvars: dict[str, dict]
    groups: dict[str, list[str]] = field(default_factory=dict)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if name in (node.name, node.fqdn):
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise AitestbedError(f"unknown node {name!r}: this cluster has {known}")

    @property
    def node_classes(self) -> list[str]:
        return sorted({n.node_class for n in self.nodes})

    @property
    def systems(self) -> list[str]:
        return [s for s in system_registry.names() if any(n.system == s for n in self.nodes)]

    @property
    def class_systems(self) -> dict[str, tuple[str, ...]]:
        """Each node class -> the systems of this topology whose playbooks configure it:
        what its image is built with (a login node's image carries the tools of the
        topology's systems only, and a Slurm controller's none)."""
        return {c: system_registry.configuring(c, self.systems) for c in self.node_classes}

    @property
    def common_vars(self) -> dict:
        """Cluster-wide variables (identical on every host: group_vars/all)."""
        first = self.hostvars[self.nodes[0].name]
        return {k: first.get(k) for k in ("system_groups", "practice_account", "accounts",
                                          "projects", "account_policy",
                                          "shared_storage_caps")}


def project_vars(path: Path) -> Path | None:
    """The project's inventory/ when the inventory file at `path` has no group_vars beside it.

    Ansible reads group_vars next to each inventory file; an inventory kept elsewhere (a
    copy of inventory/mini.yml in a user's directory) gets the project's group_vars, the
    ones it was written against.
    """
    if (path.parent / "group_vars").is_dir():
        return None
    shared = project_root() / "inventory"
    return shared if (shared / "group_vars").is_dir() else None


def ansible_source(path: Path, workdir: Path) -> Path:
    """What to give ansible-playbook -i for the inventory file at `path`: the file itself, or
    `workdir` holding links to it and to the project's group_vars (see project_vars)."""
    shared = project_vars(path)
    if shared is None:
        return path
    workdir.mkdir(parents=True, exist_ok=True)
    for name, target in ((path.name, path), ("group_vars", shared / "group_vars")):
        link = workdir / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    for stale in workdir.iterdir():
        if stale.name not in (path.name, "group_vars"):
            stale.unlink()
    return workdir


def profile_path(profile: str) -> Path:
    inventory_dir = project_root() / "inventory"
    candidate = Path(profile)
    if candidate.suffix in (".yml", ".yaml"):
        if not candidate.is_file():
            raise AitestbedError(f"inventory file {profile} does not exist")
        return candidate.resolve()
    name = PROFILE_ALIASES.get(profile, profile)
    path = inventory_dir / f"{name}.yml"
    if not path.is_file():
        known = sorted(p.stem for p in inventory_dir.glob("*.yml"))
        raise AitestbedError(
            f"unknown profile {profile!r}: choose one of {', '.join(known)} "
            "(or give the path of an inventory file)"
        )
    return path


class _StrictLoader(yaml.SafeLoader):
    """YAML loader that refuses duplicate keys (a host listed twice)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise AitestbedError(
                f"duplicate name {key!r} in {loader.name} line {key_node.start_mark.line + 1}"
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


_YAML_KINDS = {list: "a YAML list", str: "a YAML string", bool: "a YAML boolean",
               int: "a YAML number", float: "a YAML number"}


def _check_yaml(path: Path) -> None:
    with path.open() as stream:
        try:
            data = yaml.load(stream, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
        except yaml.YAMLError as err:
            raise AitestbedError(f"{path} is not valid YAML: {err}".replace("\n", " ")) from None
    # Ansible's yaml plugin says only "No inventory was parsed" for these (C08, C09).
    example = project_root() / "inventory" / "mini.yml"
    if data is None:
        raise AitestbedError(
            f"inventory {path} is empty: an inventory is a mapping of groups (see {example})")
    if not isinstance(data, dict):
        kind = _YAML_KINDS.get(type(data), f"a YAML {type(data).__name__}")
        raise AitestbedError(
            f"inventory {path} is {kind}, not a mapping of groups (see {example})")


def _ansible_inventory(path: Path) -> dict:
    binary = Path(sys.executable).with_name("ansible-inventory")
    if not binary.exists():
        raise AitestbedError("ansible-inventory is missing: run `make venv` first")
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
           "ANSIBLE_INVENTORY_ENABLED": "yaml"}
    shared = project_vars(path)
    extra = ["--playbook-dir", str(shared)] if shared else []
    result = subprocess.run([str(binary), "-i", str(path), "--list", *extra],
                            capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        raise AitestbedError(f"inventory {path} cannot be read: {lines[-1] if lines else '?'}")
    if "same name" in result.stderr:
        raise AitestbedError(f"inventory {path}: {result.stderr.strip().splitlines()[0]}")
    return json.loads(result.stdout)


def _direct_groups(listing: dict) -> dict[str, list[str]]:
    """host -> groups that list it directly."""
    direct: dict[str, list[str]] = {}
    for group, body in listing.items():
        if group == "_meta":
            continue
        for host in body.get("hosts", []):
            direct.setdefault(host, []).append(group)
    return direct


def _node(name: str, hv: dict) -> Node:
    if not _NODE_NAME.match(name):
        raise AitestbedError(f"invalid host name {name!r}: use lower-case letters, digits and '-'")
    if hv.get("system") not in system_registry.names():
        raise AitestbedError(
            f"host {name} belongs to no system: list it under one of "
            + ", ".join(f"{s}_system" for s in system_registry.names())
        )
    if not hv.get("node_class"):
        raise AitestbedError(f"host {name} has no node_class (set it in its group_vars)")
    port = hv.get("ssh_port")
    return Node(
        name=name,
        system=hv["system"],
        node_class=hv["node_class"],
        dns_domain=hv.get("dns_domain", "ai.alcf.anl.gov"),
        dns_aliases=tuple(hv.get("dns_aliases") or ()),
        ssh_allow_groups=tuple(hv.get("ssh_allow_groups") or ()),
        ssh_publish=bool(hv.get("ssh_publish")),
        ssh_mfa=bool(hv.get("sshd_mfa")),
        ssh_port=int(port) if port else None,
        publish_ports=tuple(int(p) for p in hv.get("publish_ports") or ()),
        mounts=tuple(hv.get("shared_storage_mounts") or ())
        + ((hv["sshd_oath_dir"],) if hv.get("sshd_mfa") else ()),  # one passcode store
        volumes=tuple(hv.get("node_volumes") or ()),
        services=tuple(hv.get("node_services") or ()),
        slurm_cluster=hv.get("slurm_cluster") or "",
    )


def parse_systems(systems: str | None) -> list[str] | None:
    if not systems:
        return None
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in system_registry.names()]
    if unknown:
        raise AitestbedError(
            f"unknown system {unknown[0]!r}: choose from {', '.join(system_registry.names())}"
        )
    return chosen


def load(profile: str, systems: list[str] | None = None) -> Topology:
    path = profile_path(profile)
    _check_yaml(path)
    listing = _ansible_inventory(path)
    direct = _direct_groups(listing)
    # Hosts without any variable are missing from _meta.hostvars.
    hostvars = {h: {} for h in direct} | listing.get("_meta", {}).get("hostvars", {})
    for host, groups in direct.items():
        if len(groups) > 1:
            raise AitestbedError(
                f"duplicate host name {host!r} in {path.name}: listed in {' and '.join(groups)}"
            )
    known = system_registry.names()
    if len(hostvars) > 1 and not any(hv.get("system") in known for hv in hostvars.values()):
        raise AitestbedError(
            f"no host of {path} belongs to a system: list them under "
            + ", ".join(f"{s}_system" for s in system_registry.names())
            + f" (their group_vars are read from {path.parent / 'group_vars'}, or else from "
            f"{project_root() / 'inventory' / 'group_vars'})")
    nodes = [_node(name, hv) for name, hv in sorted(hostvars.items())]
    if systems:
        nodes = [n for n in nodes if n.system in systems]
    if not nodes:
        raise AitestbedError(f"inventory {path.name} has no hosts for the systems asked for")
    groups = {g: b.get("hosts", []) for g, b in listing.items() if g != "_meta"}
    return Topology(profile=PROFILE_ALIASES.get(profile, profile), inventory_path=path,
                    nodes=nodes, hostvars=hostvars, groups=groups)
