"""Render each Slurm cluster's configuration at `up`, from the roles' own templates.

roles/slurm_client/templates/*.j2 are the one source: Ansible renders them on
real hosts and under site.yml; this renders the same files into the cluster's
state directory, which the nodes install at start (aitestbed-node-init). The
environment mimics Ansible's template module, so both give identical bytes and
a converging site.yml finds nothing to change.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import yaml

from aitestbed.host.inventory import Topology, project_root

FILES = ("slurm.conf", "gres.conf", "plugstack.conf", "aitestbed.json")


def _role_dir() -> Path:
    return project_root() / "roles" / "slurm_client"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_role_dir() / "templates"),
        trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["extract"] = lambda item, container: container[item]
    env.filters["combine"] = lambda first, second: {**first, **second}
    env.filters["to_nice_json"] = lambda value, sort_keys=True: json.dumps(
        value, indent=4, sort_keys=sort_keys, separators=(",", ": "))
    return env


def clusters(topology: Topology) -> list[str]:
    """The Slurm clusters of the nodes this cluster runs."""
    return sorted({n.slurm_cluster for n in topology.nodes if n.slurm_cluster})


def render(topology: Topology) -> dict[str, dict[str, str]]:
    """slurm cluster -> file name -> content."""
    defaults = yaml.safe_load((_role_dir() / "defaults" / "main.yml").read_text())
    hostvars = {h: dict(hv, inventory_hostname=h) for h, hv in topology.hostvars.items()}
    env = _environment()
    rendered = {}
    for name in clusters(topology):
        context = {**defaults, **topology.hostvars[topology.nodes[0].name],
                   "slurm_cluster": name, "hostvars": hostvars,
                   "groups": {"all": sorted(hostvars)}}
        rendered[name] = {f: env.get_template(f"{f}.j2").render(context) for f in FILES}
    return rendered
