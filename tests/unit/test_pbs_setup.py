"""The GroqRack's PBS complex: what `up` records of it and what each host makes of that
at start (aitestbed.groq.pbs_setup). The daemons themselves are tested on a cluster
(tests/cluster/test_groq.py)."""

from __future__ import annotations

import json

import pytest
from aitestbed.groq import pbs_setup
from aitestbed.groq.pbs_setup import Complex
from aitestbed.host import inventory, state

pytestmark = pytest.mark.unit

GROQ = Complex("groq-r01-control", ["groq-r01-gn-01", "groq-r01-gn-02"], ["groq-login-01"])


def test_up_records_the_complex_of_the_profile(isolated_state):
    topology = inventory.load("alcf-2026-mini", ["groq"])
    cluster = state.ClusterState("g1")
    record = state.ClusterRecord(name="g1", profile="alcf-2026-mini", inventory="",
                                 systems=["groq"], user="alice", ports={"groq-login-01": 22001})
    cluster.save(record)
    cluster.prepare(topology, record)
    recorded = json.loads((cluster.common_dir / "pbs" / "pbs.json").read_text())
    assert recorded == {"server": "groq-r01-control",
                        "moms": ["groq-r01-gn-01", "groq-r01-gn-02"],
                        "clients": ["groq-login-01"]}


def test_a_cluster_without_the_groqrack_has_no_complex(isolated_state):
    topology = inventory.load("mini", ["graphcore"])
    cluster = state.ClusterState("g2")
    record = state.ClusterRecord(name="g2", profile="mini", inventory="", systems=["graphcore"],
                                 user="alice", ports={})
    cluster.save(record)
    cluster.prepare(topology, record)
    assert not (cluster.common_dir / "pbs").exists()


def test_the_full_profile_has_the_documented_rack():
    nodes = {n.name: n for n in inventory.load("alcf-2026", ["groq"]).nodes}
    assert [n for n in nodes if n.startswith("groq-r01-gn-")] == [
        f"groq-r01-gn-0{i}" for i in range(1, 10)]
    login = nodes["groq-login-01"]
    assert login.ssh_mfa and "groq.ai.alcf.anl.gov" in login.dns_names
    assert nodes["groq-r01-control"].volumes == ("/var/spool/pbs",)
    assert set(nodes["groq-r01-gn-01"].services) == {"pbs", "tspd"}


def test_pbs_conf_starts_what_each_host_runs():
    server = pbs_setup.pbs_conf("server", "groq-r01-control")
    assert "PBS_SERVER=groq-r01-control\n" in server
    assert "PBS_START_SERVER=1\nPBS_START_SCHED=1\nPBS_START_COMM=1\nPBS_START_MOM=0\n" in server
    mom = pbs_setup.pbs_conf("mom", "groq-r01-control")
    assert "PBS_START_SERVER=0\nPBS_START_SCHED=0\nPBS_START_COMM=0\nPBS_START_MOM=1\n" in mom
    client = pbs_setup.pbs_conf("client", "groq-r01-control")
    assert "PBS_START_MOM=0" in client and "PBS_START_SERVER=0" in client
    assert [GROQ.role(n) for n in ("groq-r01-control", "groq-r01-gn-02", "groq-login-01")] == [
        "server", "mom", "client"]


def test_a_mom_copies_output_into_the_shared_trees():
    config = pbs_setup.mom_config("groq-r01-control", ["/home", "/projects"])
    assert config.splitlines() == ["$clienthost groq-r01-control", "$restrict_user_maxsysid 999",
                                   "$usecp *:/home/ /home/", "$usecp *:/projects/ /projects/"]


def test_the_server_gets_the_card_resource_the_nodes_and_the_submit_policy():
    commands = pbs_setup.server_commands(GROQ, {"groq-r01-gn-01"}, has_resource=False)
    assert commands[0] == "create resource groq_accelerator type=long,flag=nh"
    assert "set server default_chunk.groq_accelerator = 8" in commands
    assert "create node groq-r01-gn-02" in commands and "create node groq-r01-gn-01" not in commands
    assert "set node groq-r01-gn-01 resources_available.groq_accelerator = 8" in commands
    acl = next(c for c in commands if "acl_hosts =" in c)
    assert "groq-r01-gn-02.ai.alcf.anl.gov" in acl and "groq-login-01" not in acl
    again = pbs_setup.server_commands(GROQ, {"groq-r01-gn-01", "groq-r01-gn-02"}, True)
    assert not any(c.startswith("create") for c in again)


def test_the_scheduler_considers_the_cards():
    default = ('# comment\nresources: "ncpus, mem, arch, host, vnode, aoe, eoe"\n'
               'smp_cluster_dist: pack\n')
    changed = pbs_setup.sched_config(default)
    assert 'resources: "ncpus, mem, arch, host, vnode, aoe, eoe, groq_accelerator"\n' in changed
    assert pbs_setup.sched_config(changed) == changed
    assert changed.startswith("# comment\n") and changed.endswith("smp_cluster_dist: pack\n")


def test_the_hosts_block_is_replaced_and_the_rest_kept(tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1\tlocalhost\n172.18.0.5\tgroq-r01-control\n")
    addresses = {"groq-r01-control": "172.18.0.5", "groq-r01-gn-01": "172.18.0.6",
                 "groq-r01-gn-02": "172.18.0.7"}
    monkeypatch.setattr(pbs_setup, "resolve", lambda names: {n: addresses[n] for n in names
                                                             if n in addresses})
    assert pbs_setup.refresh_hosts(GROQ, "groq-r01-control", hosts)
    text = hosts.read_text()
    assert text.startswith("127.0.0.1\tlocalhost\n172.18.0.5\tgroq-r01-control\n")
    assert "172.18.0.6 groq-r01-gn-01.ai.alcf.anl.gov groq-r01-gn-01\n" in text
    assert "groq-r01-control.ai" not in text  # its own name stays Docker's line
    assert not pbs_setup.refresh_hosts(GROQ, "groq-r01-control", hosts)
    addresses["groq-r01-gn-01"] = "172.18.0.9"  # restarted with another address
    assert pbs_setup.refresh_hosts(GROQ, "groq-r01-control", hosts)
    text = hosts.read_text()
    assert text.count(pbs_setup.BEGIN) == 1 and "172.18.0.6" not in text
    assert "172.18.0.9 groq-r01-gn-01.ai.alcf.anl.gov" in text


def test_jobs_get_the_sites_shell_set_up():
    current = "PATH=/bin:/usr/bin\nTZ=UTC\n"
    changed = pbs_setup.pbs_environment(current, pbs_setup.JOB_BASH_ENV)
    assert changed == "PATH=/bin:/usr/bin\nTZ=UTC\nBASH_ENV=/etc/profile.d/conda.sh\n"
    assert pbs_setup.pbs_environment(changed, pbs_setup.JOB_BASH_ENV) == changed
    assert pbs_setup.pbs_environment(changed, None) == current
