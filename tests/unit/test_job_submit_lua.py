"""job_submit.lua on a Lua interpreter, with a stand-in for Slurm's `slurm` table.

Skipped where no Lua is installed (the controllers run it inside slurmctld; the
cluster tests cover it there).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "slurm_controller" / "files" / \
    "job_submit.lua"
LUA = next((p for p in map(shutil.which, ("lua5.3", "lua5.4", "lua")) if p), None)
HARNESS = """
slurm = {SUCCESS = 0, ERROR = -1, log_user = function(m) io.write("MSG ", m, "\\n") end}
local real_open = io.open
io.open = function(path, mode)
  if path == "/etc/slurm/aitestbed.json" then return real_open(arg[1], mode) end
  return real_open(path, mode)
end
dofile(arg[2])
local desc = {}
if arg[3] ~= "" then desc.tres_per_node = arg[3] end
if arg[4] ~= "" then desc.spank_job_env = {[0] = "_SLURM_SPANK_OPTION_ipus_ipus=" .. arg[4]} end
-- Numeric fields as slurmctld pushes them (lua_pushnumber), unset ones as NO_VAL.
desc.ntasks_per_node, desc.num_tasks, desc.min_nodes = 65534.0, 4294967294.0, 4294967294.0
for i = 5, #arg do
  local name, value = arg[i]:match("^([%w_]+)=(.*)$")
  desc[name] = tonumber(value) + 0.0
end
io.write("RC ", tostring(slurm_job_submit(desc, {}, 1000)), "\\n")
io.write("TRES ", tostring(desc.tres_per_node), "\\n")
"""


def submit(tmp_path, settings: str, tres: str = "", ipus: str = "",
           **fields: int) -> dict[str, str]:
    (tmp_path / "settings.json").write_text(settings)
    (tmp_path / "harness.lua").write_text(HARNESS)
    out = subprocess.run([LUA, str(tmp_path / "harness.lua"), str(tmp_path / "settings.json"),
                          str(SCRIPT), tres, ipus, *(f"{k}={v}" for k, v in fields.items())],
                         capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


pytestmark = pytest.mark.skipif(LUA is None, reason="no Lua interpreter on this machine")
SAMBANOVA = '{"rdu_tiles": 8}'


@pytest.mark.parametrize(("tres", "message"), [
    ("gres:rdu:-1", "--gres=rdu:-1: give a whole number of RDUs"),
    ("gres:rdu:abc", "--gres=rdu:abc: give a whole number of RDUs"),
    ("gres:rdu:0", "--gres=rdu:0 asks for no RDU"),
])
def test_a_bad_rdu_request_is_slurms_invalid_gres(tmp_path, tres, message):
    """C38/C40/C80: ESLURM_INVALID_GRES, 'Invalid generic resource (gres) specification'."""
    result = submit(tmp_path, SAMBANOVA, tres)
    assert result["RC"] == "2072"
    assert result["MSG"].startswith(message)


@pytest.mark.parametrize(("tres", "after"), [
    ("", "gres:rdu:1"), ("gres:rdu:2", "gres:rdu:2"), ("gres:rdu", "gres:rdu")])
def test_good_rdu_requests_pass_and_none_gets_one(tmp_path, tres, after):
    result = submit(tmp_path, SAMBANOVA, tres)
    assert (result["RC"], result["TRES"]) == ("0", after)


def test_an_ipu_count_becomes_the_gres_whatever_its_size(tmp_path):
    """Over-requests are the scheduler's to refuse (Requested node configuration...)."""
    result = submit(tmp_path, "{}", ipus="99999")
    assert (result["RC"], result["TRES"]) == ("0", "gres:ipu:99999")


@pytest.mark.parametrize("tres", ["gres:rdu:0", "gres:rdu:-1"])
def test_no_rdu_is_refused_even_with_tasks_to_raise_it(tmp_path, tres):
    """B15/C80: a job that holds no RDU would run PEFs on RDUs Slurm counts as free."""
    result = submit(tmp_path, SAMBANOVA, tres, ntasks_per_node=8, num_tasks=8, min_nodes=1)
    assert result["RC"] == "2072" and result["TRES"] == tres


@pytest.mark.parametrize(("tres", "fields", "after", "tasks"), [
    # the guide's UNet: sbatch --gres=rdu:1 --tasks-per-node 8 --nodes 2 (sbatch sets ntasks 16)
    ("gres:rdu:1", {"ntasks_per_node": 8, "num_tasks": 16, "min_nodes": 2}, "gres:rdu:8", 8),
    # the guide's GPT: --ntasks 32 --gres=rdu:1 --ntasks-per-node 16 --nodes 2
    ("gres:rdu:1", {"ntasks_per_node": 16, "num_tasks": 32, "min_nodes": 2}, "gres:rdu:8", 16),
    ("gres/rdu", {"ntasks_per_node": 4}, "gres/rdu:4", 4),
    ("", {"num_tasks": 6, "min_nodes": 2}, "gres:rdu:3", 3),  # --ntasks over --nodes
    ("", {"num_tasks": 5}, "gres:rdu:5", 5),  # no node count: all may share one node
    ("gres:rdu:2", {"ntasks_per_node": 16, "num_tasks": 3}, "gres:rdu:3", 3),
])
def test_more_tasks_per_node_than_rdus_hold_one_rdu_each(tmp_path, tres, fields, after, tasks):
    """B15: Slurm counts the RDUs the job's ranks use; each rank takes tiles of its job's RDUs."""
    result = submit(tmp_path, SAMBANOVA, tres, **fields)
    want = after.rsplit(":", 1)[1]
    assert (result["RC"], result["TRES"]) == ("0", after)
    assert result["MSG"] == (f"rdu: {tasks} tasks per node use {want} RDUs per node; "
                             f"the job asks for --gres=rdu:{want}")


@pytest.mark.parametrize(("tres", "fields", "after"), [
    ("gres:rdu:8", {"ntasks_per_node": 16, "num_tasks": 16, "min_nodes": 1}, "gres:rdu:8"),
    ("gres:rdu:2", {"ntasks_per_node": 2, "num_tasks": 4, "min_nodes": 2}, "gres:rdu:2"),
    ("gres:rdu:4", {"num_tasks": 1, "min_nodes": 1}, "gres:rdu:4"),  # never lowered
    ("", {"num_tasks": 1, "min_nodes": 1}, "gres:rdu:1"),  # plain srun
])
def test_enough_rdus_for_the_tasks_are_left_as_asked(tmp_path, tres, fields, after):
    result = submit(tmp_path, SAMBANOVA, tres, **fields)
    assert (result["RC"], result["TRES"], result.get("MSG")) == ("0", after, None)


def test_ipu_jobs_keep_their_tasks_and_gres(tmp_path):
    result = submit(tmp_path, "{}", ipus="4", ntasks_per_node=16, num_tasks=16, min_nodes=1)
    assert (result["RC"], result["TRES"], result.get("MSG")) == ("0", "gres:ipu:4", None)
