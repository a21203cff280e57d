import textwrap

import pytest
from aitestbed.host import inventory, systems
from aitestbed.host.errors import AitestbedError


@pytest.fixture(scope="module")
def alcf():
    return inventory.load("alcf")


@pytest.fixture(scope="module")
def mini():
    return inventory.load("mini")


def test_full_profile_has_the_sites_host_names(alcf):
    names = {n.name for n in alcf.nodes}
    assert {"cer-login-01", "cer-login-02", "cer-login-03", "cer-cs2-01", "cer-cs2-02"} <= names
    assert {"gc-login-01", "gc-login-02"} | {f"gc-poplar-0{i}" for i in range(1, 5)} <= names
    sn30 = {f"sn30-r{r}-h{h}" for r in range(1, 5) for h in (1, 2)}
    assert {"sambanova", "sm-01", "sm-02"} | sn30 <= names


def test_every_host_belongs_to_one_system_and_class(alcf):
    for node in alcf.nodes:
        assert node.system in systems.names()
        assert node.node_class in {"login", "cs2", "cs_mgmt", "ipu_node", "rdu_node", "slurmctld"}


def test_cerebras_round_robin_name_is_on_every_cerebras_login_node(alcf):
    login = [n for n in alcf.nodes if n.system == "cerebras" and n.node_class == "login"]
    assert len(login) == 3
    assert all({"cerebras", "cerebras.ai.alcf.anl.gov"} <= set(n.dns_names) for n in login)


def test_gc_poplar_01_admits_no_user_over_ssh(alcf):
    assert alcf.node("gc-poplar-01").ssh_allow_groups == ()
    assert alcf.node("gc-poplar-02").ssh_allow_groups == ("graphcore",)


def test_data_is_mounted_on_sambanova_nodes_only(alcf):
    for node in alcf.nodes:
        assert ("/data" in node.mounts) == (node.system == "sambanova")
        assert {"/home", "/projects", "/software"} <= set(node.mounts)


def test_the_login_nodes_share_one_passcode_store(alcf):
    sharing = {n.name for n in alcf.nodes if "/etc/oath/users" in n.mounts}
    assert sharing == {n.name for n in alcf.nodes if n.ssh_mfa}
    assert {"cer-login-01", "gc-login-01", "sambanova"} <= sharing


def test_only_login_nodes_publish_ssh(alcf):
    assert {n.name for n in alcf.nodes if n.ssh_publish} == {
        "cer-login-01", "cer-login-02", "cer-login-03", "gc-login-01", "gc-login-02", "sambanova"}


def test_mini_profile_has_one_login_and_one_or_two_compute_nodes_per_system(mini):
    # The 2023 guide's three systems (the GroqRack is in the alcf-2026 profiles).
    assert mini.systems == ["cerebras", "graphcore", "sambanova"]
    for system in mini.systems:
        nodes = [n for n in mini.nodes if n.system == system and n.node_class != "slurmctld"]
        assert sum(n.node_class == "login" for n in nodes) == 1
        assert 1 <= sum(n.node_class != "login" for n in nodes) <= 3


def test_each_slurm_cluster_has_one_controller_with_state_on_a_volume(alcf):
    controllers = {n.slurm_cluster: n for n in alcf.nodes if n.node_class == "slurmctld"}
    assert sorted(controllers) == ["graphcore", "sn10", "sn30"]
    for node in controllers.values():
        assert "/var/spool/slurmctld" in node.volumes and "slurmctld" in node.services
    assert "vipu" in controllers["graphcore"].dns_aliases


def test_compute_and_login_nodes_join_their_systems_scheduler(alcf):
    assert alcf.node("gc-login-02").slurm_cluster == "graphcore"
    assert alcf.node("sambanova").slurm_cluster == "sn30"
    assert alcf.node("sn30-r4-h2").slurm_cluster == "sn30"
    assert alcf.node("sm-02").slurm_cluster == "sn10"
    assert alcf.node("cer-login-01").slurm_cluster == ""
    assert "slurmd" in alcf.node("gc-poplar-04").services


def test_full_is_an_alias_of_alcf():
    assert inventory.load("full").profile == "alcf"


def test_systems_subset():
    topology = inventory.load("mini", inventory.parse_systems("graphcore,sambanova"))
    assert topology.systems == ["graphcore", "sambanova"]
    assert all(n.system != "cerebras" for n in topology.nodes)


def test_unknown_profile_system_and_node_are_refused(mini):
    with pytest.raises(AitestbedError,
                       match="unknown profile 'huge'.*alcf, alcf-2026, alcf-2026-mini, mini"):
        inventory.load("huge")
    with pytest.raises(AitestbedError, match="unknown system 'cray'"):
        inventory.parse_systems("graphcore,cray")
    with pytest.raises(AitestbedError, match="unknown node 'gc-poplar-09'"):
        mini.node("gc-poplar-09")


def _write_inventory(tmp_path, body: str):
    path = tmp_path / "inv.yml"
    path.write_text(textwrap.dedent(body))
    return path


def test_duplicate_host_key_is_refused(tmp_path):
    path = _write_inventory(tmp_path, """
        all:
          children:
            graphcore_system:
              vars: {system: graphcore, node_class: ipu_node}
              hosts:
                gc-poplar-02:
                gc-poplar-02:
        """)
    with pytest.raises(AitestbedError, match="duplicate name .gc-poplar-02.*line 8"):
        inventory.load(str(path))


def test_host_in_two_systems_is_refused(tmp_path):
    path = _write_inventory(tmp_path, """
        all:
          children:
            graphcore_system:
              vars: {system: graphcore, node_class: ipu_node}
              hosts: {gc-poplar-02: }
            sambanova_system:
              vars: {system: sambanova, node_class: rdu_node}
              hosts: {gc-poplar-02: }
        """)
    with pytest.raises(AitestbedError, match="duplicate host name 'gc-poplar-02'"):
        inventory.load(str(path))


def test_host_without_system_is_refused(tmp_path):
    path = _write_inventory(tmp_path, """
        all:
          hosts:
            lonely:
        """)
    with pytest.raises(AitestbedError, match="host lonely belongs to no system"):
        inventory.load(str(path))


def test_a_copy_of_a_profile_kept_elsewhere_reads_the_projects_group_vars(tmp_path, mini):
    """C14: Ansible finds group_vars only beside the inventory file."""
    copy = tmp_path / "copy-of-mini.yml"
    copy.write_text((inventory.project_root() / "inventory" / "mini.yml").read_text())
    topology = inventory.load(str(copy))
    assert topology.nodes == mini.nodes
    assert topology.inventory_path == copy


def test_a_stray_host_in_a_copied_profile_is_the_one_blamed(tmp_path):
    """C11: the host in no system group, not the first host of the file."""
    text = (inventory.project_root() / "inventory" / "mini.yml").read_text()
    stray = tmp_path / "nosystem.yml"
    stray.write_text(text.replace("all:\n", "all:\n  hosts:\n    zz-stray-01:\n", 1))
    with pytest.raises(AitestbedError, match=r"^host zz-stray-01 belongs to no system"):
        inventory.load(str(stray))


def test_an_inventory_with_group_vars_of_its_own_keeps_them(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("dns_domain: example.org\n")
    path = _write_inventory(tmp_path, """
        all:
          children:
            graphcore_system:
              vars: {system: graphcore, node_class: ipu_node}
              hosts: {gc-poplar-02: }
        """)
    assert inventory.project_vars(path) is None
    assert inventory.ansible_source(path, tmp_path / "work") == path
    assert inventory.load(str(path)).nodes[0].fqdn == "gc-poplar-02.example.org"


def test_hosts_without_any_system_point_at_the_missing_group_vars(tmp_path):
    path = _write_inventory(tmp_path, """
        all:
          hosts: {a-01: , b-01: }
        """)
    with pytest.raises(AitestbedError, match="no host of .* belongs to a system.*group_vars"):
        inventory.load(str(path))


def test_ansible_playbook_gets_the_file_and_the_projects_group_vars(tmp_path):
    copy = tmp_path / "mine.yml"
    copy.write_text((inventory.project_root() / "inventory" / "mini.yml").read_text())
    source = inventory.ansible_source(copy, tmp_path / "state" / "inventory")
    assert sorted(p.name for p in source.iterdir()) == ["group_vars", "mine.yml"]
    assert (source / "group_vars").resolve() == \
        (inventory.project_root() / "inventory" / "group_vars").resolve()
    assert inventory.ansible_source(copy, source) == source  # idempotent
    in_tree = inventory.project_root() / "inventory" / "mini.yml"
    assert inventory.ansible_source(in_tree, tmp_path / "unused") == in_tree


@pytest.mark.parametrize("body, what", [
    ("", "is empty: an inventory is a mapping of groups"),
    ("# nothing but a comment\n", "is empty: an inventory is a mapping of groups"),
    ("- gc-poplar-01\n- gc-poplar-02\n", "is a YAML list, not a mapping of groups"),
    ("gc-poplar-01\n", "is a YAML string, not a mapping of groups"),
])
def test_an_inventory_that_is_not_a_mapping_says_so_before_ansible_reads_it(
        tmp_path, monkeypatch, body, what):
    """C08, C09: not Ansible's "No inventory was parsed"."""
    path = tmp_path / "bad-shape.yml"
    path.write_text(body)

    def no_ansible(path):
        raise AssertionError("ansible-inventory was asked")

    monkeypatch.setattr(inventory, "_ansible_inventory", no_ansible)
    with pytest.raises(AitestbedError) as caught:
        inventory.load(str(path))
    message = str(caught.value)
    assert message.startswith(f"inventory {path} {what}")
    assert "inventory/mini.yml" in message and "\n" not in message
