"""node-init writes the same files as the roles, so site.yml finds nothing to change."""

import jinja2
from aitestbed.host.inventory import project_root
from aitestbed.node import init


def _render_role_template(groups):
    path = project_root() / "roles" / "sshd" / "templates" / "access.conf.j2"
    # Ansible's template module renders with trim_blocks=True.
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True)
    return env.from_string(path.read_text()).render(ssh_allow_groups=groups)


def test_access_dropin_matches_the_sshd_roles_template():
    for groups in ([], ["graphcore"], ["cerebras", "staff"]):
        assert init.sshd_access(groups) == _render_role_template(groups)


def test_a_node_nobody_may_enter_denies_every_user():
    assert "DenyUsers *" in init.sshd_access([])
    assert "AllowGroups graphcore\n" in init.sshd_access(["graphcore"])


def test_install_file_replaces_only_on_change(tmp_path):
    dest = tmp_path / "f"
    init.install_file("a\n", dest, 0o644, uid=dest.parent.stat().st_uid,
                      gid=dest.parent.stat().st_gid)
    first = dest.stat().st_ino
    init.install_file("a\n", dest, 0o644)
    assert dest.stat().st_ino == first
    init.install_file("b\n", dest, 0o600)
    assert dest.read_text() == "b\n" and (dest.stat().st_mode & 0o777) == 0o600


def test_install_file_from_many_nodes_at_once_on_a_shared_directory(tmp_path):
    """Every node runs node-init as PID 1 of its container, on the same /home."""
    from concurrent.futures import ThreadPoolExecutor
    dest = tmp_path / "authorized_keys"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: init.install_file(f"key {i % 2}\n", dest, 0o600),
                      range(64)))
    assert dest.read_text() in ("key 0\n", "key 1\n")
    assert [p.name for p in tmp_path.iterdir()] == ["authorized_keys"]
