"""node-init installs what `up` rendered from the roles' templates: site.yml changes nothing."""

import pytest
from aitestbed.host import inventory, state
from aitestbed.node import init
from aitestbed.node.config import NodeConfig

from . import ansible_render


@pytest.fixture
def cluster(isolated_state):
    """A prepared mini cluster (its state directory) and its topology."""
    topology = inventory.load("mini")
    cluster = state.ClusterState("c1")
    record = state.ClusterRecord(name="c1", profile="mini", inventory="", systems=None,
                                 user="alice", ports={})
    cluster.save(record)
    cluster.prepare(topology, record)
    return cluster, topology


@pytest.fixture
def node_root(tmp_path, monkeypatch):
    """node-init's sshd destinations under tmp_path."""
    monkeypatch.setattr(init, "ACCESS_DROPIN", tmp_path / "sshd_config.d" / "50-access.conf")
    monkeypatch.setattr(init, "OATH_DIR", tmp_path / "oath" / "users")
    monkeypatch.setattr(init, "MFA_DROPIN", tmp_path / "sshd_config.d" / "40-mfa.conf")
    return tmp_path


@pytest.fixture
def configure(monkeypatch):
    """Run node-init's sshd step as node `name`, reading that node's state directory."""
    def run(cluster, name):
        monkeypatch.setattr(init, "NODE_DIR", cluster.node_dir(name))
        init.configure_sshd(NodeConfig.load(cluster.node_dir(name)))
    return run


def test_node_init_installs_the_access_rules_of_the_roles_template(cluster, node_root,
                                                                     configure):
    cluster, topology = cluster
    for name in ("gc-poplar-01", "gc-poplar-02", "sn30-r1-h1", "gc-login-01"):
        configure(cluster, name)
        installed = init.ACCESS_DROPIN.read_text()
        assert installed == ansible_render.template("sshd", "access.conf.j2",
                                                    topology.hostvars[name]), name
        assert ("DenyUsers *" in installed) == (not topology.node(name).ssh_allow_groups)
        # Passcodes are enrolled on the login nodes only.
        assert init.OATH_DIR.exists() == topology.node(name).ssh_mfa, name


def test_the_oath_line_node_init_installs_is_what_ansible_renders(cluster, node_root, configure):
    cluster, topology = cluster
    token = cluster.registry().token("alice")
    configure(cluster, "gc-login-01")
    (installed,) = init.OATH_DIR.iterdir()
    written = ansible_render.run_template_task(
        "sshd", "mfa.yml", "Enrol the users' passcode tokens",
        {**topology.hostvars["gc-login-01"], "sshd_mfa_tokens": {"alice": token},
         "sshd_enrolled": {"files": []}})
    assert {f"/etc/oath/users/{installed.name}": installed.read_text()} == written
    assert installed.read_text() == f"HOTP/T30/8\talice\t-\t{token['secret']}\n"
    assert installed.stat().st_mode & 0o777 == 0o600


def test_enrolments_keep_pam_oaths_record_until_the_token_changes(cluster, node_root, configure):
    cluster, topology = cluster
    configure(cluster, "gc-login-01")
    enrolment = init.OATH_DIR / "alice.oath"
    # pam_oath appends the last counter and time used: what refuses a replay.
    used = enrolment.read_text().rstrip("\n") + "\t57\t2026-11-24T10:00:00L\n"
    enrolment.write_text(used)
    configure(cluster, "gc-login-01")
    assert enrolment.read_text() == used
    # A new secret replaces the file; a user without a token loses it.
    source = cluster.node_dir("gc-login-01") / "oath"
    (source / "alice.oath").write_text("HOTP/T30/8\talice\t-\t" + "ee" * 20 + "\n")
    configure(cluster, "gc-login-01")
    assert enrolment.read_text() == "HOTP/T30/8\talice\t-\t" + "ee" * 20 + "\n"
    (source / "alice.oath").unlink()
    configure(cluster, "gc-login-01")
    assert list(init.OATH_DIR.iterdir()) == []


def test_the_state_holds_an_enrolment_per_active_user_on_login_nodes_only(cluster):
    cluster, topology = cluster
    for node in topology.nodes:
        oath = cluster.node_dir(node.name) / "oath"
        assert oath.is_dir() == node.ssh_mfa, node.name
        if node.ssh_mfa:
            assert sorted(p.name for p in oath.iterdir()) == ["alice.oath"]
    registry = cluster.registry()
    registry.offboard("alice")
    cluster.publish_accounts(topology, registry, {})
    assert list((cluster.node_dir("gc-login-01") / "oath").iterdir()) == []


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


def test_runtime_dirs_are_tmpfiles_d_directories_under_run():
    lines = [
        "# screen's own line (Debian)",
        "d /run/screen 0777 root utmp",
        "d /run/sshd 0755 - -",
        "D /run/mysqld 0755 mysql mysql -",
        "d /var/lib/something 0700 root root",  # not under /run: left to the image
        "f /run/some.pid 0644 root root",  # files are not made
        "d /run/user/%i 0700 %u %g",  # specifiers: not ours to expand
        "d /run/../etc 0755 root root",
        "d /run/bad zzz root root",
        "d /run/screen 1777 root utmp",  # a later line wins (/etc over /usr/lib)
    ]
    assert init.runtime_dirs(lines) == {
        "/run/screen": (0o1777, "root", "utmp"),
        "/run/sshd": (0o755, "root", "root"),
        "/run/mysqld": (0o755, "mysql", "mysql"),
    }


def test_a_user_node_of_the_login_image_asks_no_passcode(isolated_state, node_root, configure):
    """The CS-3 cluster's user nodes share the login nodes' image (which asks for a
    passcode); node-init drops that for them: they are reached from a login node."""
    topology = inventory.load("alcf-2026-mini")
    cluster = state.ClusterState("c26")
    record = state.ClusterRecord(name="c26", profile="alcf-2026-mini", inventory="",
                                 systems=None, user="alice", ports={})
    cluster.save(record)
    cluster.prepare(topology, record)
    for name, asks in (("cer-login-04", True), ("cer-anl-net001-us-sr01", False)):
        init.MFA_DROPIN.parent.mkdir(parents=True, exist_ok=True)
        init.MFA_DROPIN.write_text("AuthenticationMethods keyboard-interactive\n")
        configure(cluster, name)
        assert init.MFA_DROPIN.exists() == asks, name
