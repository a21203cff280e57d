"""The host renders the roles' own templates exactly as Ansible's template module does.

Each file that both a role and node-init write comes from the role's template
(aitestbed.host.role_templates). Here each template is rendered twice: once by that
module, and once by Ansible's own engine with the options ansible.builtin.template
passes it (ansible_render). The two results must be the same bytes.
"""

import os
import subprocess
import sys

import pytest
from aitestbed.host import inventory, slurmconf, sshdconf
from aitestbed.host.role_templates import RoleTemplates

from . import ansible_render

TOKENS = {
    "alice": {"type": "mobilepass", "secret": "0f" * 20},
    "bob": {"type": "cryptocard", "secret": "a1" * 20, "pin": "0042"},
}


@pytest.mark.parametrize("profile", ["mini", "alcf"])
def test_slurm_configuration_is_what_ansible_renders(profile):
    topology = inventory.load(profile)
    rendered = slurmconf.render(topology)
    contexts = slurmconf.contexts(topology)
    assert sorted(rendered) == sorted(contexts) and rendered
    for cluster, context in contexts.items():
        for name in slurmconf.FILES:
            assert rendered[cluster][name] == ansible_render.template(
                "slurm_client", f"{name}.j2", context), (cluster, name)


def test_the_filters_jinja_lacks_are_ansibles_own_not_copies():
    filters = RoleTemplates("slurm_client", ansible_filters=True).env.filters
    for name in ("extract", "combine", "to_nice_json"):
        assert filters[name].__module__ == "ansible.plugins.filter.core", name
    # Jinja's own filters stay Jinja's: Ansible's wrappers need Ansible's engine.
    assert filters["default"].__module__ == "jinja2.filters"
    assert "combine" not in RoleTemplates("slurm_client").env.filters


@pytest.mark.parametrize("profile", ["mini", "alcf"])
def test_sshd_access_rules_are_what_the_roles_template_renders(profile):
    topology = inventory.load(profile)
    access = sshdconf.access(topology)
    assert sorted(access) == sorted(n.name for n in topology.nodes)
    for node in topology.nodes:
        assert access[node.name] == ansible_render.template(
            "sshd", "access.conf.j2", topology.hostvars[node.name]), node.name


def test_the_access_rules_admit_the_system_group_or_nobody():
    access = sshdconf.access(inventory.load("alcf"))
    assert access["gc-poplar-02"] == "# Managed by aitestbed\nAllowGroups graphcore\n"
    assert "DenyUsers *\n" in access["gc-poplar-01"] and "AllowGroups" not in access["gc-poplar-01"]


def test_the_oath_lines_are_what_the_roles_enrolment_task_writes():
    """tasks/mfa.yml's template task, run by Ansible's engine for each token."""
    written = ansible_render.run_template_task(
        "sshd", "mfa.yml", "Enrol the users' passcode tokens",
        {"sshd_mfa_tokens": TOKENS, "sshd_enrolled": {"files": []}})
    assert written == {f"/etc/oath/users/{name}": text
                       for name, text in sshdconf.oath_files(TOKENS).items()}
    assert written["/etc/oath/users/alice.oath"] == f"HOTP/T30/8\talice\t-\t{'0f' * 20}\n"
    assert written["/etc/oath/users/bob.oath"] == f"HOTP/T30/8\tbob\t0042\t{'a1' * 20}\n"


def test_a_token_already_enrolled_is_not_written_again():
    """pam_oath keeps its last code in the file: the task templates only missing ones."""
    written = ansible_render.run_template_task(
        "sshd", "mfa.yml", "Enrol the users' passcode tokens",
        {"sshd_mfa_tokens": TOKENS,
         "sshd_enrolled": {"files": [{"path": "/etc/oath/users/alice.oath"}]}})
    assert list(written) == ["/etc/oath/users/bob.oath"]


def test_the_accounts_module_renders_without_ansibles_controller_code(tmp_path):
    """The accounts module runs inside Ansible, where `import ansible.template` fails.

    It imports aitestbed.host.state and renders the enrolments (publish_accounts):
    neither may import Ansible's controller code.
    """
    code = ("import sys\n"
            "from aitestbed.host import state, sshdconf\n"
            f"sshdconf.oath_files({TOKENS!r})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ansible'))\n")
    env = dict(os.environ, PYTHONPATH=str(inventory.project_root() / "emulator"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    assert out == "[]\n"
