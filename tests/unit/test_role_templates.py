"""The host renders the roles' own templates exactly as Ansible's template module does.

Each file that both a role and node-init write comes from the role's template
(aitestbed.host.role_templates). Here each template is rendered twice: once by that
module, and once by Ansible's own engine with the options ansible.builtin.template
passes it (ansible/plugins/action/template.py). The two results must be the same bytes.
"""

import pytest
import yaml
from aitestbed.host import inventory, slurmconf
from aitestbed.host.role_templates import RoleTemplates, role_dir

# What ansible.builtin.template passes to the engine by default.
TEMPLATE_MODULE = {"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"}


def ansible_template(role: str, template: str, variables: dict) -> str:
    """The bytes Ansible's template module writes for roles/<role>/templates/<template>."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    defaults = yaml.safe_load((role_dir(role) / "defaults" / "main.yml").read_text()) or {}
    templar = Templar(loader=DataLoader(), variables={**defaults, **variables})
    text = (role_dir(role) / "templates" / template).read_text()
    rendered = templar.template(trust_as_template(text), escape_backslashes=False,
                                overrides=TEMPLATE_MODULE)
    assert isinstance(rendered, str)
    return str(rendered)


@pytest.mark.parametrize("profile", ["mini", "alcf"])
def test_slurm_configuration_is_what_ansible_renders(profile):
    topology = inventory.load(profile)
    rendered = slurmconf.render(topology)
    contexts = slurmconf.contexts(topology)
    assert sorted(rendered) == sorted(contexts) and rendered
    for cluster, context in contexts.items():
        for name in slurmconf.FILES:
            assert rendered[cluster][name] == ansible_template(
                "slurm_client", f"{name}.j2", context), (cluster, name)


def test_the_filters_jinja_lacks_are_ansibles_own_not_copies():
    filters = RoleTemplates("slurm_client", ansible_filters=True).env.filters
    for name in ("extract", "combine", "to_nice_json"):
        assert filters[name].__module__ == "ansible.plugins.filter.core", name
    # Jinja's own filters stay Jinja's: Ansible's wrappers need Ansible's engine.
    assert filters["default"].__module__ == "jinja2.filters"
    assert "combine" not in RoleTemplates("slurm_client").env.filters
