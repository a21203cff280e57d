"""pyslurm's conversions, without a cluster."""

import pyslurm
import pytest
from pyslurm import _backend
from pyslurm.job import Job
from pyslurm.partition import _minutes


@pytest.mark.parametrize("text, counts", [
    ("ipu:16", {"ipu": 16}), ("gres:ipu:2", {"ipu": 2}), ("ipu:0,rdu:4", {"rdu": 4}),
    ("", {}), (None, {}), ("(null)", {}),
])
def test_gres_strings(text, counts):
    assert _backend.parse_gres(text) == counts


def test_scontrol_one_line_records():
    line = "PartitionName=p64 AllowGroups=ALL Default=YES MaxTime=UNLIMITED Nodes=gc-poplar-[01-04]"
    assert _backend.key_values(line) == {"PartitionName": "p64", "AllowGroups": "ALL",
                                         "Default": "YES", "MaxTime": "UNLIMITED",
                                         "Nodes": "gc-poplar-[01-04]"}


@pytest.mark.parametrize("value, minutes", [
    ("UNLIMITED", "UNLIMITED"), ("NONE", None), ("1-00:00:00", 1440), ("01:30:00", 90),
    ("00:10", 1),
])
def test_times_are_minutes(value, minutes):
    assert _minutes(value) == minutes


def test_job_properties_use_pyslurms_names():
    job = Job._from_json({"job_id": 12, "name": "mnist", "job_state": "FAILED",
                          "exit_code": 3 << 8, "tres_per_node": "gres:ipu:4",
                          "current_working_directory": "/home/a", "nodes": "gc-poplar-02",
                          "node_count": 1, "time_limit": None, "batch_flag": True})
    assert (job.id, job.name, job.state, job.exit_code) == (12, "mnist", "FAILED", 3)
    assert job.gres_per_node == {"ipu": 4} and job.working_directory == "/home/a"
    assert job.allocated_nodes == "gc-poplar-02" and job.time_limit == "UNLIMITED"
    assert job.to_dict()["num_nodes"] == 1
    with pytest.raises(AttributeError):
        job.no_such_attribute  # noqa: B018


def test_submit_description_becomes_sbatch_options():
    desc = pyslurm.JobSubmitDescription(
        name="unet", nodes=2, ntasks_per_node=8, cpus_per_task=16, gres_per_node={"rdu": 1},
        required_nodes="sm-02,sm-01", standard_output="%x-%j.out", is_requeueable=True,
        environment={"OMP_NUM_THREADS": 16}, partitions=["sambanova"])
    args = desc.sbatch_arguments()
    for expected in ["--job-name=unet", "--nodes=2", "--ntasks-per-node=8",
                     "--cpus-per-task=16", "--gres=rdu:1", "--nodelist=sm-02,sm-01",
                     "--output=%x-%j.out", "--requeue", "--export=ALL,OMP_NUM_THREADS=16",
                     "--partition=sambanova"]:
        assert expected in args


def test_unknown_submit_attributes_and_missing_scripts_are_errors():
    with pytest.raises(pyslurm.ArgumentError, match="unknown JobSubmitDescription attribute"):
        pyslurm.JobSubmitDescription(nodez=2)
    with pytest.raises(pyslurm.ArgumentError, match="no script given"):
        pyslurm.JobSubmitDescription(name="x").submit()


def test_without_slurm_or_a_cluster_the_error_says_what_to_do(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("AITESTBED_CLUSTER", "nosuch")
    with pytest.raises(pyslurm.RPCError, match="no cluster 'nosuch'"):
        pyslurm.Jobs.load()
