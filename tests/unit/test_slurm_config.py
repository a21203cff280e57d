"""Each Slurm cluster's configuration, rendered from the inventory."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from aitestbed.host import inventory, slurmconf
from aitestbed.host.role_templates import role_dir


@pytest.fixture(scope="module")
def mini():
    return slurmconf.render(inventory.load("mini"))


@pytest.fixture(scope="module")
def alcf():
    return slurmconf.render(inventory.load("alcf"))


def test_one_scheduler_per_system_as_at_alcf(alcf):
    assert sorted(alcf) == ["graphcore", "sn10", "sn30"]
    hosts = {c: re.findall(r"^SlurmctldHost=(\S+)$", f["slurm.conf"], re.M)
             for c, f in alcf.items()}
    assert hosts == {"graphcore": ["gc-slurmctld"], "sn10": ["sn10-slurmctld"],
                     "sn30": ["sn30-slurmctld"]}


def test_p64_is_the_default_partition_over_the_four_pod_hosts(alcf):
    conf = alcf["graphcore"]["slurm.conf"]
    assert ("PartitionName=p64 Nodes=gc-poplar-01,gc-poplar-02,gc-poplar-03,gc-poplar-04 "
            "Default=YES") in conf
    assert conf.count("Gres=ipu:16") == 4
    assert re.search(r"^NodeName=gc-poplar-01 .* Weight=100 ", conf, re.M)
    assert re.search(r"^NodeName=gc-poplar-02 .* Weight=1 ", conf, re.M)
    assert alcf["graphcore"]["gres.conf"].count("Name=ipu Count=16") == 4


def test_ipus_and_vipu_hooks_only_on_the_graphcore_cluster_rdu_hooks_on_sambanova(alcf):
    assert "JobSubmitPlugins=lua" in alcf["graphcore"]["slurm.conf"]
    assert "PrologSlurmctld=" in alcf["graphcore"]["slurm.conf"]
    assert "spank_ipus.so vipu_host=vipu vipu_port=8090" in alcf["graphcore"]["plugstack.conf"]
    for cluster in ("sn30", "sn10"):
        assert "PrologSlurmctld" not in alcf[cluster]["slurm.conf"]
        # job_submit.lua gives a job that asks for no RDU one RDU
        assert "JobSubmitPlugins=lua" in alcf[cluster]["slurm.conf"]
        assert "spank_ipus" not in alcf[cluster]["plugstack.conf"]
        assert "Prolog=/usr/local/lib/aitestbed/slurm/rdu-prolog" in alcf[cluster]["slurm.conf"]


def test_sambanova_partitions_and_rdus(alcf):
    sn30 = alcf["sn30"]["slurm.conf"]
    assert sn30.count("Gres=rdu:8") == 8
    assert re.search(r"^PartitionName=sambanova Nodes=sn30-r1-h1,sn30-r1-h2,.*sn30-r4-h2 ", sn30,
                     re.M)
    assert "PartitionName=sambanova Nodes=sm-01,sm-02 " in alcf["sn10"]["slurm.conf"]
    assert '"rdu_tiles": 8' in alcf["sn30"]["aitestbed.json"]
    assert '"rdu_tiles": 4' in alcf["sn10"]["aitestbed.json"]


def test_the_documented_cpu_counts_are_declared(mini):
    assert "SlurmdParameters=config_overrides" in mini["sn10"]["slurm.conf"]
    assert "CPUs=128" in mini["sn10"]["slurm.conf"]  # --tasks-per-node 8 --cpus-per-task=16


def test_systems_without_slurm_render_nothing():
    assert slurmconf.render(inventory.load("mini", ["cerebras"])) == {}


def test_state_prepare_writes_a_munge_key_and_the_configuration(isolated_state):
    from aitestbed.host.state import ClusterRecord, ClusterState
    topology = inventory.load("mini", ["graphcore"])
    state = ClusterState("unit")
    state.prepare(topology, ClusterRecord("unit", "mini", "", ["graphcore"], "learner"))
    key = state.common_dir / "munge.key"
    assert len(key.read_bytes()) == 1024 and key.stat().st_mode & 0o777 == 0o600
    assert (state.common_dir / "slurm" / "graphcore" / "slurm.conf").is_file()
    first = key.read_bytes()
    state.prepare(topology, ClusterRecord("unit", "mini", "", ["graphcore"], "learner"))
    assert key.read_bytes() == first  # a key per cluster, kept


def test_a_node_failure_ends_jobs_node_fail_unless_they_asked_for_requeue(alcf):
    """Slurm's default JobRequeue=1 would requeue, and run again, every batch job."""
    for files in alcf.values():
        conf = files["slurm.conf"]
        assert re.search(r"^JobRequeue=0$", conf, re.M)
        # The node is DOWN about 3 pings after SlurmdTimeout: ~30 s, as the README says.
        assert re.search(r"^SlurmdTimeout=10$", conf, re.M)


@pytest.mark.parametrize("profile", ["mini", "alcf"])
def test_each_cluster_declares_only_its_own_accelerators(profile, request):
    """sinfo -O GresUsed lists every GresTypes entry: `ipu:0,rdu:0` on SambaNova nodes was the
    Graphcore type declared there. Now SambaNova shows `rdu:N`, Graphcore `ipu:N`."""
    rendered = request.getfixturevalue(profile)
    types = {c: re.findall(r"^GresTypes=(.*)$", f["slurm.conf"], re.M) for c, f in rendered.items()}
    assert types == {"graphcore": ["ipu"], "sn30": ["rdu"], "sn10": ["rdu"]}


# squeue on SN30 in the guide (002), as printed there (its leading blanks trimmed).
SN30_SQUEUE = [
    "JOBID PARTITION                      NAME     USER ST       TIME  NODES NODELIST(REASON)",
    "10191 sambanova            Gpt1.5B_run.sh  vsastry  R      23:18      2 "
    "sn30-r1-h1,sn30-r2-h2"]


def _squeue_line(fmt: str, values: list[str]) -> str:
    """What squeue prints for `fmt`: each %.N field right-aligned in N columns."""
    cells = []
    for field, value in zip(fmt.split(), values, strict=True):
        width = re.fullmatch(r"%(?:\.(\d+))?\w", field).group(1)
        cells.append(value.rjust(int(width))[-int(width):] if width else value)
    return " ".join(cells)


def _profile_format(script: str, settings: Path, tmp_path: Path, env: dict) -> str:
    text = script.replace("/etc/slurm/aitestbed.json", str(settings))
    (tmp_path / "profile.sh").write_text(text)
    done = subprocess.run(["sh", "-c", f". {tmp_path / 'profile.sh'}; "
                           "printf '%s' \"${SQUEUE_FORMAT-unset}\""],
                          capture_output=True, text=True, env=env, check=True)
    return done.stdout


def test_squeue_on_sn30_prints_the_guides_wide_name_column(alcf, tmp_path):
    script = (role_dir("slurm_client") / "files" / "squeue-format.sh").read_text()
    env = {"PATH": os.environ["PATH"]}
    formats = {}
    for cluster, files in alcf.items():
        settings = tmp_path / f"{cluster}.json"
        settings.write_text(files["aitestbed.json"])
        formats[cluster] = _profile_format(script, settings, tmp_path, env)
    assert formats["graphcore"] == formats["sn10"] == "unset"  # Slurm's default there
    fmt = formats["sn30"]
    assert fmt == json.loads(alcf["sn30"]["aitestbed.json"])["squeue_format"]
    header = ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    row = ["10191", "sambanova", "Gpt1.5B_run.sh", "vsastry", "R", "23:18", "2",
           "sn30-r1-h1,sn30-r2-h2"]
    assert [_squeue_line(fmt, cells).lstrip() for cells in (header, row)] == SN30_SQUEUE
    # A user's own choice stays theirs; a missing settings file sets nothing.
    assert _profile_format(script, tmp_path / "sn30.json", tmp_path,
                           {**env, "SQUEUE_FORMAT": "%i"}) == "%i"
    assert _profile_format(script, tmp_path / "absent.json", tmp_path, env) == "unset"
