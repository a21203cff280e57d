"""The current docs' Cerebras cluster (the alcf-2026 profile): the CS-3, its cluster
settings, Release 2.10's csctl, job priorities and workflows, and the 2.10 wheel."""

import datetime
import zipfile

import pytest
from aitestbed.cerebras import cs2, cs3, csctl, timing, wsjob
from aitestbed.cerebras.scheduler import Limits, decide
from aitestbed.host.inventory import load
from aitestbed.host.systems import cerebras as cerebras_entry

from .test_wsjob_scheduler import job, name

pytestmark = pytest.mark.unit

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
SETTINGS = {"release": "2.10.0", "system_model": "CS-3", "systems": ["cer-cs3-01", "cer-cs3-02"],
            "management_node": "cer-mgmt-01", "max_execute": 2,
            "support": {"workers": 4, "activation": 4, "swarmx": 8,
                        "memoryx_groups": [[12, "1128Gi"], [12, "183Gi"]]}}
GPT3 = cs2.Workload("gpt3", 111_000_000, 50257 * 768, 768, 2048, 120)


def test_the_cs3_is_the_documented_wafer():
    assert cs3.WSE3.cores == 900_000 and cs3.WSE3.memory_per_core == 48 * 1024
    assert cs3.WSE3.memory_bytes == pytest.approx(44e9, rel=0.01)  # "44GB"
    assert cs3.ALCF_CLUSTER.chips == 4
    assert cs2.usable_bytes(cs3.CS3) > cs2.usable_bytes(cs2.CS2)
    # a layer the CS-3's extra 50,000 cores hold and the CS-2's do not
    wide = cs2.Workload("generic", 10**10, 6_200_000_000, 4096, 2048, 8)
    assert cs2.check_fit(wide, system=cs3.CS3)
    with pytest.raises(cs2.WaferOutOfMemoryError, match="does not fit on the CS-2 wafer"):
        cs2.check_fit(wide)
    huge = wide.with_(largest_layer_parameters=7_000_000_000)
    with pytest.raises(cs2.WaferOutOfMemoryError, match=r"does not fit on the CS-3 wafer.*"
                                                        r"900,000 cores x 48 KB"):
        cs2.check_fit(huge, system=cs3.CS3)


def test_gpt3_timing_is_the_docs_sample_on_one_cs3():
    # "Processed 48000 training sample(s) in 820.575766695 seconds": the 400 steps, the
    # checkpoint and the validation (its staging and 100 batches)
    seconds = sum(timing.step_seconds(GPT3, s, 1, system=cs3.CS3) for s in range(1, 401))
    evaluation = GPT3.with_(training=False)
    validation = timing.weight_transfer_seconds(GPT3) + timing.PROGRAMMING_SECONDS + sum(
        timing.step_seconds(evaluation, s, 1, system=cs3.CS3) for s in range(1, 101))
    assert seconds + timing.checkpoint_seconds(GPT3, cs3.CS3) + validation == pytest.approx(
        820.58, rel=0.002)
    assert 120 / timing.steady_step_seconds(evaluation, 1, cs3.CS3) == pytest.approx(1170)
    assert timing.compile_seconds(GPT3) == pytest.approx(72.0)
    assert timing.checkpoint_seconds(GPT3) == pytest.approx(6.66)  # 60 s per billion
    # a CS-2 is slower by its cores, the seeds' models on a CS-3 faster by the same
    assert timing.steady_step_seconds(GPT3, 1, cs2.CS2) > timing.steady_step_seconds(
        GPT3, 1, cs3.CS3)


def test_the_inventory_says_what_the_cluster_is():
    settings = cs3.inventory_settings({"cerebras_release": "2.10.0",
                                       "cerebras_system_model": "CS-3",
                                       "cerebras_support": SETTINGS["support"]})
    assert settings["max_execute"] == 2 and settings["system_model"] == "CS-3"
    assert cs3.inventory_settings({})["release"] == "2.1.1"
    assert cs3.inventory_settings({})["max_execute"] == 1
    with pytest.raises(ValueError, match="unknown Cerebras system model"):
        cs3.inventory_settings({"cerebras_system_model": "CS-4"})
    with pytest.raises(ValueError, match="cerebras_support is malformed"):
        cs3.inventory_settings({"cerebras_support": {"memoryx_groups": [["x", "1Gi"]]}})


@pytest.mark.parametrize("profile, logins, usernodes, systems", [
    ("alcf-2026", ["cer-login-04", "cer-login-05"],
     ["cer-anl-net001-us-sr01", "cer-anl-net001-us-sr02"], 4),
    ("alcf-2026-mini", ["cer-login-04"], ["cer-anl-net001-us-sr01"], 2)])
def test_the_2026_profiles(profile, logins, usernodes, systems):
    topology = load(profile)
    names = [n.name for n in topology.nodes]
    assert [n for n in names if n.startswith("cer-login")] == logins
    assert [n.name for n in topology.nodes if n.ssh_publish and n.system == "cerebras"] == logins
    assert all("cerebras.alcf.anl.gov" in topology.node(n).dns_aliases for n in logins)
    assert [topology.node(n).dns_aliases[0] for n in usernodes] == [
        f"cer-usn-0{i}" for i in range(1, len(usernodes) + 1)]
    assert not any(topology.node(n).ssh_mfa or topology.node(n).ssh_publish for n in usernodes)
    assert len([n for n in names if n.startswith("cer-cs3-")]) == systems
    assert "gc-login-03" in names and not any(n.startswith(("gc-login-01", "sn", "sm-"))
                                              for n in names)
    settings = cs3.inventory_settings(topology.hostvars["cer-mgmt-01"])
    assert (settings["release"], settings["system_model"], settings["max_execute"]) == (
        "2.10.0", "CS-3", 2)


def test_two_memoryx_groups_run_two_execute_jobs_at_once():
    limits = Limits(systems=("cer-cs3-01", "cer-cs3-02"), management_node="cer-mgmt-01",
                    max_execute=2)
    a, b, c = job(), job(), job()
    out = decide([a, b, c], limits, NOW)
    assert set(out.schedule) == {name(a), name(b)}
    assert "2 execute job(s) running" in out.messages[name(c)]


def test_priority_orders_the_queue_then_age():
    old_p3 = job(priority=399)
    new_p1 = job(priority=199)
    out = decide([old_p3, new_p1], Limits(systems=("cer-cs3-01",),
                                          management_node="cer-mgmt-01"), NOW)
    assert list(out.schedule) == [name(new_p1)]
    made = wsjob.build("execute", {"job_priority": "p1"}, "u", 1, 1, workflow="wflow-abc")
    assert made["spec"]["priority"] == 199 and made["spec"]["workflowId"] == "wflow-abc"
    assert wsjob.build("compile", {}, "u", 1, 1)["spec"]["priority"] == 299
    assert wsjob.priority_label(299) == "P2 (299)"
    assert wsjob.new_workflow_id().startswith("wflow-")


def _job(name_, kind, phase, created, systems=(), priority=299, started=None):
    status = {"phase": phase, "systems": list(systems)}
    if started:
        status["startTime"] = started
    return {"metadata": {"name": name_, "namespace": "job-operator",
                         "creationTimestamp": created, "labels": {"name": "llama2_7b",
                                                                  "user": "username"}},
            "spec": {"user": {"username": "username"}, "jobType": kind, "numWafers": 1,
                     "priority": priority, "workflowId": "wflow-wuetecva5mb8riup5swrff"},
            "status": status}


def test_the_docs_get_jobs_row():
    """job-queuing-and-submission.md's sample: a running compile job."""
    row = _job("wsjob-ewhzngfg6rdjhw3s3k2wbh", "compile", "RUNNING", "2026-11-22T11:48:00Z",
               started="2026-11-22T11:48:00Z")
    header, line = csctl.format_jobs([row], "table", NOW,
                                     edition=csctl.EDITION_2026).splitlines()
    assert header.split() == ["SESSION", "NAME", "TYPE", "PRIORITY", "AGE", "DURATION", "PHASE",
                              "SYSTEMS", "USER", "LABELS", "WORKFLOW", "DASHBOARD"]
    assert line.split()[:5] == ["job-operator", "wsjob-ewhzngfg6rdjhw3s3k2wbh", "compile",
                                "P2", "(299)"]
    assert "wflow-wuetecva5mb8riup5swrff  https://grafana.anl0.cerebras.internal/d/" in line
    assert line.index("12m") == header.index("AGE")


def test_get_cluster_shows_the_systems_and_the_servers_around_them():
    running = _job("wsjob-a", "execute", "RUNNING", "2026-11-22T11:50:00Z",
                   systems=["cer-cs3-02"], started="2026-11-22T11:51:00Z")
    rows = csctl.cluster_rows(SETTINGS, [running])
    systems = [r for r in rows if r["type"] == "system"]
    assert [(r["name"], r["role"], r["state"]) for r in systems] == [
        ("cer-cs3-01", "CS-3", "ok"), ("cer-cs3-02", "CS-3", "in use")]
    roles = [r["role"] for r in rows if r["type"] == "node"]
    assert roles.count("worker") == 4 and roles.count("activation") == 4
    assert roles.count("memoryx") == 24 and roles.count("swarmx") == 8
    assert roles.count("management") == 1
    memx = [r for r in rows if r["role"] == "memoryx"]
    assert {r["jobs"][0] for r in memx[:12]} == {"wsjob-a"} and not any(r["jobs"]
                                                                        for r in memx[12:])
    assert memx[0]["details"] == "nodegroup0 1128Gi" and memx[12]["details"] == "nodegroup1 183Gi"
    table = csctl.format_cluster(rows, "table")
    assert table.splitlines()[0].split() == ["NAME", "TYPE", "ROLE", "DETAILS", "STATE", "JOBS"]
    groups = csctl.format_nodegroups(SETTINGS, [running]).splitlines()
    assert groups[1].split() == ["nodegroup0", "12", "1128Gi", "wsjob-a"]


def test_the_2026_help_version_and_flags(capsys):
    assert csctl.main(["-h"], SETTINGS) == 0
    assert capsys.readouterr().out == csctl.USAGE_2026
    assert "check-volumes      Check volume validity on this usernode" in csctl.USAGE_2026
    assert csctl.main(["--version"], SETTINGS) == 0
    assert capsys.readouterr().out == "csctl version 2.10.0\n"
    assert csctl.main(["-v"], SETTINGS) == 1
    assert "unknown shorthand flag: 'v' in -v" in capsys.readouterr().err
    assert csctl.main(["types"], SETTINGS) == 0
    assert "cluster" in capsys.readouterr().out.split()
    assert csctl.main(["system-maintenance"], SETTINGS) == 1
    assert "does not offer it" in capsys.readouterr().err
    # the 2023 cluster keeps the guide's csctl
    assert csctl.main(["-v"], {}) == 0 and "2.1.1" in capsys.readouterr().out
    assert csctl.main(["check-volumes"], {}) == 1
    assert 'unknown command "check-volumes"' in capsys.readouterr().err
    args = csctl.parser().parse_args(["get", "jobs", "-a", "-m", "--sort", "age", "-n", "ns"])
    assert (args.all, args.my_jobs, args.sort, args.namespace) == (True, True, "age", "ns")


def test_sorting_by_priority_then_age():
    p3 = _job("wsjob-c", "execute", "QUEUEING", "2026-11-22T11:00:00Z", priority=399)
    p1 = _job("wsjob-b", "execute", "QUEUEING", "2026-11-22T11:30:00Z", priority=199)
    p2 = _job("wsjob-a", "execute", "QUEUEING", "2026-11-22T11:10:00Z")
    names = [j["metadata"]["name"] for j in csctl.sort_jobs([p3, p1, p2], "priority", "desc")]
    assert names == ["wsjob-b", "wsjob-a", "wsjob-c"]
    by_age = [j["metadata"]["name"] for j in csctl.sort_jobs([p3, p1, p2], "age", "desc")]
    assert by_age == ["wsjob-c", "wsjob-a", "wsjob-b"]


def _as_site_runs_it(line: str) -> None:
    import sys
    before = list(sys.path)
    try:
        exec(line)  # noqa: S102 - what site.addpackage does with an "import" line
    finally:
        sys.path[:] = before


def test_the_2_10_wheel_has_the_new_names_and_sees_the_systems_torch(tmp_path, monkeypatch):
    monkeypatch.setattr(cerebras_entry, "copy_mnist_source", lambda root, out: None)
    monkeypatch.setattr(cerebras_entry, "fresh_output",
                        lambda root, name: tmp_path / name)
    out = cerebras_entry.build_cerebras()
    with zipfile.ZipFile(out / "cerebras_pytorch-2.10.0-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        assert {"cerebras/pytorch/__init__.py", "cerebras/appliance/__init__.py",
                "cerebras_pytorch-system-packages.pth"} <= names
        assert "cerebras/__init__.py" not in names  # a namespace shared with the modelzoo
        line = wheel.read("cerebras_pytorch-system-packages.pth").decode()
        assert line.startswith("import ") and line.count("\n") == 1
        _as_site_runs_it(line)  # site.py execs the line inside a function
        metadata = wheel.read("cerebras_pytorch-2.10.0.dist-info/METADATA").decode()
        assert "Requires-Dist" not in metadata
        version = wheel.read("cerebras_pytorch/_version.py").decode()
        assert '__version__ = "2.10.0"' in version
    with zipfile.ZipFile(out / "cerebras_pytorch-2.1.1-py3-none-any.whl") as wheel:
        assert "cerebras/pytorch/__init__.py" not in wheel.namelist()


def test_cerebras_pytorch_under_its_2_10_name_is_the_same_module():
    import cerebras.pytorch as cstorch
    import cerebras.pytorch.utils.data as data
    import cerebras_pytorch
    import cerebras_pytorch.utils.data
    assert cstorch is cerebras_pytorch and data is cerebras_pytorch.utils.data


def test_a_release_2_10_cluster_links_the_current_docs_dataset_tree(tmp_path, monkeypatch):
    """Two of the docs' YAML paths are the 2023 guide's in a newer format: a 2.10 cluster
    shows /software/cerebras/dataset from its own tree, and /software/datasets."""
    from aitestbed.cerebras import node_setup

    monkeypatch.setattr(node_setup, "SOFTWARE", tmp_path / "software" / "cerebras")
    monkeypatch.setattr(node_setup, "DATASETS", tmp_path / "software" / "datasets")
    monkeypatch.setattr(node_setup, "SOFTWARE_SOURCE", tmp_path / "image")
    node_setup.link_software("2.10.0")
    assert (tmp_path / "software" / "cerebras" / "dataset").readlink() == \
        tmp_path / "image" / "dataset-r2.10"
    assert (tmp_path / "software" / "datasets").readlink() == tmp_path / "image" / "datasets"
    older = node_setup.software_links("2.1.1")
    assert older[node_setup.SOFTWARE / "dataset"] == tmp_path / "image" / "dataset"
    assert node_setup.DATASETS not in older
    # what is there already (a user's, an earlier start's) stays
    mine = tmp_path / "software" / "cerebras" / "python3.8"
    mine.unlink()
    mine.mkdir()
    node_setup.link_software("2.10.0")
    assert mine.is_dir() and not mine.is_symlink()


def test_the_dashboard_of_a_running_job_runs_to_now():
    job = {"metadata": {"name": "wsjob-abc", "creationTimestamp": "2025-10-13T14:47:49Z"},
           "status": {}}
    assert csctl.dashboard(job, csctl.EDITION_2026) == (
        "https://grafana.anl0.cerebras.internal/d/WebHNShVz/wsjob-dashboard?orgId=1"
        "&var-wsjob=wsjob-abc&from=1760366869000&to=now")
