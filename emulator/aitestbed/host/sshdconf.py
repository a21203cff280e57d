"""Render sshd's per-host files at `up`, from roles/sshd's own templates.

access.conf.j2 says who may log in over ssh on a host, and oath-user.j2 is one
user's passcode enrolment on the login nodes. These templates are the one source:
the role renders them under site.yml and on real hosts, and this module renders
the same files into each node's state directory (aitestbed.node.config: ACCESS_CONF,
OATH_USERS). Node-init installs them from there (aitestbed.node.init.configure_sshd).
Only Jinja's own filters are used here: the accounts module renders the
enrolments through this file, inside Ansible (aitestbed.host.role_templates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aitestbed.host.role_templates import RoleTemplates

if TYPE_CHECKING:
    from aitestbed.host.inventory import Topology


def access(topology: Topology) -> dict[str, str]:
    """node -> its /etc/ssh/sshd_config.d/50-aitestbed-access.conf."""
    templates = RoleTemplates("sshd")
    return {node.name: templates.render("access.conf.j2", dict(
                topology.hostvars[node.name], inventory_hostname=node.name))
            for node in topology.nodes}


def oath_files(tokens: dict[str, dict]) -> dict[str, str]:
    """<user>.oath -> its line, for each user with a passcode token.

    The variables are those tasks/mfa.yml gives the template for each token.
    """
    templates = RoleTemplates("sshd")
    return {f"{user}.oath": templates.render("oath-user.j2",
                                             {"sshd_oath_user": user, "sshd_oath_token": token})
            for user, token in sorted(tokens.items())}
