"""The snd daemon (RDUs and tiles of a DataScale node) and the tools that ask it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from aitestbed.node import systemctl
from aitestbed.sambanova import snconfig, sntilestat
from aitestbed.sambanova.rdu import tile_names
from aitestbed.sambanova.snd.client import SndClient, SndError, SndUnavailable
from aitestbed.sambanova.snd.server import SndServer
from aitestbed.sambanova.snd.state import PlacementError, RduNode

from . import ansible_render

pytestmark = pytest.mark.unit


def test_tiles_are_named_as_sntilestat_lists_them():
    assert tile_names(3, 4) == [f"/XRDU_1/RDU_1/TILE_{t}" for t in range(4)]


def _open(node: RduNode, tiles: int, job: str | None, pid: int = 100, user: str = "alice"):
    return node.open_session(pid=pid, start_ticks=1, user=user, command="python app.py run",
                             job_id=job, tiles=tiles, now=0.0)


def test_jobs_get_the_lowest_free_rdus_and_a_retried_prolog_gets_the_same():
    node = RduNode("sn30-r1-h1", 8)
    first = node.reserve("1", "alice", 2)
    assert first["rdus"] == [0, 1] and node.reserve("2", "bob", 3)["rdus"] == [2, 3, 4]
    assert node.reserve("1", "alice", 2) is first
    with pytest.raises(PlacementError, match="needs 4 RDUs, 3 are free"):
        node.reserve("3", "carol", 4)
    node.release("1")
    assert node.reserve("3", "carol", 2)["rdus"] == [0, 1]


def test_a_pef_gets_an_aligned_block_of_its_jobs_tiles():
    node = RduNode("sn30-r1-h1", 8)
    node.reserve("7", "alice", 1)
    assert _open(node, 4, "7").tiles == tile_names(0, 8)[:4]
    assert _open(node, 4, "7").tiles == tile_names(0, 8)[4:]
    with pytest.raises(PlacementError, match="no 4 free tiles"):
        _open(node, 4, "7")


def test_a_pef_bigger_than_the_jobs_rdus_fails_with_what_to_ask_for():
    node = RduNode("sm-01", 4)
    node.reserve("8", "alice", 1)
    with pytest.raises(PlacementError, match=r"needs 8 tiles but job 8 holds 4 .*--gres=rdu:2"):
        _open(node, 8, "8")


def test_outside_slurm_there_is_no_rdu():
    node = RduNode("sn30-r1-h1", 8)
    with pytest.raises(PlacementError, match="run it with srun or sbatch"):
        _open(node, 4, None)


def test_a_one_rdu_job_cannot_take_tiles_outside_its_rdu():
    """B15: alice's 1-RDU job tries eight 4-tile sessions as data-parallel ranks would: two
    share her RDU, the rest are refused, and bob's 6-RDU job gets its RDUs whole."""
    node = RduNode("sn30-r1-h1", 8)
    node.reserve("3", "alice", 1)
    ranks = [_open(node, 4, "3", pid=200 + i) for i in range(2)]
    assert {t for s in ranks for t in s.tiles} == set(tile_names(0, 8))
    for pid in range(202, 208):
        with pytest.raises(PlacementError, match=r"job 3 have no 4 free tiles together; in use "
                                                 r"by PID 200 \(alice\), 201 \(alice\): its "
                                                 r"processes need 12 tiles together, ask for "
                                                 r"--gres=rdu:2"):
            _open(node, 4, "3", pid=pid)
    with pytest.raises(PlacementError, match="needs 16 tiles but job 3 holds 8 .*--gres=rdu:2"):
        _open(node, 16, "3", pid=300)
    assert {node._rdu_of(t) for s in node.sessions.values() for t in s.tiles} == {0}
    bob = node.reserve("4", "bob", 6)
    assert bob["rdus"] == [1, 2, 3, 4, 5, 6]
    assert len(_open(node, 48, "4", pid=400, user="bob").tiles) == 48


def test_a_job_holding_no_rdu_gets_no_tile():
    """C80: even if a job reached the node with rdu:0, it could not take tiles."""
    node = RduNode("sm-01", 4)
    node.reserve("5", "alice", 0)
    with pytest.raises(PlacementError, match=r"needs 4 tiles but job 5 holds 0 .*--gres=rdu:1"):
        _open(node, 4, "5")
    assert not node.sessions


@pytest.mark.parametrize(("tiles_per_rdu", "ranks", "rdus"), [
    (8, 8, 8),  # the guide's Unet2d prun: sbatch --gres=rdu:1 --tasks-per-node 8 -> rdu:8
    (8, 8, 4),  # two 4-tile ranks share an SN30 RDU's tiles
    (8, 16, 8),  # GPT 1.5B: --ntasks-per-node 16 -> rdu:8, 16 x 4 tiles
    (4, 8, 8),  # SN10 UNet (unet_all.sh): a 4-tile rank fills an SN10 RDU
])
def test_data_parallel_ranks_fit_in_their_jobs_rdus(tiles_per_rdu, ranks, rdus):
    node = RduNode("node", tiles_per_rdu)
    node.reserve("9", "alice", rdus)
    node.reserve("10", "bob", 8 - rdus)
    sessions = [_open(node, 4, "9", pid=200 + i) for i in range(ranks)]
    used = {t for s in sessions for t in s.tiles}
    assert len(used) == 4 * ranks
    assert {node._rdu_of(t) for t in used} <= set(node.jobs["9"]["rdus"])
    if ranks * 4 == rdus * tiles_per_rdu:
        with pytest.raises(PlacementError, match="no 4 free tiles"):
            _open(node, 4, "9", pid=300)


def test_sessions_of_dead_processes_are_reaped_and_the_state_survives_a_restart():
    node = RduNode("sn30-r1-h1", 8)
    node.reserve("11", "alice", 1)
    _open(node, 4, "11", pid=1)
    _open(node, 4, "11", pid=2)
    assert node.reap(lambda pid, ticks: pid == 1) == ["2-1"]
    again = RduNode.from_dict(node.to_dict())
    assert again.jobs == node.jobs and list(again.sessions) == ["1-0"]
    assert _open(again, 4, "11", pid=3).id not in node.sessions


def test_tile_rows_show_the_time_shares_of_the_holding_process():
    node = RduNode("sn30-r1-h1", 8)
    node.reserve("12", "alice", 1)
    session = _open(node, 8, "12")
    session.set_state("exec", 1.0)
    row = node.tile_rows(now=4.0)[0]
    assert row["pid"] == 100 and row["user"] == "alice" and row["job"] == "12"
    assert (round(row["pload"]), round(row["exec"]), row["status"]) == (25, 75, "perfect")
    assert node.tile_rows(now=4.0)[8]["idle"] == 100.0


@pytest.fixture
def snd(tmp_path, monkeypatch):
    socket_path = tmp_path / "snd.sock"
    server = SndServer(socket_path, tmp_path / "state", node="sn30-r1-h1", tiles_per_rdu=8)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AITESTBED_SND_SOCKET", str(socket_path))
    yield server
    server.shutdown()
    server.server_close()


def test_the_daemon_knows_the_caller_from_the_socket_and_frees_tiles_of_exited_processes(snd):
    client = SndClient()
    client.reserve("21", "root", 1)
    mine = client.open_session(4, "21")
    assert mine["id"].startswith(f"{os.getpid()}-")
    child = subprocess.run(
        [sys.executable, "-c", "from aitestbed.sambanova.snd.client import SndClient; "
         "print(SndClient().open_session(4, '21')['tiles'][0])"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": "emulator"})
    assert child.stdout.strip() == "/XRDU_0/RDU_0/TILE_4", child.stderr
    rows = [r for r in client.tiles() if r["pid"]]  # the child has exited: only ours remain
    assert {r["pid"] for r in rows} == {os.getpid()} and len(rows) == 4
    assert "pytest" in rows[0]["command"] or "python" in rows[0]["command"]
    with pytest.raises(SndError, match="no such session") as err:
        client.set_state("nope", "exec")
    assert err.value.status == 404
    client.release("21")
    assert client.jobs() == {} and not any(r["pid"] for r in client.tiles())


def test_the_daemon_ignores_a_data_parallel_flag_asking_for_more(snd):
    """B15: a client that still sends data_parallel gets only its job's RDU."""
    client = SndClient()
    client.reserve("25", "root", 1)
    for _ in range(2):
        client._call("POST", "/sessions", {"tiles": 4, "job_id": "25", "data_parallel": True})
    with pytest.raises(SndError, match="no 4 free tiles") as err:
        client._call("POST", "/sessions", {"tiles": 4, "job_id": "25", "data_parallel": True})
    assert err.value.status == 409
    assert {r["tile"] for r in client.tiles() if r["pid"]} == set(tile_names(0, 8))


def test_the_daemon_keeps_jobs_across_a_restart(snd, tmp_path):
    SndClient().reserve("22", "root", 2)
    again = SndServer(tmp_path / "other.sock", tmp_path / "state", node="sn30-r1-h1",
                      tiles_per_rdu=8)
    try:
        assert again.rdus.jobs == {"22": {"user": "root", "rdus": [0, 1]}}
    finally:
        again.server_close()


def test_the_journal_keeps_each_jobs_rdus_and_commands_after_it_ends(snd, tmp_path):
    client = SndClient()
    client.reserve("24", "alice", 2)
    client.reserve("24", "alice", 2)  # the prolog again: one reservation
    client.open_session(4, "24")
    client.release("24")
    journal = tmp_path / "state" / "journal.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["event"], e["job"]) for e in entries] == [("reserve", "24"), ("session", "24")]
    assert entries[0]["user"] == "alice" and entries[0]["rdus"] == [0, 1]
    assert "python" in entries[1]["command"] or "pytest" in entries[1]["command"]
    assert len(entries[1]["tiles"]) == 4
    assert journal.stat().st_mode & 0o777 == 0o600


def test_no_daemon_is_a_clear_error(tmp_path):
    with pytest.raises(SndUnavailable, match="snd.*is not running"):
        SndClient(str(tmp_path / "none.sock")).node()


def test_sntilestat_prints_the_guides_columns_and_skips_idle_tiles(snd, capsys):
    client = SndClient()
    client.reserve("23", "root", 1)
    client.open_session(4, "23")
    sntilestat.main([])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("TILE                 %idle %exec %pload %aload %chkpt %quiesce    PID"
                        "     USER COMMAND")
    assert len(lines) == 65
    assert lines[-1] == "/XRDU_3/RDU_1/TILE_7 100.0   0.0    0.0    0.0    0.0      0.0"
    assert lines[1].split()[7:9] == [str(os.getpid()), "root"] and len(lines[1]) <= 130
    sntilestat.main(["--skip-idle"])
    assert len(capsys.readouterr().out.splitlines()) == 5


def test_snconfig_static_tree_and_dynamic_status(snd, capsys):
    snconfig.main(["show", "Node", "static"])
    out = capsys.readouterr().out
    for line in ("Platform Name: DataScale SN30-8", "    Number of XRDUS: 4",
                 "            Number of TILES: 8", "                DIMM Name: DIMM_M0",
                 "                    Size              : 128.0 GB",
                 "        Total XRDU_3 memory size (GB): 2048.0",
                 "=======                NODE Info               ======="):
        assert line in out.splitlines(), line
    snconfig.main(["show", "Node", "dynamic"])
    assert capsys.readouterr().out.count(": perfect") == 64


def test_snconfig_sn10_memory():
    out = snconfig.static_info({"platform": "DataScale SN10-8", "node": "sm-01",
                                "tiles_per_rdu": 4})
    assert "                DIMM Name: DIMM_C1" in out.splitlines()
    assert "        Total XRDU_0 memory size (GB): 768.0" in out.splitlines()


def test_systemctl_relative_times_read_like_systemds():
    assert systemctl.timespan(35) == "35s"
    assert systemctl.timespan(182) == "3min 2s"
    assert systemctl.timespan(48 * 86400 + 5) == "1 months 17 days"


def test_systemctl_status_of_a_running_and_an_unknown_unit(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(systemctl, "UNITS", tmp_path)
    (tmp_path / "snd.json").write_text(
        json.dumps({"description": "SN Devices Service", "exec": sys.executable,
                    "unit_file": "/lib/systemd/system/snd.service"}))
    monkeypatch.setattr(systemctl, "_main_pid", lambda exe: os.getpid())
    with pytest.raises(SystemExit) as code:
        systemctl.main(["status", "snd"])
    out = capsys.readouterr().out.splitlines()
    assert code.value.code == 0
    assert out[0] == "● snd.service - SN Devices Service"
    assert out[2].startswith("     Active: active (running) since ")
    assert out[3].startswith(f"   Main PID: {os.getpid()} (")
    assert out[-1] == f"             └─{os.getpid()} {sys.executable}"
    with pytest.raises(SystemExit) as code:
        systemctl.main(["status", "nope"])
    assert code.value.code == 4
    assert "Unit nope.service could not be found." in capsys.readouterr().err


# `systemctl status snd` in the guide (002), SN10 then SN30, without the page's indent.
SN10_STATUS = """\
* snd.service - SN Devices Service
   Loaded: loaded (/usr/lib/systemd/system/snd.service; enabled; vendor preset: enabled)
   Active: active (running) since Fri 2022-02-18 11:45:15 CST; 1 months 25 days ago
 Main PID: 3550 (snd)
    Tasks: 10 (limit: 19660)
   CGroup: /system.slice/snd.service
           `-3550 /opt/sambaflow/bin/snd

Warning: Journal has been rotated since the unit was started. Log output is incomplete or \
unavailable."""
SN30_STATUS = """\
● snd.service - SN Devices Service
     Loaded: loaded (/lib/systemd/system/snd.service; enabled; vendor preset: enabled)
    Drop-In: /etc/systemd/system/snd.service.d
             └─override.conf
     Active: active (running) since Fri 2023-01-27 04:03:14 UTC; 1 months 18 days ago
   Main PID: 5635 (snd)
      Tasks: 9 (limit: 629145)
     Memory: 156.8M
     CGroup: /system.slice/snd.service
             └─5635 /opt/sambaflow/bin/snd

Warning: some journal files were not opened due to insufficient permissions."""


def _fake_proc(root, pid: int, exe: str, started: float, threads: int, limit: int, rss_kb: int):
    """A /proc holding one process, started at `started`, as systemctl reads it."""
    ticks = os.sysconf("SC_CLK_TCK") * 100
    (root / "sys/kernel").mkdir(parents=True)
    (root / "sys/kernel/threads-max").write_text(f"{limit}\n")
    (root / "stat").write_text(f"cpu 1 2 3\nbtime {int(started) - 100}\n")
    proc = root / str(pid)
    proc.mkdir()
    (proc / "cmdline").write_bytes(f"/usr/bin/python3\0{exe}\0".encode())
    (proc / "comm").write_text("snd\n")
    (proc / "stat").write_text(f"{pid} (snd) S " + " ".join(["0"] * 18 + [str(ticks)]) + "\n")
    (proc / "status").write_text(f"Name:\tsnd\nThreads:\t{threads}\nVmRSS:\t{rss_kb} kB\n")


@pytest.mark.parametrize("cluster, expected, pid, stamp, tz, threads, limit, rss, since", [
    ("sn10", SN10_STATUS, 3550, "2022-02-18 11:45:15", "America/Chicago", 10, 19660, 9000,
     30 * 86400 + 36000 + 25 * 86400 + 60),
    ("sn30", SN30_STATUS, 5635, "2023-01-27 04:03:14", "UTC", 9, 629145, 160563,
     30 * 86400 + 36000 + 18 * 86400 + 60),
])
def test_systemctl_status_snd_is_the_guides_on_sn10_and_on_sn30(
        tmp_path, monkeypatch, cluster, expected, pid, stamp, tz, threads, limit, rss, since):
    """The unit the sambanova role writes (rendered by Ansible), on a host of each cluster."""
    task = ansible_render.role_task("sambaflow", "main.yml", "Describe snd to systemctl")
    content = ansible_render.render_task_args(
        "sambaflow", task["ansible.builtin.copy"], {"sambaflow_root": "/opt/sambaflow"})["content"]
    units = tmp_path / "units"
    units.mkdir()
    (units / "snd.json").write_text(content)
    settings = tmp_path / "aitestbed.json"
    settings.write_text(json.dumps({"cluster": cluster}))
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        started = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))
        _fake_proc(tmp_path / "proc", pid, "/opt/sambaflow/bin/snd", started, threads, limit, rss)
        monkeypatch.setattr(systemctl, "UNITS", units)
        monkeypatch.setattr(systemctl, "SLURM_SETTINGS", settings)
        monkeypatch.setattr(systemctl, "PROC", tmp_path / "proc")
        text, code = systemctl.status(systemctl._unit("snd"), now=started + since, euid=10001)
        as_root, _ = systemctl.status(systemctl._unit("snd"), now=started + since, euid=0)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert code == 0
    assert text == expected
    # Root reads every journal file: on SN30 no warning then; SN10's is about rotation.
    assert ("Warning:" in as_root) == (cluster == "sn10")
