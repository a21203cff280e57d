"""The tspd daemon (GroqCards of a GroqNode), its PBS hooks and the tools that ask it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from aitestbed.groq import lspci, pbs_hooks, runtime, tsp_ctl
from aitestbed.groq.card import PCI_ID, device_path, pci_address
from aitestbed.groq.tspd.client import TspdClient, TspdError, TspdUnavailable
from aitestbed.groq.tspd.server import TspdServer
from aitestbed.groq.tspd.state import ForbiddenError, GroqNode, PlacementError
from aitestbed.node.processes import process_start_ticks

pytestmark = pytest.mark.unit

EMULATOR = str(Path(__file__).resolve().parents[2] / "emulator")
NOBODY = 65534


def _open(node: GroqNode, cards: int, job: str | None, pid: int = 100, user: str = "alice"):
    return node.open_session(pid=pid, start_ticks=1, user=user, job_id=job, cards=cards,
                             command="python bert.py", now=0.0)


# --- the model (pure decisions) ---------------------------------------------------------
def test_cards_have_one_name_each():
    assert (device_path(0), pci_address(0)) == ("/dev/groqA0.pci", "0000:21:00.0")
    assert len({pci_address(i) for i in range(8)}) == 8
    with pytest.raises(ValueError):
        pci_address(8)


def test_jobs_get_the_lowest_free_cards_and_a_retried_prologue_gets_the_same():
    node = GroqNode("groq-r01-gn-01")
    first = node.reserve("1.pbs", "alice", 2)
    assert first["cards"] == [0, 1] and node.reserve("2.pbs", "bob", 3)["cards"] == [2, 3, 4]
    assert node.reserve("1.pbs", "alice", 2) is first
    with pytest.raises(PlacementError, match="needs 4 GroqCards on groq-r01-gn-01, 3 are free"):
        node.reserve("3.pbs", "carol", 4)
    node.release("1.pbs")
    assert node.reserve("3.pbs", "carol", 2)["cards"] == [0, 1]
    with pytest.raises(PlacementError, match="has 8 GroqCards, job 4.pbs asks for 9"):
        node.reserve("4.pbs", "dave", 9)


def test_only_the_jobs_owner_sees_its_cards_and_outside_a_job_there_are_none():
    node = GroqNode("groq-r01-gn-01")
    node.reserve("5.groq-pbs", "alice", 8)
    assert node.visible("alice", "5.groq-pbs") == list(range(8))
    assert node.visible("alice", "5") == list(range(8))  # the sequence number alone
    assert node.visible("bob", "5.groq-pbs") == []
    assert node.visible("bob", "5.groq-pbs", caller_is_root=True) == list(range(8))
    assert node.visible("alice", None) == [] and node.visible("alice", "6.groq-pbs") == []


def test_a_session_locks_unlocked_cards_of_its_own_job_only():
    node = GroqNode("groq-r01-gn-01")
    node.reserve("7", "alice", 4)
    node.reserve("8", "bob", 4)
    assert _open(node, 2, "7").cards == [0, 1]
    assert _open(node, 2, "7", pid=101).cards == [2, 3]
    with pytest.raises(PlacementError, match=r"needs 1 GroqChips and job 7 has 0 unlocked of its "
                                             r"4; the others are locked by PID 100 \(alice\), "
                                             r"101 \(alice\)"):
        _open(node, 1, "7", pid=102)
    with pytest.raises(ForbiddenError, match="job 8 belongs to bob, not alice"):
        _open(node, 1, "8")
    assert sorted(node.locked()) == [0, 1, 2, 3]


def test_a_model_bigger_than_the_jobs_cards_fails_with_what_to_ask_for():
    node = GroqNode("groq-r01-gn-01")
    node.reserve("9", "alice", 1)
    with pytest.raises(PlacementError, match=r"needs 4 GroqChips but job 9 holds 1 on "
                                             r"groq-r01-gn-01: .*place=excl"):
        _open(node, 4, "9")
    with pytest.raises(PlacementError, match="run it in a PBS job"):
        _open(node, 1, None)
    with pytest.raises(PlacementError, match="job 10 holds no GroqCard on groq-r01-gn-01"):
        _open(node, 1, "10")
    assert not node.sessions


def test_release_ends_sessions_and_clears_memory_and_clear_spares_locked_cards():
    node = GroqNode("groq-r01-gn-01")
    node.reserve("11", "alice", 3)
    session = _open(node, 2, "11")
    node.close_session(session.id)
    _open(node, 1, "11", pid=101)  # card 0 again, still open
    assert [r["memory"] for r in node.card_rows()][:4] == ["loaded", "loaded", "clear", "clear"]
    assert node.clear(node.clearable("alice", "11")) == {"cleared": [1, 2], "locked": [0]}
    assert node.clearable("bob", None) == [3, 4, 5, 6, 7]  # outside a job: the free cards
    assert node.clearable("bob", None, caller_is_root=True) == list(range(8))
    node.release("11")
    assert not node.sessions and not node.memory and not node.jobs


def test_sessions_of_dead_processes_are_reaped_and_the_state_survives_a_restart():
    node = GroqNode("groq-r01-gn-01")
    node.reserve("12", "alice", 2)
    _open(node, 1, "12", pid=1)
    _open(node, 1, "12", pid=2)
    node.set_health(5, "Down")
    assert node.reap(lambda pid, ticks: pid == 1) == ["2-1"]
    again = GroqNode.from_dict(json.loads(json.dumps(node.to_dict())))
    assert again.jobs == node.jobs and list(again.sessions) == ["1-0"]
    assert again.memory == {0: "python bert.py", 1: "python bert.py"}
    assert again.card_rows()[5]["health"] == "Down" and again.card_rows()[4]["health"] == "Up"
    assert _open(again, 1, "12", pid=3).id == "3-1"  # counts on from the kept ones


# --- PBS hooks (pure part) --------------------------------------------------------------
@pytest.mark.parametrize(("exec_vnode", "place", "node", "cards"), [
    ("(groq-r01-gn-01:ncpus=1:groq_accelerator=8)+(groq-r01-gn-02:groq_accelerator=2)",
     "free", "groq-r01-gn-01", 8),
    ("(groq-r01-gn-01:ncpus=1:groq_accelerator=8)+(groq-r01-gn-02:groq_accelerator=2)",
     "free", "groq-r01-gn-02.ai.alcf.anl.gov", 2),
    ("(groq-r01-gn-03:groq_accelerator=1)+(groq-r01-gn-03:groq_accelerator=2)", "pack",
     "groq-r01-gn-03", 3),
    ("(groq-r01-gn-04.ai.alcf.anl.gov:ncpus=1)", "excl", "groq-r01-gn-04", 8),
    ("(groq-r01-gn-04:ncpus=1)", "scatter:exclhost", "groq-r01-gn-04", 8),
    ("(groq-r01-gn-04:ncpus=1)", "free", "groq-r01-gn-04", 0),
    ("(groq-r01-gn-04:ncpus=1)", "excl", "groq-r01-gn-05", 0),
    ("(groq-r01-gn-06:ncpus=1:groq_accelerator=1+groq-r01-gn-07:groq_accelerator=4)", "free",
     "groq-r01-gn-07", 4),
    ("(groq-r01-gn-06:groq_accelerator=2)", "excl", "groq-r01-gn-06", 2),
])
def test_cards_on_node(exec_vnode, place, node, cards):
    assert pbs_hooks.cards_on_node(exec_vnode, place, node) == cards


# --- the daemon through its client ------------------------------------------------------
@pytest.fixture
def tspd(monkeypatch):
    """A tspd on a socket every user may reach (for the tests that drop to nobody)."""
    base = Path(tempfile.mkdtemp(prefix="tspd-"))
    base.chmod(0o755)
    socket_path = base / "tspd.sock"
    server = TspdServer(socket_path, base / "state", node="groq-r01-gn-01")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AITESTBED_TSPD_SOCKET", str(socket_path))
    yield server
    server.shutdown()
    server.server_close()
    shutil.rmtree(base, ignore_errors=True)


def _child(code: str, job: str | None = None, user: int | None = None,
           env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PBS_JOBID"}
    environ.update(PYTHONPATH=EMULATOR, **(env or {}))
    if job:
        environ["PBS_JOBID"] = job
    kwargs = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, cwd="/", timeout=60, **kwargs)


as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as nobody")


def test_the_caller_sees_its_jobs_cards_from_its_environment(tspd):
    client = TspdClient()
    client.reserve("31.groq-pbs", "root", 2)
    client.reserve("32.groq-pbs", "alice", 3)
    code = ("from aitestbed.groq import runtime; from aitestbed.groq.tspd.client import "
            "TspdClient; print(TspdClient().visible(), runtime.available_chips())")
    assert _child(code, "31.groq-pbs").stdout.strip() == "[0, 1] 2"
    assert _child(code).stdout.strip() == "[] 0"  # outside a job
    assert client.visible() == []  # pytest itself runs in no PBS job
    assert client.jobs()["32.groq-pbs"] == {"user": "alice", "cards": [2, 3, 4]}


@as_root
def test_another_users_job_is_not_visible_and_jobs_are_root_only(tspd):
    client = TspdClient()
    client.reserve("33.groq-pbs", "root", 8)
    probe = ("from aitestbed.groq.tspd.client import TspdClient, TspdError\n"
             "c = TspdClient(); print(c.visible())\n"
             "for call in (lambda: c.reserve('34', 'nobody', 1), lambda: c.release('33.groq-pbs'),"
             " lambda: c.open_session(1)):\n"
             "    try: call(); print('ok')\n"
             "    except TspdError as e: print(e.status, e)\n")
    out = _child(probe, "33.groq-pbs", user=NOBODY).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1].startswith("403 only root (PBS's prologue and epilogue) assigns GroqCards")
    assert out[2].startswith("403 ")
    assert out[3] == "403 job 33.groq-pbs belongs to root, not nobody"
    assert client.jobs() == {"33.groq-pbs": {"user": "root", "cards": list(range(8))}}
    client.reserve("35.groq-pbs", "nobody", 0)
    client.release("33.groq-pbs")
    client.release("35.groq-pbs")
    client.reserve("36.groq-pbs", "nobody", 2)
    assert _child(probe, "36.groq-pbs", user=NOBODY).stdout.splitlines()[0] == "[0, 1]"


def test_sessions_are_the_callers_and_end_with_its_process(tspd):
    client = TspdClient()
    client.reserve("41.groq-pbs", "root", 3)
    code = ("from aitestbed.groq import runtime\n"
            "s = runtime.open_chips(2); print(s.cards, s.job)\n")
    child = _child(code, "41.groq-pbs")
    assert child.stdout.strip() == "[0, 1] 41.groq-pbs", child.stderr
    # The child exited without closing its session: tspd reaps it on the next request.
    rows = client.cards()
    assert [r["locked"] for r in rows] == [False] * 8
    assert [r["memory"] for r in rows[:3]] == ["loaded", "loaded", "clear"]
    assert [r["job"] for r in rows[:4]] == ["41.groq-pbs"] * 3 + [None]
    with_block = ("import os\nfrom aitestbed.groq import runtime\n"
                  "from aitestbed.groq.tspd.client import TspdClient\n"
                  "with runtime.open_chips(3) as s:\n"
                  "    rows = TspdClient().cards()\n"
                  "    print(s.cards, [r['pid'] == os.getpid() for r in rows[:4]])\n"
                  "print(sum(r['locked'] for r in TspdClient().cards()))\n"
                  "try: runtime.open_chips(4)\n"
                  "except runtime.ChipsUnavailable as e: print(e)\n")
    out = _child(with_block, "41.groq-pbs").stdout.splitlines()
    assert out[0] == "[0, 1, 2] [True, True, True, False]"
    assert out[1] == "0"
    assert out[2].startswith("the model needs 4 GroqChips but job 41.groq-pbs holds 3 on "
                             "groq-r01-gn-01")
    outside = _child("from aitestbed.groq import runtime\ntry: runtime.open_chips(1)\n"
                     "except runtime.ChipsUnavailable as e: print(e)\n")
    assert "no GroqChip is allocated to this process" in outside.stdout
    with pytest.raises(TspdError, match="no such session") as err:
        client.close_session("nope")
    assert err.value.status == 404


def test_a_session_of_a_live_process_is_kept_until_it_exits(tspd):
    client = TspdClient()
    client.reserve("42.groq-pbs", "root", 8)
    code = ("import sys\nfrom aitestbed.groq import runtime\n"
            "s = runtime.open_chips(8); print(s.cards, flush=True); sys.stdin.readline()\n")
    environ = {**os.environ, "PYTHONPATH": EMULATOR, "PBS_JOBID": "42.groq-pbs"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=environ)
    try:
        assert proc.stdout.readline().strip() == str(list(range(8)))
        rows = client.cards()
        assert {r["pid"] for r in rows} == {proc.pid} and all(r["locked"] for r in rows)
        assert tsp_ctl.clear_line(client.clear()).endswith(
            "8 locked device(s) left alone: TSP0 TSP1 TSP2 TSP3 TSP4 TSP5 TSP6 TSP7")
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert not any(r["locked"] for r in client.cards())


def test_the_daemon_keeps_jobs_across_a_restart(tspd, tmp_path):
    TspdClient().reserve("43.groq-pbs", "alice", 2)
    again = TspdServer(tmp_path / "other.sock", tspd.state_file.parent, node="groq-r01-gn-01")
    try:
        assert again.groq.jobs == {"43.groq-pbs": {"user": "alice", "cards": [0, 1]}}
    finally:
        again.server_close()


def test_the_journal_keeps_each_jobs_cards(tspd):
    client = TspdClient()
    client.reserve("44", "alice", 2)
    client.reserve("44", "alice", 2)  # the prologue again: one reservation
    client.release("44")
    journal = tspd.journal_file
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["event"], e["job"], e["cards"]) for e in entries] == [("reserve", "44", [0, 1])]
    assert journal.stat().st_mode & 0o777 == 0o600


def test_no_daemon_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AITESTBED_TSPD_SOCKET", str(tmp_path / "none.sock"))
    with pytest.raises(TspdUnavailable, match="tspd.*is not running"):
        TspdClient().node()
    assert runtime.available_chips() == 0
    with pytest.raises(runtime.ChipsUnavailable, match="no GroqChip found: this host has no"):
        runtime.open_chips(1)
    with pytest.raises(SystemExit) as code:
        tsp_ctl.main(["status"])
    assert code.value.code.startswith("tsp-ctl: the GroqCard service (tspd) is not running")
    lspci.main(["-n"])  # the host's own devices, no card, no error
    out = capsys.readouterr().out
    assert PCI_ID not in out and out.startswith("00:00.0 0600: 1022:1480")


# --- tsp-ctl and lspci ------------------------------------------------------------------
def test_tsp_ctl_status_lines_grep_as_the_guide_does(tspd, capsys):
    tspd.groq.reserve("51.groq-pbs", "alice", 8)
    tspd.groq.open_session(pid=os.getpid(), start_ticks=process_start_ticks(os.getpid()),
                           user="alice", job_id="51.groq-pbs", cards=3, command="python x.py")
    tsp_ctl.main(["status"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9 and lines[0].split()[:4] == ["TSP", "DEVICE", "BUS", "STATE"]
    locked = [line for line in lines if "Device Locked" in line]
    assert [line.split()[0] for line in locked] == ["TSP0", "TSP1", "TSP2"]
    assert locked[0].split()[1:3] == ["/dev/groqA0.pci", "0000:21:00.0"]
    assert locked[0].split()[-3:] == ["51.groq-pbs", "alice", str(os.getpid())]
    assert sum("Device Unlocked" in line for line in lines) == 5
    grep = subprocess.run(["grep", "-a", "Device Locked"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True)
    assert len(grep.stdout.splitlines()) == 3


def test_tsp_ctl_health_check_is_a_line_then_json(tspd, capsys):
    tsp_ctl.main(["health-check"])
    out = capsys.readouterr().out.splitlines()
    assert "Health-check" in out[0] and not any("Health-check" in line for line in out[1:])
    report = json.loads("\n".join(out[1:]))
    assert [card["Summary"]["tsp_status"] for card in report] == ["Up"] * 8
    assert report[7]["Device"] == "/dev/groqA7.pci"
    TspdClient().set_health(3, "Down")
    with pytest.raises(SystemExit) as code:
        tsp_ctl.main(["health-check"])
    assert code.value.code == 1
    report = json.loads("\n".join(capsys.readouterr().out.splitlines()[1:]))
    assert [c["Summary"]["tsp_status"] for c in report].count("Down") == 1


def test_tsp_ctl_clear_and_bad_usage(tspd, capsys):
    tsp_ctl.main(["clear"])  # root: every card
    assert capsys.readouterr().out == (
        "Cleared 8 device(s): TSP0 TSP1 TSP2 TSP3 TSP4 TSP5 TSP6 TSP7\n")
    with pytest.raises(SystemExit) as code:
        tsp_ctl.main(["reboot"])
    assert code.value.code == 2 and "invalid choice: 'reboot'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as code:
        tsp_ctl.main(["--help"])
    assert code.value.code == 0 and "health-check" in capsys.readouterr().out


def test_lspci_shows_the_jobs_cards_only_inside_the_job(tspd, capsys):
    TspdClient().reserve("61.groq-pbs", "root", 8)
    code = "from aitestbed.groq import lspci; lspci.main(['-n'])"
    inside = _child(code, "61.groq-pbs").stdout.splitlines()
    assert [line for line in inside if PCI_ID in line] == [
        f"{pci_address(i)[5:]} 1200: 1de0:0000" for i in range(8)]
    assert not [line for line in _child(code).stdout.splitlines() if PCI_ID in line]
    lines = lspci.listing([0, 1])
    assert "21:00.0 Processing accelerators: Groq Device 0000" in lines
    assert "0000:22:00.0 Processing accelerators [1200]: Groq Device [1de0:0000]" in \
        lspci.listing([1], numeric=2, domain=True)
    assert lspci.listing([0, 1], numeric=1, selector="1de0:") == [
        "21:00.0 1200: 1de0:0000", "22:00.0 1200: 1de0:0000"]


# --- PBS prologue / epilogue ------------------------------------------------------------
# `qstat -f -F json 71.groq-pbs` as PBS prints it for `qsub -l select=1,place=excl` (the
# attribute names and nesting of PBS's JSON output; the values are this test's).
QSTAT_JSON = {
    "timestamp": 1760000000,
    "pbs_version": "23.06.06",
    "pbs_server": "groq-pbs",
    "Jobs": {
        "71.groq-pbs": {
            "Job_Name": "STDIN",
            "Job_Owner": "alice@groq-r01-gn-01",
            "job_state": "R",
            "queue": "workq",
            "server": "groq-pbs",
            "exec_host": "groq-r01-gn-01/0",
            "exec_vnode": "(groq-r01-gn-01:ncpus=1)",
            "Resource_List": {
                "ncpus": 1,
                "nodect": 1,
                "place": "excl",
                "select": "1",
                "walltime": "24:00:00",
            },
            "euser": "alice",
            "egroup": "alice",
            "Variable_List": {"PBS_O_HOME": "/home/alice", "PBS_O_WORKDIR": "/home/alice"},
        },
    },
}


def test_prologue_reserves_the_jobs_cards_and_epilogue_frees_them(tspd, monkeypatch, capsys):
    asked = []

    def fake_qstat(job_id):
        asked.append(job_id)
        if job_id not in QSTAT_JSON["Jobs"]:
            raise RuntimeError(f"qstat -f -F json {job_id}: qstat: Unknown Job Id {job_id}")
        return QSTAT_JSON["Jobs"][job_id]

    monkeypatch.setattr(pbs_hooks, "qstat_job", fake_qstat)
    monkeypatch.setattr(pbs_hooks, "node_name", lambda: "groq-r01-gn-01")
    monkeypatch.setattr(pbs_hooks, "active_job_ids", lambda: set(QSTAT_JSON["Jobs"]))
    assert pbs_hooks.prologue(["71.groq-pbs", "alice", "alice"]) == 0
    assert pbs_hooks.prologue(["71.groq-pbs", "alice", "alice"]) == 0  # a retry
    assert asked == ["71.groq-pbs", "71.groq-pbs"]
    assert TspdClient().jobs() == {"71.groq-pbs": {"user": "alice", "cards": list(range(8))}}
    job = QSTAT_JSON["Jobs"]["71.groq-pbs"]
    monkeypatch.setitem(job, "exec_vnode", "(groq-r01-gn-01:ncpus=1:groq_accelerator=2)")
    monkeypatch.setitem(job["Resource_List"], "place", "free")
    assert pbs_hooks.prologue(["72.groq-pbs", "bob", "bob"]) == 1
    assert capsys.readouterr().err == ("aitestbed prologue: job 72.groq-pbs: qstat -f -F json "
                                       "72.groq-pbs: qstat: Unknown Job Id 72.groq-pbs\n")
    QSTAT_JSON["Jobs"]["72.groq-pbs"] = job
    try:
        assert pbs_hooks.prologue(["72.groq-pbs", "bob", "bob"]) == 1
        assert capsys.readouterr().err == (
            "aitestbed prologue: job 72.groq-pbs: job 72.groq-pbs needs 2 GroqCards on "
            "groq-r01-gn-01, 0 are free\n")
        assert pbs_hooks.epilogue(["71.groq-pbs", "alice", "alice"]) == 0
        assert pbs_hooks.prologue(["72.groq-pbs", "bob", "bob"]) == 0
        assert TspdClient().jobs() == {"72.groq-pbs": {"user": "bob", "cards": [0, 1]}}
    finally:
        del QSTAT_JSON["Jobs"]["72.groq-pbs"]
    assert pbs_hooks.prologue([]) == 1
    assert "usage: prologue JOBID USER" in capsys.readouterr().err


def test_a_prologue_frees_the_cards_of_jobs_pbs_no_longer_has(tspd, monkeypatch):
    """The node died mid-job: the epilogue never ran, tspd kept the cards of job 70."""
    TspdClient().reserve("70.groq-pbs", "carol", 8)
    monkeypatch.setattr(pbs_hooks, "qstat_job", lambda job_id: QSTAT_JSON["Jobs"][job_id])
    monkeypatch.setattr(pbs_hooks, "node_name", lambda: "groq-r01-gn-01")
    monkeypatch.setattr(pbs_hooks, "active_job_ids", lambda: {"70.groq-pbs", "71.groq-pbs"})
    assert pbs_hooks.prologue(["71.groq-pbs", "alice", "alice"]) == 1  # 70 still runs
    monkeypatch.setattr(pbs_hooks, "active_job_ids", lambda: {"71.groq-pbs"})
    assert pbs_hooks.prologue(["71.groq-pbs", "alice", "alice"]) == 0
    assert TspdClient().jobs() == {"71.groq-pbs": {"user": "alice", "cards": list(range(8))}}


def test_the_daemon_runs_from_its_command_line(tmp_path):
    socket_path = tmp_path / "run" / "tspd.sock"
    env = {**os.environ, "PYTHONPATH": EMULATOR}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "aitestbed.groq.tspd.server", "--node", "groq-r01-gn-09",
         "--state-dir", str(tmp_path / "lib"), "--socket", str(socket_path)], env=env)
    try:
        for _ in range(200):
            if socket_path.exists():
                break
            time.sleep(0.05)
        assert TspdClient(str(socket_path)).node() == {"node": "groq-r01-gn-09", "cards": 8}
        assert socket_path.stat().st_mode & 0o777 == 0o666
        TspdClient(str(socket_path)).reserve("81.groq-pbs", "alice", 1)
        assert json.loads((tmp_path / "lib" / "state.json").read_text())["jobs"] == {
            "81.groq-pbs": {"user": "alice", "cards": [0]}}
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def test_qstat_job_reads_pbs_json(monkeypatch, tmp_path):
    qstat = tmp_path / "qstat"
    qstat.write_text(f"#!/bin/sh\n[ \"$4\" = 71.groq-pbs ] || {{ echo \"qstat: Unknown Job Id "
                     f"$4\" >&2; exit 153; }}\ncat <<'EOF'\n{json.dumps(QSTAT_JSON)}\nEOF\n")
    qstat.chmod(0o755)
    monkeypatch.setattr(pbs_hooks, "QSTAT", str(qstat))
    job = pbs_hooks.qstat_job("71.groq-pbs")
    assert job["Resource_List"]["place"] == "excl" and job["Job_Owner"].startswith("alice@")
    with pytest.raises(RuntimeError, match="qstat: Unknown Job Id 99.groq-pbs"):
        pbs_hooks.qstat_job("99.groq-pbs")


def test_a_process_belongs_to_the_job_whose_session_it_is_in(tmp_path):
    """PBS starts each job in a session of its own and the mom records it (printjob's
    `sid:`); a process of that session is the job's, whatever its environment says, and
    a process outside it with a forged PBS_JOBID is not (when tspd cannot read its
    environment: root without CAP_SYS_PTRACE, as in a container)."""
    from aitestbed.groq.tspd import server

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        session = server.session_of(child.pid)
        assert session == child.pid and server.session_of(os.getpid()) != session
        (jobs / "7.groq-r01-control.JB").write_text("")
        (jobs / "8.groq-r01-control.JB").write_text("")
        printjob = tmp_path / "printjob"
        printjob.write_text("#!/bin/sh\ncase $1 in\n  *7.groq-r01-control.JB) "
                            f"printf 'job\\n\\tsid:\\t\\t{session}\\n';;\n"
                            "  *) printf 'job\\n\\tsid:\\t\\t0\\n';;\nesac\n")
        printjob.chmod(0o755)
        assert server.mom_sessions("n", jobs, str(printjob)) == {session: "7.groq-r01-control"}
        job_of = server.PbsJobOf("n", lambda node: server.mom_sessions(node, jobs, str(printjob)))
        assert job_of(child.pid) == "7.groq-r01-control"
        mine = job_of(os.getpid())  # no job's session: the environment, if any
        assert mine == os.environ.get("PBS_JOBID")
    finally:
        child.kill()
        child.wait()
