"""Graphcore's command-line tools: popc, gc-info, gc-monitor and poprun.

Formats are checked against the documented output (ALCF's user guide and
Graphcore's documentation); poprun runs as a real process against a real
V-IPU server in a thread, launching real `python -c` instances.
"""

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aitestbed.graphcore import gc_info, gc_monitor, popc, poprun
from aitestbed.graphcore.vipu import server as vipu_server
from aitestbed.graphcore.vipu.client import VipuClient
from aitestbed.graphcore.vipu.pod import Pod
from aitestbed.graphcore.vipu.server import VipuServer
from aitestbed.node import munge

pytestmark = pytest.mark.unit

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
GRES = "".join(f"NodeName=gc-poplar-0{i} Name=ipu Count=16\n" for i in range(1, 5))

# As ALCF's user guide shows them (the ResNet50 run on 4 IPUs of gc-poplar-02, and
# gc-monitor with one job of 1 IPU on gc-poplar-02).
SEED_TOPOLOGY = """\
 ===========================
|      poprun topology      |
|===========================|
| hosts     | gc-poplar-02  |
|-----------|---------------|
| ILDs      |       0       |
|-----------|---------------|
| instances |       0       |
|-----------|---------------|
| replicas  | 0 | 1 | 2 | 3 |
 ---------------------------"""
SEED_GC_MONITOR = """\
+--------------------------------------------------------------+-----------------------+
|      IPUs in slurm_2616 attached from other namespaces       |         Board         |
+----+------------------------------+--------------+-----------+-----------+-----------+
| ID |       Application host       |    Clock     |   Temp    |   Temp    |   Power   |
+----+------------------------------+--------------+-----------+-----------+-----------+
| 0  |         gc-poplar-02         |   1850MHz    |  24.2 C   |  21.1 C   |  92.3 W   |
+----+------------------------------+--------------+-----------+-----------+-----------+"""
SEED_GC_INFO = """\
-+- Id:  [0], target: [Fabric], IPU-M host:  [10.1.5.1], IPU#: [3]
-+- Id:  [1], target: [Fabric], IPU-M host:  [10.1.5.1], IPU#: [2]
-+- Id:  [2], target: [Fabric], IPU-M host:  [10.1.5.1], IPU#: [1]"""


# --- popc ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version, expected", [
    (None, "POPLAR version 3.3.0 (de1f8de2a7)\n"
           "clang version 16.0.0 (2fce0648f3c328b23a6cbc664fc0dd0630122212)\n"),
    ("3.1.0", "POPLAR version 3.1.0 (e12d5f9f01)\n"
              "clang version 15.0.0 (bab932b4fc4cdb58bb009370384b2c41579bd9d9)\n"),
])
def test_popc_version_prints_the_sdks_two_lines(version, expected, monkeypatch, capsys):
    monkeypatch.delenv("AITESTBED_POPLAR_VERSION", raising=False)
    if version:
        monkeypatch.setenv("AITESTBED_POPLAR_VERSION", version)
    assert popc.main(["--version"]) == 0
    assert capsys.readouterr().out == expected


def test_popc_cannot_compile_codelets(capsys):
    assert popc.main(["codelets.cpp", "-o", "codelets.gp"]) == 1
    assert "no Poplar C++ compiler" in capsys.readouterr().err


# --- gc-info -------------------------------------------------------------------------------------

def test_devices_are_single_ipus_then_groups_of_consecutive_ipus():
    devices = gc_info.partition_devices([19, 16, 17, 18])
    assert [(d.id, d.ipus) for d in devices] == [
        (0, (16,)), (1, (17,)), (2, (18,)), (3, (19,)),
        (4, (16, 17)), (5, (18, 19)), (6, (16, 17, 18, 19))]
    assert devices[5].members == (2, 3)
    assert len(gc_info.partition_devices(range(64))) == 127


def test_gc_info_lists_a_partition_as_graphcore_documents_it():
    lines = gc_info.render_listing([{"name": "p1", "ipus": [0, 1, 2, 3]}], active="p1")
    assert lines[:3] == ["Graphcore device listing:", "Partition: p1 [active]",
                         "-+- Id: [0], target: [Fabric], IPU-M host: [10.1.5.1], IPU#: [3]"]
    assert lines[6:10] == [
        "-+- Id: [4], target: [Multi IPU]",
        " |--- Id: [0], DNC Id: [0], IPU-M host: [10.1.5.1], IPU#: [3]",
        " |--- Id: [1], DNC Id: [1], IPU-M host: [10.1.5.1], IPU#: [2]",
        "-+- Id: [5], target: [Multi IPU]"]
    assert lines[-1] == " |--- Id: [3], DNC Id: [3], IPU-M host: [10.1.5.1], IPU#: [0]"


def test_gc_info_aligns_fields_as_in_alcfs_listing_of_the_whole_pod():
    lines = gc_info.render_listing([{"name": "all", "ipus": list(range(64))}], active="all")
    assert "\n".join(lines[2:5]) == SEED_GC_INFO
    assert "-+- Id: [63], target: [Fabric], IPU-M host: [10.1.5.16], IPU#: [0]" in lines


def test_gc_info_device_info_is_key_value_lines():
    partition = {"name": "slurm_42", "ipus": [16, 17], "hosts": {"gc-poplar-02": [16, 17]}}
    lines = gc_info.render_device_info(partition, 1)
    assert lines[:3] == ["Device Info:", "id: 1", "target: Fabric"]
    for line in ("ipu architecture: ipu2", "ipuof partition id: slurm_42", "clock: 1850MHz",
                 "ipuof host: 10.1.5.5", "board ipu index: 2", "ipu utilisation: 0.00%"):
        assert line in lines
    assert "target: Multi IPU" in gc_info.render_device_info(partition, 2)
    with pytest.raises(gc_info.UnknownDeviceError, match="unknown device id 3.*devices 0-2"):
        gc_info.render_device_info(partition, 3)


# --- gc-monitor ----------------------------------------------------------------------------------

def test_gc_monitor_table_matches_alcfs_for_a_one_ipu_job():
    partition = {"name": "slurm_2616", "ipus": [16], "hosts": {"gc-poplar-02": [16]}}
    assert "\n".join(gc_monitor.attached_table(partition)) == SEED_GC_MONITOR


def test_gc_monitor_shows_each_ipu_of_a_partition_on_its_host():
    partition = {"name": "slurm_7", "ipus": [15, 16, 17],
                 "hosts": {"gc-poplar-01": [15], "gc-poplar-02": [16, 17]}}
    lines = gc_monitor.attached_table(partition)
    rows = [line for line in lines if line.startswith("|") and line.split("|")[1].strip().isdigit()]
    assert [row.split("|")[1:3] for row in rows] == [
        [" 0  ", "         gc-poplar-01         "], [" 1  ", "         gc-poplar-02         "],
        [" 2  ", "         gc-poplar-02         "]]
    assert all("1850MHz" in row for row in rows)
    temps = [float(row.split("|")[4].split()[0]) for row in rows]
    assert all(20 <= t < 30 for t in temps) and len(set(temps)) == 3
    assert len({len(line) for line in lines}) == 1  # a rectangle


# --- poprun: the pure pieces ---------------------------------------------------------------------

def test_topology_box_matches_the_documented_resnet50_run():
    assert "\n".join(poprun.render_topology(["gc-poplar-02"], 1, 1, 4)) == SEED_TOPOLOGY


def test_topology_box_spans_each_instance_over_its_replicas():
    box = poprun.render_topology(["localhost"], 1, 2, 8)
    assert box[7] == "| instances |       0       |       1       |"
    assert box[9] == "| replicas  | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |"
    wide = poprun.render_topology(["localhost"], 1, 1, 16)
    assert wide[9].startswith("| replicas  | 0  | 1  |") and wide[9].endswith("| 15 |")
    one = poprun.render_topology(["gc-poplar-02"], 1, 1, 1)  # the host name widens the box
    assert one[3] == "| hosts     | gc-poplar-02 |" and one[9] == "| replicas  |      0       |"
    assert {len(line) for line in one[1:-1]} == {len(one[0]) + 1, len(one[-1]) + 1}


def test_instance_environment_describes_its_share_of_the_replicas():
    env = poprun.instance_env({"HOME": "/home/u"}, 2, 4, 8, 2, partition="slurm_42",
                              cache_path="/home/u/cache", master_port=29500)
    assert env["HOME"] == "/home/u"
    assert {k: env[k] for k in env if k.startswith("POPDIST_")} == {
        "POPDIST_NUM_TOTAL_REPLICAS": "8", "POPDIST_NUM_INSTANCES": "4",
        "POPDIST_INSTANCE_INDEX": "2", "POPDIST_NUM_LOCAL_REPLICAS": "2",
        "POPDIST_REPLICA_INDEX_OFFSET": "4", "POPDIST_NUM_IPUS_PER_REPLICA": "2"}
    assert env["POPTORCH_CACHE_DIR"] == "/home/u/cache"
    assert env["IPUOF_VIPU_API_PARTITION_ID"] == "slurm_42"
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == (
        "127.0.0.1", "29500", "2", "4")
    assert "POPTORCH_CACHE_DIR" not in poprun.instance_env({}, 0, 1, 1, 1)


def test_every_line_gets_one_tag_however_the_output_is_split():
    tagger = poprun.LineTagger(b"[1,0]<stdout>:")
    pieces = [b"Loss: 10%\r", b"Loss: 100%\r", b"\n", b"a\nb", b"c\n\n"]
    assert b"".join(tagger.feed(p) for p in pieces) == (
        b"[1,0]<stdout>:Loss: 10%\rLoss: 100%\r\n[1,0]<stdout>:a\n[1,0]<stdout>:bc\n"
        b"[1,0]<stdout>:\n")


def test_options_stop_at_the_program():
    options, command = poprun.split_command_line(
        ["-vv", "--num-replicas", "4", "--print-topology", "--mpi-global-args", "--tag-output",
         "python3", "train.py", "--num-replicas", "2", "--", "-v"])
    assert command == ["python3", "train.py", "--num-replicas", "2", "--", "-v"]
    args, _ = poprun.parse_args(options + command)
    assert (args.num_replicas, args.print_topology, args.verbose) == (4, True, 2)
    assert args.mpi_global_args == "--tag-output"


# --- against a V-IPU server ----------------------------------------------------------------------

@pytest.fixture
def vipu(tmp_path, monkeypatch):
    """A V-IPU server of a 64-IPU POD, found through IPUOF_VIPU_API_HOST/PORT."""
    gres = tmp_path / "gres.conf"
    gres.write_text(GRES)
    server = VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("IPUOF_VIPU_API_HOST", "127.0.0.1")
    monkeypatch.setenv("IPUOF_VIPU_API_PORT", str(server.server_address[1]))
    monkeypatch.delenv("IPUOF_VIPU_API_PARTITION_ID", raising=False)
    yield VipuClient(host="127.0.0.1", port=server.server_address[1], token=server.token)
    server.shutdown()
    server.server_close()


@pytest.fixture
def job(vipu, monkeypatch):
    """Inside `srun --ipus=4`: the job's partition slurm_42 on gc-poplar-02."""
    vipu.create_partition("slurm_42", {"gc-poplar-02": 4}, job_id="42", user="learner")
    monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", "slurm_42")
    return "slurm_42"


def run_poprun(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(EMULATOR))
    return subprocess.run([sys.executable, "-m", "aitestbed.graphcore.poprun", *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_poprun_runs_each_instance_with_its_replicas_and_tags_its_output(job, tmp_path):
    code = ("import os, sys\n"
            "e = os.environ\n"
            "print('instance', e['POPDIST_INSTANCE_INDEX'], 'offset',"
            " e['POPDIST_REPLICA_INDEX_OFFSET'], 'local', e['POPDIST_NUM_LOCAL_REPLICAS'],"
            " 'of', e['POPDIST_NUM_TOTAL_REPLICAS'], e['IPUOF_VIPU_API_PARTITION_ID'],"
            " e['POPTORCH_CACHE_DIR'], 'rank', e['RANK'], 'of', e['WORLD_SIZE'])\n"
            "print('a warning', file=sys.stderr)\n")
    cache = str(tmp_path / "cache")
    result = run_poprun("-vv", "--num-instances=2", "--num-replicas=4",
                        f"--executable-cache-path={cache}", *py(code))
    assert result.returncode == 0, result.stderr
    stdout = sorted(result.stdout.splitlines())
    assert stdout == [
        f"[1,0]<stdout>:instance 0 offset 0 local 2 of 4 slurm_42 {cache} rank 0 of 2",
        f"[1,1]<stdout>:instance 1 offset 2 local 2 of 4 slurm_42 {cache} rank 1 of 2"]
    assert "[1,0]<stderr>:a warning" in result.stderr.splitlines()
    assert "[1,1]<stderr>:a warning" in result.stderr.splitlines()
    log = [line.split(" ", 2) for line in result.stderr.splitlines() if " POPRUN [" in line]
    assert {pid for _, pid, _ in log} == {log[0][1]} and len(log[0][0]) == len("04:22:59.948")
    messages = [rest for _, _, rest in log]
    assert "POPRUN [I] Using V-IPU partition slurm_42 as it is the only one available" in messages
    assert "POPRUN [D] Status for partition slurm_42: OK (error 0)" in messages
    assert ("POPRUN [I] Partition slurm_42 already exists and is in state: PS_ACTIVE"
            in messages)
    assert "POPRUN [D] Found 1 devices with 4 IPUs" in messages
    assert "POPRUN [I] Preparing parent device 6" in messages
    assert messages[-1].startswith("POPRUN [I] mpirun (PID ")
    assert messages[-1].endswith(") terminated with exit code 0")
    assert "| instances |   0   |   1   |" in result.stderr
    assert "| replicas  | 0 | 1 | 2 | 3 |" in result.stderr


def test_poprun_passes_partial_lines_on_at_once_with_one_tag(job):
    code = ("import sys, time\n"
            "sys.stderr.write('Graph compilation:  50%\\r'); sys.stderr.flush()\n"
            "sys.stdout.write('no newline yet'); sys.stdout.flush()\n"
            "time.sleep(0.2)\n"
            "sys.stderr.write('Graph compilation: 100%\\r\\n')\n"
            "print(' - done')\n")
    env = dict(os.environ, PYTHONPATH=str(EMULATOR))
    result = subprocess.run([sys.executable, "-m", "aitestbed.graphcore.poprun", *py(code)],
                            capture_output=True, env=env, timeout=60)
    assert result.returncode == 0
    assert result.stdout == b"[1,0]<stdout>:no newline yet - done\n"
    assert result.stderr == (
        b"[1,0]<stderr>:Graph compilation:  50%\rGraph compilation: 100%\r\n")


def test_poprun_is_quiet_without_verbose_and_can_show_one_instance(job):
    result = run_poprun("--num-instances", "2", "--num-replicas", "2",
                        "--only-output-from-instance", "1",
                        *py("import os, sys; print('hi from', os.environ['RANK']);"
                            " print('err', file=sys.stderr)"))
    assert result.returncode == 0
    assert result.stdout == "[1,1]<stdout>:hi from 1\n"
    assert result.stderr == "[1,1]<stderr>:err\n"


def test_poprun_exits_with_the_failing_instances_code_and_stops_the_others(job):
    code = ("import os, sys, time\n"
            "if os.environ['RANK'] == '1': sys.exit(3)\n"
            "time.sleep(30)\n")
    result = run_poprun("--num-instances", "2", "--num-replicas", "2", *py(code), timeout=20)
    assert result.returncode == 3
    assert "mpirun detected that one or more processes exited with non-zero status" in (
        result.stderr)
    assert "  Exit code:    3" in result.stderr


def test_poprun_shows_a_partial_line_at_once_and_forwards_sigterm(job):
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print(' stopping', flush=True),"
            " sys.exit(5)))\n"
            "sys.stdout.write('Loss: 50%'); sys.stdout.flush()\n"
            "time.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=str(EMULATOR))
    proc = subprocess.Popen([sys.executable, "-m", "aitestbed.graphcore.poprun", *py(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        seen = b""
        deadline = time.monotonic() + 20
        while b"Loss: 50%" not in seen and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 1)[0]:
                seen += os.read(proc.stdout.fileno(), 1024)
        assert seen == b"[1,0]<stdout>:Loss: 50%"  # while the instance still runs
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out == b" stopping\n"
    assert proc.returncode == 5


@pytest.mark.parametrize("options, message", [
    (["--num-replicas", "8"], "Partition slurm_42 has 4 IPUs but 8 are needed "
                              "(8 replicas x 1 IPUs per replica)"),
    (["--num-replicas", "2", "--ipus-per-replica", "4"], "Partition slurm_42 has 4 IPUs but 8 "
                                                         "are needed (2 replicas x 4 IPUs per "
                                                         "replica)"),
    (["--num-replicas", "3", "--num-instances", "2"],
     "The number of replicas (3) must be divisible by the number of instances (2)"),
    (["--vipu-partition", "slurm_99"],
     "Partition slurm_99 does not exist on the V-IPU server"),
])
def test_poprun_refuses_what_the_partition_cannot_run(job, options, message):
    result = run_poprun(*options, *py("print('ran')"))
    assert result.returncode == 1
    assert "POPRUN [E] " + message in result.stderr
    assert "ran" not in result.stdout


def test_poprun_outside_a_job_says_how_to_get_a_partition(vipu):
    result = run_poprun(*py("print('ran')"))
    assert result.returncode == 1
    assert "POPRUN [E] No V-IPU partition" in result.stderr
    assert "srun --ipus=N" in result.stderr and "--vipu-partition" in result.stderr


def test_poprun_reports_a_missing_program_as_mpirun_does(job):
    result = run_poprun("no-such-program", "--flag")
    assert result.returncode == 1
    assert "mpirun was unable to find the specified executable file" in result.stderr
    assert "Executable: no-such-program" in result.stderr
    assert "Traceback" not in result.stderr


def test_poprun_bad_option_values_are_usage_errors(job):
    for options in (["--num-replicas", "0"], ["--print-topology=maybe"], ["--bogus"], []):
        result = run_poprun(*options, *(py("pass") if options else []))
        assert result.returncode == 2, options
        assert "usage: poprun" in result.stderr and "Traceback" not in result.stderr


def test_poprun_with_an_unreachable_vipu_server_fails_in_one_line(job):
    result = run_poprun("--vipu-server-host", "127.0.0.1", "--vipu-server-port", "1",
                        *py("pass"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "POPRUN [E] V-IPU server 127.0.0.1:1 does not answer" in result.stderr


def test_gc_info_lists_the_jobs_partition(job, capsys):
    assert gc_info.main(["-l"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["Graphcore device listing:", "Partition: slurm_42 [active]",
                         "-+- Id: [0], target: [Fabric], IPU-M host: [10.1.5.5], IPU#: [3]"]
    assert "-+- Id: [6], target: [Multi IPU]" in lines


def test_gc_info_all_partitions_lists_the_others_too(job, vipu, capsys):
    vipu.create_partition("slurm_43", {"gc-poplar-03": 1}, job_id="43", user="other")
    assert gc_info.main(["-l", "--all-partitions"]) == 0
    out = capsys.readouterr().out
    assert "Partition: slurm_42 [active]" in out
    assert "Partition: slurm_43\n-+- Id: [0], target: [Fabric], IPU-M host: [10.1.5.9]" in out


def test_gc_info_outside_a_job_lists_the_whole_pod_as_the_guide_shows(vipu, capsys):
    """The guide's plain `gc-info -l` on an IPU host: "the devices are numbered 0-63"."""
    vipu.create_partition("slurm_43", {"gc-poplar-03": 1}, job_id="43", user="other")
    assert gc_info.main(["-l"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:2] == ["Graphcore device listing:", "Partition: p64"]
    assert "\n".join(lines[2:5]) == SEED_GC_INFO
    assert "-+- Id: [63], target: [Fabric], IPU-M host: [10.1.5.16], IPU#: [0]" in lines
    assert lines[-65] == "-+- Id: [126], target: [Multi IPU]"  # then its 64 IPUs
    assert "slurm_43" not in captured.out and captured.err == ""


def test_gc_info_piped_to_head_ends_quietly(vipu):
    """The POD's listing is ~500 lines: `| head` closes the pipe under it, with no traceback."""
    for _ in range(3):
        result = subprocess.run(
            f"{sys.executable} -m aitestbed.graphcore.gc_info -l | head -3", shell=True,
            env=dict(os.environ, PYTHONPATH=str(EMULATOR)), capture_output=True, text=True,
            timeout=60)
        assert result.stdout.splitlines()[2] == SEED_GC_INFO.splitlines()[0]
        assert result.stderr == ""


def test_gc_info_device_info_outside_a_job_is_the_pods_device(vipu, capsys):
    assert gc_info.main(["--device-id", "0", "--device-info"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["Device Info:", "id: 0", "target: Fabric"]
    for line in ("ipuof host: 10.1.5.1", "board ipu index: 3", "ipuof partition id: p64"):
        assert line in out
    assert gc_info.main(["-d", "64", "--device-info"]) == 0
    assert "number of ipus: 2" in capsys.readouterr().out
    assert gc_info.main(["-d", "127", "--device-info"]) == 1
    assert capsys.readouterr().err == ("gc-info: unknown device id 127: partition p64 has "
                                       "devices 0-126 (see gc-info -l)\n")


def test_gc_info_device_info_and_an_unknown_device(job, capsys):
    assert gc_info.main(["--device-id", "0", "--device-info"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["Device Info:", "id: 0"] and "ipuof partition id: slurm_42" in out
    assert gc_info.main(["-d", "7", "--device-info"]) == 1
    assert "unknown device id 7" in capsys.readouterr().err


def test_gc_info_with_no_vipu_server_is_one_clear_line(monkeypatch, capsys):
    monkeypatch.setenv("IPUOF_VIPU_API_HOST", "127.0.0.1")
    monkeypatch.setenv("IPUOF_VIPU_API_PORT", "1")
    monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", "slurm_42")
    assert gc_info.main(["-l"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gc-info: V-IPU server 127.0.0.1:1 does not answer")
    assert err.count("\n") == 1


def test_gc_info_on_another_users_partition_is_one_clear_line(tmp_path, monkeypatch, capsys):
    """B12/B13: reads are owner-bound. As seen from another node (not the server's own
    host): mallory points gc-info at learner's partition; then without munged at all."""
    gres = tmp_path / "gres.conf"
    gres.write_text(GRES)
    server = VipuServer(("127.0.0.1", 0), Pod.from_files(gres), tmp_path,
                        identify=lambda credential: 21101, local_reads_all=False)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        VipuClient(host="127.0.0.1", port=server.server_address[1], token=server.token
                   ).create_partition("slurm_42", {"gc-poplar-02": 4}, job_id="42", user="learner")
        monkeypatch.setattr(vipu_server, "user_name", {21101: "mallory"}.get)
        monkeypatch.setattr(munge, "encode", lambda: "MUNGE:mallory:")
        monkeypatch.setenv("IPUOF_VIPU_API_HOST", "127.0.0.1")
        monkeypatch.setenv("IPUOF_VIPU_API_PORT", str(server.server_address[1]))
        monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", "slurm_42")
        assert gc_info.main(["-l"]) == 1
        assert capsys.readouterr().err == (
            "gc-info: partition slurm_42 belongs to another user's job: a V-IPU partition is "
            "read by the owner of its job only\n")

        def no_munged():
            raise munge.MungeError("munged is not running")
        monkeypatch.setattr(munge, "encode", no_munged)
        assert gc_monitor.main(["--all-partitions"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("gc-monitor: the V-IPU server answers only the cluster's users")
        assert err.endswith("(munge -n: munged is not running)\n") and err.count("\n") == 1
    finally:
        server.shutdown()
        server.server_close()


def test_gc_monitor_shows_every_partition_with_all_partitions(job, vipu, capsys, monkeypatch):
    vipu.create_partition("slurm_2616", {"gc-poplar-03": 1}, job_id="2616", user="other")
    monkeypatch.delenv("IPUOF_VIPU_API_PARTITION_ID")  # as on a login node
    assert gc_monitor.main(["--no-card-info", "--all-partitions"]) == 0
    monkeypatch.setenv("IPUOF_VIPU_API_PARTITION_ID", job)
    out = capsys.readouterr().out
    assert "|       IPUs in slurm_42 attached from other namespaces        |" in out
    assert "|      IPUs in slurm_2616 attached from other namespaces       |" in out
    assert "|         gc-poplar-03         |" in out
    assert gc_monitor.main([]) == 0  # the job's own partition, with its card information
    out = capsys.readouterr().out
    assert "Partition: slurm_42 (gcd:0) [active] has 4 reconfigurable IPUs" in out
    assert "slurm_2616" not in out


def test_gc_monitor_crashes_as_documented_when_no_partition_is_active(vipu, capsys):
    assert gc_monitor.main(["--no-card-info", "--all-partitions"]) == 139
    captured = capsys.readouterr()
    assert captured.err == "Segmentation fault (core dumped)\n" and captured.out == ""
