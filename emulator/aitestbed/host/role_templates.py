"""Render a role's own templates on the host, the way ansible.builtin.template does.

Some node files are written by two paths: by a role (under site.yml, and on real
hosts), and by node-init at every container start. Examples are each Slurm
cluster's configuration (roles/slurm_client) and sshd's access rules and passcode
enrolments (roles/sshd). The role's template is the one source for each of them.
`up` renders it here into the cluster's state directory, and node-init only
installs the result. Both paths then write the same bytes, and a converging
site.yml finds nothing to change.

The environment is the template module's: Jinja2 with trim_blocks, the trailing
newline kept, an undefined variable an error, and the role's defaults under the
given variables. The filters Jinja lacks (extract, combine, to_nice_json, ...)
come from Ansible itself (ansible.plugins.filter.core); nothing here copies them.
They are loaded only for a role that asks for them (`ansible_filters=True`).
Ansible's controller code cannot be imported inside an Ansible module, and the
accounts module (playbooks/library/aitestbed_accounts.py) renders the passcode
enrolments through this file. tests/unit/test_role_templates.py renders every
template both here and with Ansible's own engine, and checks they agree.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

from aitestbed.host.paths import project_root


def role_dir(role: str) -> Path:
    return project_root() / "roles" / role


def load_ansible_filters() -> dict:
    """Ansible's own filters, as its template engine finds them (imported when asked)."""
    from ansible.plugins.filter.core import FilterModule

    return FilterModule().filters()


class RoleTemplates:
    """One role's templates and defaults."""

    def __init__(self, role: str, ansible_filters: bool = False):
        self.role = role
        defaults = role_dir(role) / "defaults" / "main.yml"
        self.defaults = (yaml.safe_load(defaults.read_text()) if defaults.is_file() else None) or {}
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(role_dir(role) / "templates"),
            trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
        if ansible_filters:
            # Only what Jinja lacks: Ansible's versions of Jinja's own filters (default,
            # map, ...) need Ansible's engine around them.
            self.env.filters.update({name: f for name, f in load_ansible_filters().items()
                                     if name not in self.env.filters})

    def render(self, template: str, variables: dict) -> str:
        """roles/<role>/templates/<template>, with the role's defaults under variables."""
        return self.env.get_template(template).render({**self.defaults, **variables})
