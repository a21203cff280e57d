"""The one reader of Slurm's text (node/slurm_text): every GRES form its callers see, the
scontrol -o record, the job detail's node entries and the squeue/sacct tables."""

import pytest
from aitestbed.node.slurm_text import (
    Gres,
    gres_items,
    job_nodes,
    key_values,
    parse_gres,
    parse_table,
)


@pytest.mark.parametrize("text, counts", [
    # slurm.conf / scontrol show node `Gres=`, sinfo %G, pyslurm's node "gres"
    ("ipu:16", {"ipu": 16}),
    ("rdu:8(S:0-1)", {"rdu": 8}),  # the sockets are no count
    ("gpu:tesla:2", {"gpu": 2}),
    ("gpu:tesla:1,gpu:k80:2", {"gpu": 3}),  # the types of one name add up
    ("gpu:1g.5gb:3", {"gpu": 3}),  # a MIG type holds dots
    ("gpu", {"gpu": 1}),  # slurm.conf: the count defaults to one
    ("gpu:tesla", {"gpu": 1}),
    ("bandwidth:lustre:no_consume:4G", {"bandwidth": 4 * 1024**3}),
    ("ipu:0,rdu:4", {"ipu": 0, "rdu": 4}),  # zero counts are kept (pyslurm drops them)
    # squeue %b, scontrol's TresPerNode, pyslurm's job "tres_per_node"
    ("gres:ipu:16", {"ipu": 16}),  # up to Slurm 22.05
    ("gres/ipu:4", {"ipu": 4}),  # from 23.02
    ("gres:gpu:tesla:2", {"gpu": 2}),
    ("gres:rdu", {"rdu": 1}),
    # TRES strings: AllocTRES, CfgTRES, jobcomp's Tres
    ("gres/ipu=4", {"ipu": 4}),
    ("cpu=1,mem=515000M,node=1,billing=1,gres/rdu=2", {"rdu": 2}),
    ("cpu=128,mem=515000M,billing=128", {}),
    ("gres/gpu=3,gres/gpu:a=1,gres/gpu:b=2", {"gpu": 3}),  # the untyped one is the total
    ("gres/gpu:a=1,gres/gpu:b=2", {"gpu": 3}),
    # scontrol -d show job `GRES=` per node, GresUsed=
    ("ipu(CNT:4)", {"ipu": 4}),  # a count-only resource
    ("rdu:2(CNT:2)", {"rdu": 2}),
    ("ipu(CNT:1),rdu(CNT:3)", {"ipu": 1, "rdu": 3}),
    ("gpu:2(IDX:0-1)", {"gpu": 2}),
    ("gpu:tesla:2(IDX:0-1)", {"gpu": 2}),
    ("gpu(IDX:0,2-3)", {"gpu": 3}),  # no count: its indexes (the comma stays inside)
    ("gpu:0(IDX:N/A),ipu:4(CNT:4)", {"gpu": 0, "ipu": 4}),
    ("gpu:a:1(IDX:0),gpu:b:1(IDX:1)", {"gpu": 2}),
    # nothing
    ("", {}), (None, {}), ("(null)", {}), ("N/A", {}), (" ", {}),
])
def test_gres_counts_by_name(text, counts):
    assert parse_gres(text) == counts


@pytest.mark.parametrize("text, counts", [
    ("ipu:16", {"ipu": 16}),
    ("gpu:tesla:1,gpu:k80:2", {"gpu:tesla": 1, "gpu:k80": 2}),
    ("gres:gpu:tesla:2", {"gpu:tesla": 2}),
    ("gres/gpu=3,gres/gpu:a=1,gres/gpu:b=2", {"gpu": 3, "gpu:a": 1, "gpu:b": 2}),
    ("ipu(CNT:4)", {"ipu": 4}),
])
def test_gres_counts_by_name_and_type(text, counts):
    assert parse_gres(text, typed=True) == counts


def test_gres_items_keep_name_type_and_count():
    assert gres_items("gres:gpu:tesla:2,ipu(CNT:4),cpu=1") == [
        Gres("gpu", "tesla", 2), Gres("ipu", "", 4)]
    assert [g.key for g in gres_items("gpu:tesla:2,ipu:1")] == ["gpu:tesla", "ipu"]


def test_scontrol_one_line_records():
    line = "PartitionName=p64 AllowGroups=ALL Default=YES MaxTime=UNLIMITED Nodes=gc-poplar-[01-04]"
    assert key_values(line) == {"PartitionName": "p64", "AllowGroups": "ALL", "Default": "YES",
                                "MaxTime": "UNLIMITED", "Nodes": "gc-poplar-[01-04]"}


def test_a_record_keeps_values_with_spaces_empty_values_and_odd_keys():
    line = ("NodeName=gc-poplar-01 CoresPerSocket=64  Gres=ipu:16 OS=Linux 6.18.44 #1 SMP @0  "
            "RealMemory=515000 AllocTRES= CfgTRES=cpu=128,gres/ipu=16 Socks/Node=* "
            "S:C:T=*:*:* Reason=Not responding [slurm@2026-11-27T02:13:01] ExitCode=0:0 \n")
    assert key_values(line) == {
        "NodeName": "gc-poplar-01", "CoresPerSocket": "64", "Gres": "ipu:16",
        "OS": "Linux 6.18.44 #1 SMP @0", "RealMemory": "515000", "AllocTRES": "",
        "CfgTRES": "cpu=128,gres/ipu=16", "Socks/Node": "*", "S:C:T": "*:*:*",
        "Reason": "Not responding [slurm@2026-11-27T02:13:01]", "ExitCode": "0:0"}
    jobcomp = "JobId=3 UserId=learner(10001) Name=my job JobState=COMPLETED WorkDir=/home/a b"
    assert key_values(jobcomp)["Name"] == "my job"
    assert key_values(jobcomp)["WorkDir"] == "/home/a b"
    assert key_values("Command=/bin/run --steps=2 JobId=4")["Command"] == "/bin/run --steps=2"
    assert key_values("") == {} and key_values("garbage") == {}


def test_the_job_details_node_entries():
    detail = ("JobId=42 JobName=wrap TresPerNode=gres:rdu:2   Nodes=sm-01 CPU_IDs=0-15 Mem=0 "
              "GRES=rdu(CNT:2)   Nodes=sm-[02-03] CPU_IDs=0-15 Mem=0 GRES=gpu:2(IDX:0,2) "
              "Nodes=sm-04 CPU_IDs=0 Mem=0 MinCPUsNode=1")
    assert job_nodes(detail) == [("sm-01", "rdu(CNT:2)"), ("sm-[02-03]", "gpu:2(IDX:0,2)"),
                                 ("sm-04", "")]


def test_squeue_and_sacct_tables():
    fields = ("JobID", "State", "ExitCode", "NodeList")
    text = "42|CANCELLED by 1001|0:0|\ngarbage\n43|COMPLETED|0:0|sm-01\n"
    assert parse_table(text, fields, "|") == [
        {"JobID": "42", "State": "CANCELLED by 1001", "ExitCode": "0:0", "NodeList": ""},
        {"JobID": "43", "State": "COMPLETED", "ExitCode": "0:0", "NodeList": "sm-01"}]
    us = "\x1f"
    assert parse_table(us.join(("7", "my job")) + "\n", ("JobId", "Name"), us) == [
        {"JobId": "7", "Name": "my job"}]
    assert parse_table("", fields, "|") == []
