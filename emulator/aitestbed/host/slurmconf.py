"""Render each Slurm cluster's configuration at `up`, from the roles' own templates.

roles/slurm_client/templates/*.j2 are the one source: Ansible renders them on
real hosts and under site.yml; this renders the same files into the cluster's
state directory (aitestbed.host.role_templates, with Ansible's own filters), which
the nodes install at start (aitestbed-node-init). Both give identical bytes, so a
converging site.yml finds nothing to change.
"""

from __future__ import annotations

from aitestbed.host.inventory import Topology
from aitestbed.host.role_templates import RoleTemplates

FILES = ("slurm.conf", "gres.conf", "plugstack.conf", "aitestbed.json")


def clusters(topology: Topology) -> list[str]:
    """The Slurm clusters of the nodes this cluster runs."""
    return sorted({n.slurm_cluster for n in topology.nodes if n.slurm_cluster})


def contexts(topology: Topology) -> dict[str, dict]:
    """slurm cluster -> the variables its templates see (a play over every host)."""
    hostvars = {h: dict(hv, inventory_hostname=h) for h, hv in topology.hostvars.items()}
    return {name: {**topology.hostvars[topology.nodes[0].name], "slurm_cluster": name,
                   "hostvars": hostvars, "groups": {"all": sorted(hostvars)}}
            for name in clusters(topology)}


def render(topology: Topology) -> dict[str, dict[str, str]]:
    """slurm cluster -> file name -> content."""
    templates = RoleTemplates("slurm_client", ansible_filters=True)
    return {name: {f: templates.render(f"{f}.j2", context) for f in FILES}
            for name, context in contexts(topology).items()}
