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
io.write("RC ", tostring(slurm_job_submit(desc, {}, 1000)), "\\n")
io.write("TRES ", tostring(desc.tres_per_node), "\\n")
"""


def submit(tmp_path, settings: str, tres: str = "", ipus: str = "") -> dict[str, str]:
    (tmp_path / "settings.json").write_text(settings)
    (tmp_path / "harness.lua").write_text(HARNESS)
    out = subprocess.run([LUA, str(tmp_path / "harness.lua"), str(tmp_path / "settings.json"),
                          str(SCRIPT), tres, ipus], capture_output=True, text=True, check=True)
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
