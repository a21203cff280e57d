"""Reading Slurm's allocation, and the RDU records the SambaNova prolog keeps."""

import threading

import pytest
from aitestbed.graphcore import slurm_hooks as vipu_hooks
from aitestbed.graphcore.vipu.client import VipuClient
from aitestbed.graphcore.vipu.pod import Pod
from aitestbed.graphcore.vipu.server import VipuServer
from aitestbed.node import slurm_jobinfo as jobinfo
from aitestbed.sambanova import slurm_hooks as rdu_hooks
from aitestbed.sambanova.snd.client import SndClient
from aitestbed.sambanova.snd.server import SndServer

DETAIL = ("JobId=42 JobName=wrap UserId=learner(10001) JobState=RUNNING NumNodes=2 "
          "TresPerNode=gres:rdu:2   Nodes=sm-01 CPU_IDs=0-15 Mem=0 GRES=rdu(CNT:2)   "
          "Nodes=sm-02 CPU_IDs=0-15 Mem=0 GRES=rdu(CNT:2) MinCPUsNode=1")


def test_gres_per_node_from_scontrol_detail():
    assert jobinfo.gres_per_node(DETAIL) == {"sm-01": {"rdu": 2}, "sm-02": {"rdu": 2}}
    no_gres = "JobId=1 Nodes=gc-poplar-02 CPU_IDs=0 Mem=0 MinCPUsNode=1"
    assert jobinfo.gres_per_node(no_gres) == {"gc-poplar-02": {}}


@pytest.mark.parametrize("text, counts", [
    ("ipu(CNT:4)", {"ipu": 4}),
    ("rdu:2(CNT:2)", {"rdu": 2}),
    ("ipu(CNT:1),rdu(CNT:3)", {"ipu": 1, "rdu": 3}),
    ("", {}),
])
def test_parse_gres(text, counts):
    assert jobinfo.parse_gres(text) == counts


def test_the_vipu_prolog_reclaims_ipus_of_a_job_that_is_over(monkeypatch, tmp_path):
    """A partition left by a job whose epilog never ran must not block the POD."""
    gres = tmp_path / "gres.conf"
    gres.write_text("NodeName=gc-poplar-02 Name=ipu Count=16\n")
    server = VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = VipuClient(host="127.0.0.1", port=server.server_address[1], token=server.token)
    try:
        client.create_partition("slurm_1", {"gc-poplar-02": 12}, job_id="1")  # job 1 is over
        client.create_partition("hog", {"gc-poplar-02": 4})  # no job at all
        monkeypatch.setattr(vipu_hooks.VipuClient, "admin", lambda host: client)
        monkeypatch.setattr(vipu_hooks, "hook_settings", lambda: {"vipu_server": "vipu"})
        monkeypatch.setattr(vipu_hooks, "job_gres", lambda job: {"gc-poplar-02": {"ipu": 4}})
        monkeypatch.setattr(vipu_hooks, "active_job_ids", lambda: {"2"})  # only job 2 is active
        monkeypatch.setenv("SLURM_JOB_ID", "2")
        monkeypatch.setenv("SLURM_JOB_USER", "learner")
        vipu_hooks.vipu_prolog()
        assert [p["name"] for p in client.partitions()] == ["slurm_2"]
        assert len(client.partition("slurm_2")["ipus"]) == 4
    finally:
        server.shutdown()
        server.server_close()


def test_the_rdu_prolog_reclaims_rdus_of_a_job_that_is_over(monkeypatch, tmp_path):
    """RDUs left to a job whose epilog never ran (its node died) must not block the node."""
    server = SndServer(tmp_path / "snd.sock", tmp_path, node="sm-01", tiles_per_rdu=4)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AITESTBED_SND_SOCKET", str(tmp_path / "snd.sock"))
    try:
        SndClient().reserve("1", "learner", 8)  # job 1 is over
        monkeypatch.setattr(rdu_hooks.socket, "gethostname", lambda: "sm-01")
        monkeypatch.setattr(rdu_hooks, "job_gres", lambda job: {"sm-01": {"rdu": 2}})
        monkeypatch.setattr(rdu_hooks, "active_job_ids", lambda: {"2"})  # only job 2 is active
        monkeypatch.setenv("SLURM_JOB_ID", "2")
        monkeypatch.setenv("SLURM_JOB_USER", "learner")
        rdu_hooks.rdu_prolog()
        assert SndClient().jobs() == {"2": {"user": "learner", "rdus": [0, 1]}}
    finally:
        server.shutdown()
        server.server_close()


def test_active_jobs_are_read_from_squeue(monkeypatch):
    asked = []
    monkeypatch.setattr(jobinfo, "squeue", lambda *args: asked.append(args) or "2\n17\n")
    assert jobinfo.active_job_ids() == {"2", "17"}
    assert asked == [("-h", "-t", jobinfo.ACTIVE_STATES, "-o", "%i")]


@pytest.mark.parametrize("hooks", [vipu_hooks, rdu_hooks])
def test_a_hook_module_names_its_hooks_when_called_wrongly(hooks, capsys):
    with pytest.raises(SystemExit) as exit_:
        hooks.main(["nonsense"])
    assert str(exit_.value).startswith(f"usage: python -m {hooks.__name__} {{")
