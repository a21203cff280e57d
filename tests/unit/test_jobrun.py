"""`aitestbed run`'s decisions, transfers and reports, without a cluster."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from aitestbed.host.jobrun import plan, report, runner, transfer
from aitestbed.host.jobrun.plan import JobResult, NodeInfo, PlanError, RunReport

pytestmark = pytest.mark.unit

MINI = [NodeInfo("cer-login-01", "cerebras", "login"), NodeInfo("cer-cs2-01", "cerebras", "cs2"),
        NodeInfo("gc-login-01", "graphcore", "login", "graphcore"),
        NodeInfo("gc-poplar-01", "graphcore", "ipu_node", "graphcore"),
        NodeInfo("gc-slurmctld", "graphcore", "slurmctld", "graphcore"),
        NodeInfo("sambanova", "sambanova", "login", "sn30"),
        NodeInfo("sm-01", "sambanova", "rdu_node", "sn10"),
        NodeInfo("sm-02", "sambanova", "rdu_node", "sn10"),
        NodeInfo("sn10-slurmctld", "sambanova", "slurmctld", "sn10"),
        NodeInfo("sn30-r1-h1", "sambanova", "rdu_node", "sn30"),
        NodeInfo("sn30-slurmctld", "sambanova", "slurmctld", "sn30")]


@pytest.mark.parametrize("system, host, scheduler, controller", [
    ("graphcore", "gc-login-01", "slurm", "gc-slurmctld"),
    ("sambanova", "sambanova", "slurm", "sn30-slurmctld"),
    ("sn10", "sm-01", "slurm", "sn10-slurmctld"),
    ("cerebras", "cer-login-01", "wsjob", ""),
])
def test_each_system_is_used_from_where_its_users_work(system, host, scheduler, controller):
    target = plan.target(system, MINI)
    assert (target.host, target.scheduler, target.controller) == (host, scheduler, controller)


def test_a_system_the_cluster_lacks_or_does_not_know_is_refused():
    with pytest.raises(PlanError, match="no cerebras system.*--systems cerebras"):
        plan.target("cerebras", [n for n in MINI if n.system != "cerebras"])
    with pytest.raises(PlanError, match="no groq system.*--systems groq"):
        plan.target("groq", MINI)
    with pytest.raises(PlanError, match="unknown system 'nope'"):
        plan.target("nope", MINI)


def test_sbatch_options_are_split_as_a_shell_does_and_wait_or_wrap_refused():
    assert plan.sbatch_options(['--ipus=1 --time=10', '-J "my job"']) == [
        "--ipus=1", "--time=10", "-J", "my job"]
    with pytest.raises(PlanError, match="submits the script itself"):
        plan.sbatch_options(["--wrap=hostname"])
    with pytest.raises(PlanError, match="No closing quotation"):
        plan.sbatch_options(['-J "open'])
    assert plan.sbatch_argv("a.sh", ["--ipus=1"]) == ["sbatch", "--parsable", "--ipus=1", "a.sh"]


def test_sbatch_parsable_output():
    assert plan.parse_sbatch_id("42\n") == "42"
    assert plan.parse_sbatch_id("sbatch: warning: x\n43;sn10\n") == "43"
    with pytest.raises(PlanError):
        plan.parse_sbatch_id("Submitted batch job\n")


SCONTROL = ("JobId=7 JobName=a.sh UserId=learner(10001) JobState={state} Reason={reason} "
            "Dependency=(null) ExitCode={code} NodeList=gc-poplar-02 "
            "StdOut=/home/learner/aitestbed-runs/r/1/slurm-7.out")


@pytest.mark.parametrize("state, reason, code, expected_code, status", [
    ("COMPLETED", "None", "0:0", 0, 0),
    ("FAILED", "NonZeroExitCode", "3:0", 3, 3),
    ("FAILED", "NonZeroExitCode", "125:0", 125, 1),  # never mistaken for a tool error
    ("CANCELLED", "None", "0:15", 143, 143),
    ("NODE_FAIL", "NodeDown", "0:0", None, 1),
    ("OUT_OF_MEMORY", "OutOfMemory", "0:125", 253, 253),
    ("TIMEOUT", "TimeLimit", "0:0", None, plan.TIMED_OUT),
])
def test_final_states_and_exit_codes(state, reason, code, expected_code, status):
    view = plan.slurm_view(plan.parse_scontrol(SCONTROL.format(state=state, reason=reason,
                                                               code=code)))
    assert view.final and view.state == state and view.exit_code == expected_code
    assert view.stdout_path.endswith("/slurm-7.out")
    assert plan.exit_status(view.state, view.exit_code) == status


def test_a_pending_job_says_why():
    view = plan.slurm_view(plan.parse_scontrol(SCONTROL.format(state="PENDING",
                                                               reason="Resources", code="0:0")))
    assert not view.final and view.exit_code is None
    assert plan.pending_note(view) == "still PENDING (Resources)"


def test_the_run_exits_with_the_first_failure_in_argument_order():
    assert plan.run_status([("COMPLETED", 0), ("SUCCEEDED", 0)]) == 0
    assert plan.run_status([("COMPLETED", 0), ("FAILED", 2), ("FAILED", 7)]) == 2
    assert plan.run_status([("CANCELLED", None), ("FAILED", 7)]) == 1


def test_figures_the_jobs_printed_last_one_wins():
    text = ("| Train Device=CSX, Step=50, Loss=2.30934, Rate=1200.5 samples/sec, "
            "GlobalRate=1100.0 samples/sec\n"
            "| Train Device=CSX, Step=100, Loss=2.1, Rate=1300.5 samples/sec, "
            "GlobalRate=1150.0 samples/sec\n"
            "Measured 10 iterations of batch size 32: latency 1.5 ms, "
            "throughput 21333.3 samples/s\n"
            "Accuracy on 1920 test images: 95.80%\n")
    assert plan.figures(text) == {"samples_per_sec": 21333.3, "global_samples_per_sec": 1150.0,
                                  "loss": 2.1, "latency_ms": 1.5, "accuracy_percent": 95.8}


def test_wsjobs_are_the_users_created_while_the_script_ran():
    def job(name, user, stamp, phase):
        return {"metadata": {"name": name, "creationTimestamp": stamp},
                "spec": {"user": {"username": user}, "jobType": "execute"},
                "status": {"phase": phase}}
    items = [job("wsjob-b", "learner", "2026-11-26T05:00:10Z", "SUCCEEDED"),
             job("wsjob-a", "learner", "2026-11-26T05:00:05Z", "SUCCEEDED"),
             job("wsjob-other", "someone", "2026-11-26T05:00:06Z", "RUNNING"),
             job("wsjob-old", "learner", "2026-11-26T04:00:00Z", "FAILED")]
    begin = dt.datetime(2026, 11, 26, 5, 0, 4, tzinfo=dt.UTC).timestamp()
    assert [j["name"] for j in plan.wsjobs_of(items, "learner", begin, begin + 10)] == [
        "wsjob-a", "wsjob-b"]


# what goes up -------------------------------------------------------------------------------
def _tree(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "run.sh").write_text("echo hi\n")
    (root / "sub" / "data.txt").write_text("x\n")
    (root / "big.ckpt").write_text("weights\n")
    (root / "sub" / "skip.log").write_text("log\n")
    (root / "out").mkdir()
    (root / "out" / "old.txt").write_text("old\n")
    (root / ".gitignore").write_text("*.ckpt\n")
    (root / "sub" / ".gitignore").write_text("*.log\n")


def test_the_copy_leaves_out_git_ignored_files_and_the_output_dir(tmp_path):
    _tree(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("not a repository\n")
    files = transfer.select(tmp_path, leave_out=tmp_path / "out")
    assert files == [".gitignore", "run.sh", "sub/.gitignore", "sub/data.txt"]


def test_in_a_git_work_tree_git_decides(tmp_path):
    _tree(tmp_path)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    (tmp_path / ".git" / "info" / "exclude").write_text("sub/data.txt\n")
    files = transfer.select(tmp_path)
    assert files == [".gitignore", "out/old.txt", "run.sh", "sub/.gitignore"]


def test_the_output_dir_cannot_be_the_copied_dir(tmp_path):
    with pytest.raises(PlanError, match="choose another --output-dir"):
        transfer.select(tmp_path, leave_out=tmp_path)


def test_pack_keeps_modes_and_links(tmp_path):
    _tree(tmp_path)
    os.chmod(tmp_path / "run.sh", 0o755)
    os.symlink("sub/data.txt", tmp_path / "link")
    data = transfer.pack(tmp_path, ["run.sh", "link", "sub/data.txt"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["run.sh"].mode & 0o777 == 0o755 and members["link"].issym()
    assert members["run.sh"].uname == ""


def _tar(entries: list[tarfile.TarInfo], payload: bytes = b"data") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in entries:
            if info.isreg():
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def _info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


def test_what_comes_back_cannot_write_outside_the_output_dir(tmp_path):
    """A job may leave anything in its directory: links to this machine's files,
    names with .., set-uid bits. Only plain files land, inside the destination."""
    outside = tmp_path / "outside"
    outside.mkdir()
    destination = tmp_path / "out"
    destination.mkdir()
    os.symlink(outside, destination / "planted")  # left by an earlier run, say
    data = _tar([_info("./result.txt", mode=0o4755),
                 _info("../escape.txt"), _info("/etc/evil"),
                 _info("link", tarfile.SYMTYPE, link="/etc/passwd"),
                 _info("planted/through-link.txt"),
                 _info("dev", tarfile.CHRTYPE)])
    assert transfer.unpack(data, destination) == ["result.txt"]
    assert (destination / "result.txt").read_bytes() == b"data"
    assert (destination / "result.txt").stat().st_mode & 0o7777 == 0o755
    assert not (tmp_path / "escape.txt").exists() and not list(outside.iterdir())
    assert not (destination / "link").exists()



def _hostile_git_config(pwned: Path) -> bytes:
    return f'[core]\n\tfsmonitor = "touch {pwned}; false"\n'.encode()


def test_a_jobs_git_directory_never_comes_back(tmp_path):
    """D15 (security-review.md): a job writes .git/config with a core.fsmonitor command;
    brought back, `git status` or `aitestbed run -C` there would run it as this machine's
    user. Nothing under a .git, at any depth or case, comes back."""
    pwned = tmp_path / "pwned"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, payload in [(".git/config", _hostile_git_config(pwned)),
                              (".git/HEAD", b"ref: refs/heads/main\n"),
                              (".git/objects/info/packs", b""),
                              (".git/refs/heads/.keep", b""),
                              ("sub/.GIT/config", _hostile_git_config(pwned)),
                              ("result.txt", b"data"), (".gitignore", b"*.log\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    destination = tmp_path / "out"
    assert transfer.unpack(buffer.getvalue(), destination) == [".gitignore", "result.txt"]
    assert not (destination / ".git").exists() and not (destination / "sub").exists()
    assert transfer.is_git_metadata("a/.Git/hooks/x") and not transfer.is_git_metadata(
        "a/.github/ci.yml")


def test_run_dash_c_on_a_hostile_repository_runs_none_of_its_commands(tmp_path):
    """The other half of D15: a directory that is a repository whose .git/config names a
    command (an output brought back by an older aitestbed, a hostile checkout): listing
    its files for the copy runs nothing. Plain `git ls-files` there does run it (the
    attack is real on this git)."""
    repo, pwned = tmp_path / "repo", tmp_path / "pwned"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "job.sh").write_text("echo hi\n")
    with open(repo / ".git" / "config", "ab") as config:
        config.write(_hostile_git_config(pwned))
    assert transfer.select(repo) == ["job.sh"]
    assert not pwned.exists()
    subprocess.run(["git", "-C", str(repo), "ls-files", "--others"], capture_output=True,
                   check=False)
    assert pwned.exists(), "plain git ls-files did not run core.fsmonitor: the probe is void"



def test_sizes_for_max_output():
    assert plan.parse_size("256M") == 256 << 20 and plan.parse_size("1.5G") == 3 << 29
    assert plan.parse_size("10") == 10 and plan.parse_size("2GiB") == 2 << 30
    for bad in ("0", "-1M", "abc", "", "5T"):
        with pytest.raises(PlanError, match="a size greater than 0"):
            plan.parse_size(bad)
    assert plan.human_size(2 << 30) == "2.0 GiB" and plan.human_size(999) == "999 B"


def test_what_comes_back_fits_the_budget_output_file_first_then_the_smallest():
    """D16 (security-review.md): a job's 2 GB sparse file (0 bytes on the cluster) kept
    the host copying for 17 minutes. The listing's apparent sizes decide, before any
    byte moves: what does not fit stays on the cluster and is named, largest first."""
    listing = (b"2147483648 ./sparse.bin\0" b"400 ./slurm-7.out\0" b"10 ./a.txt\0"
               b"120 ./results/b.txt\0" b"50 ./.git/config\0" b"90 ./c.txt\0" b"junk\0")
    entries = transfer.parse_listing(listing)
    assert entries[0] == ("./sparse.bin", 2 << 30) and len(entries) == 6
    taken, left = transfer.choose(entries, 500, first="slurm-7.out")
    assert [n for n, _ in taken] == ["./slurm-7.out", "./a.txt", "./c.txt"]
    assert left == [("./sparse.bin", 2 << 30), ("./results/b.txt", 120)]
    taken, left = transfer.choose(entries, 1 << 30)
    assert [n for n, _ in taken][:2] == ["./a.txt", "./c.txt"] and len(taken) == 4
    assert left == [("./sparse.bin", 2 << 30)]


# reports ------------------------------------------------------------------------------------
def _report() -> RunReport:
    ok = JobResult("a.sh", "graphcore", "COMPLETED", 0, "7", duration_s=2.5, tail="fine")
    bad = JobResult("b.sh", "graphcore", "FAILED", 3, "8", "NonZeroExitCode", 1.0,
                    tail="boom \x1b[31m")
    return RunReport("ci-1", "graphcore", "learner", [ok, bad])


def test_junit_has_one_testcase_per_script_and_the_failure():
    root = ET.fromstring(report.junit(_report()))
    assert root.get("tests") == "2" and root.get("failures") == "1"
    cases = root.findall("testcase")
    assert [c.get("name") for c in cases] == ["a.sh", "b.sh"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure.get("message") == "b.sh: job 8 FAILED (exit 3) in 1.0 s: NonZeroExitCode"
    assert failure.text == "boom ?[31m"


def test_json_has_ids_states_codes_and_the_run_status():
    data = json.loads(report.as_json(_report()))
    assert data["exit_code"] == 3
    assert [(r["job_id"], r["state"], r["exit_code"]) for r in data["results"]] == [
        ("7", "COMPLETED", 0), ("8", "FAILED", 3)]


def test_one_scripts_fields_read_through_the_report():
    single = RunReport("c", "graphcore", "u", [JobResult("a.sh", "graphcore", "COMPLETED", 0,
                                                         output_file="out/a.sh/slurm-1.out")])
    assert single.state == "COMPLETED" and single.exit_code == 0
    assert single.output_file == "out/a.sh/slurm-1.out" and single.reason == ""
    with pytest.raises(AttributeError):
        _ = single.no_such_field
    with pytest.raises(AttributeError, match="several scripts"):
        _ = _report().state


# the command's own errors -------------------------------------------------------------------
def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    emulator = str(Path(plan.__file__).resolve().parents[3])
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": os.pathsep.join([emulator, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "aitestbed.cli", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, check=False)


@pytest.mark.parametrize("args, message", [
    (["--name", "nocluster", "run", "-s", "graphcore", "a.sh"], "does not exist"),
    (["--name", "nocluster", "run", "-s", "nope", "a.sh"], "Invalid value for '--system'"),
    (["--name", "nocluster", "run", "a.sh"], "Missing option '--system'"),
    (["--name", "nocluster", "run", "-s", "graphcore", "--timeout", "0", "a.sh"],
     "Invalid value for '--timeout'"),
])
def test_errors_of_the_tool_exit_125_in_one_line(tmp_path, args, message):
    result = _cli(tmp_path, *args)
    assert result.returncode == 125, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_who_may_run_where(tmp_path, monkeypatch):
    from aitestbed.host.errors import AitestbedError
    from aitestbed.host.jobrun.runner import check_user
    from aitestbed.host.state import ClusterState

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    state = ClusterState("ci-x")
    registry = state.registry()
    registry.users = {"ann": {"active": True, "systems": ["graphcore"]},
                      "bob": {"active": False, "systems": ["graphcore"]}}
    registry.save()
    check_user(state, "ann", "graphcore")
    with pytest.raises(AitestbedError, match="'ann' has no access to sambanova"):
        check_user(state, "ann", "sn10")
    with pytest.raises(AitestbedError, match="'bob' was offboarded"):
        check_user(state, "bob", "graphcore")
    with pytest.raises(AitestbedError, match="unknown user 'carl'"):
        check_user(state, "carl", "graphcore")


def test_a_job_slurm_forgot_is_read_from_accounting():
    """scontrol forgets a job MinJobAge after it ends; sacct's line then gives its end."""
    look = plan.SACCT_PREFIX + "41|FAILED|3:0|gc-poplar-02\n"
    view = plan.slurm_view(plan.parse_look(look))
    assert (view.state, view.exit_code, view.node_list) == ("FAILED", 3, "gc-poplar-02")
    view = plan.slurm_view(plan.parse_look(plan.SACCT_PREFIX + "42|CANCELLED by 1001|0:0|"))
    assert (view.state, view.exit_code, view.final) == ("CANCELLED", None, True)
    assert plan.parse_look(plan.SACCT_PREFIX + "garbage") == {}
    assert plan.slurm_view(plan.parse_look(plan.SACCT_PREFIX)).state == ""
    assert plan.parse_look("JobId=7 JobState=RUNNING")["JobState"] == "RUNNING"
    assert "SACCT_PREFIX" not in runner.POLL_SCRIPT and plan.SACCT_FIELDS in runner.POLL_SCRIPT


# a submission sbatch or qsub refuses ------------------------------------------------------------
class _SubmitHost:
    """The submit host as BatchRun sees it: each submission's answer in turn; what else it is
    asked (scancel, qdel) recorded."""

    user, container = "learner", "gc-login-01"

    def __init__(self, *answers: tuple[int, str, str]):
        self.answers, self.asked = list(answers), []

    def login_shell(self, command: str) -> tuple[int, str, str]:
        self.asked.append(command)
        return self.answers.pop(0) if self.answers else (0, "", "")

    def exec(self, argv: list[str], as_user: bool = True) -> tuple[int, bytes, bytes]:
        self.asked.append(" ".join(argv))
        return 0, b"", b""


SPANK_REFUSAL = ("sbatch: error: Invalid --ipus specification: 'abc' (a whole number of IPUs, "
                 "1 or more)")


def _slurm_run(host: _SubmitHost, scripts: list[str], sbatch: list[str]) -> runner.SlurmRun:
    options = runner.Options("graphcore", scripts, sbatch=sbatch)
    workspace = runner.Workspace("/home/learner/aitestbed-runs/r",
                                 [f"/home/learner/aitestbed-runs/r/{i}"
                                  for i in range(1, len(scripts) + 1)])
    return runner.SlurmRun(host, workspace, options,
                           [JobResult(s, "graphcore") for s in scripts])


def test_a_refused_submission_is_an_error_of_the_run_and_cancels_what_it_queued():
    """N18: sbatch's own message; the jobs this run queued before are cancelled."""
    from aitestbed.host.errors import AitestbedError

    host = _SubmitHost((0, "41\n", ""), (255, "", SPANK_REFUSAL + "\n"))
    with pytest.raises(AitestbedError) as refused:
        _slurm_run(host, ["a.sh", "b.sh"], []).follow()
    assert str(refused.value) == f"b.sh was not submitted: {SPANK_REFUSAL}"
    assert host.asked[-1] == "scancel 41"


def test_the_submitters_message_is_its_last_line_before_any_usage_hint():
    assert runner.refusal("sbatch: unrecognized option '--bogus'\n"
                          'Try "sbatch --help" for more information\n') == \
        "sbatch: unrecognized option '--bogus'"
    assert runner.refusal("qsub: invalid option -- 'Q'\nusage: qsub [-a date_time]\n"
                          "\t[-C directive_prefix]\n       qsub --version\n") == \
        "qsub: invalid option -- 'Q'"
    assert runner.refusal("") == ""


def test_run_with_an_option_sbatch_refuses_exits_125_with_its_message(monkeypatch):
    """N18: 125, as the documented bad input, not sbatch's 255 as if the job had failed."""
    from aitestbed import cli as cli_module
    from click.testing import CliRunner

    def fake_run(cluster: str, options: runner.Options) -> RunReport:
        submitting = _slurm_run(_SubmitHost((255, "", SPANK_REFUSAL + "\n")),
                                options.scripts, options.sbatch)
        submitting.follow()
        return RunReport(cluster, options.system, "learner", submitting.results)

    monkeypatch.setattr(cli_module.jobrun, "run", fake_run)
    result = CliRunner(mix_stderr=False).invoke(
        cli_module.cli, ["--name", "unit", "run", "-s", "graphcore", "--sbatch", "--ipus=abc",
                         "a.sh"])
    assert result.exit_code == 125, (result.stdout, result.stderr)
    assert result.stderr == f"aitestbed run: error: a.sh was not submitted: {SPANK_REFUSAL}\n"


# a job Slurm could not start -------------------------------------------------------------------
class _LoginAndComputeNodes(_SubmitHost):
    """The submit host, whose looks say the job ended as `line` says, and the compute nodes
    (`on`), where only the directories in `there` exist."""

    def __init__(self, line: str, there: set[str]):
        super().__init__((0, "12\n", ""))
        self.line, self.there = line, there

    def exec(self, argv: list[str], as_user: bool = True) -> tuple[int, bytes, bytes]:
        if argv[0] == "python3":  # POLL_SCRIPT
            jobs = json.loads(argv[-1])
            return 0, json.dumps({job: [self.line, "", ""] for job in jobs}).encode(), b""
        return super().exec(argv, as_user)

    def on(self, node: str) -> _LoginAndComputeNodes:
        host = self

        class Compute:
            def exec(self, argv, as_user=True):
                host.asked.append(f"{node}: {' '.join(argv)}")
                return (0 if argv[:2] == ["test", "-d"] and argv[2] in host.there else 1,
                        b"", b"")
        return Compute()


LAUNCH_FAILED = ("JobId=12 JobName=a.sh UserId=bob(10002) JobState=FAILED "
                 "Reason=JobLaunchFailure Dependency=(null) ExitCode=0:53 "
                 "NodeList=gc-poplar-02 BatchHost=gc-poplar-02 "
                 "StdOut=/home/bob/aitestbed-runs/r/1/slurm-12.out")


def test_a_job_whose_work_directory_the_compute_node_lacks_says_so():
    """N34: not only `JobLaunchFailure` (exit 181)."""
    host = _LoginAndComputeNodes(LAUNCH_FAILED, there=set())
    following = _slurm_run(host, ["a.sh"], [])
    following.follow()
    result = following.results[0]
    assert (result.state, result.exit_code) == ("FAILED", 181)
    assert result.reason == (
        "JobLaunchFailure: the job could not start: its work directory "
        "/home/learner/aitestbed-runs/r/1 does not exist on gc-poplar-02 (is ~/aitestbed-runs "
        "a link to a directory only gc-login-01 has?)")
    assert "gc-poplar-02: test -d /home/learner/aitestbed-runs/r/1" in host.asked
    assert "\n" not in result.summary()


def test_a_launch_failure_with_the_work_directory_there_keeps_slurms_reason():
    host = _LoginAndComputeNodes(LAUNCH_FAILED, there={"/home/learner/aitestbed-runs/r/1"})
    following = _slurm_run(host, ["a.sh"], [])
    following.follow()
    assert following.results[0].reason == "JobLaunchFailure"


def test_the_batch_host_is_where_the_script_starts():
    view = plan.slurm_view(plan.parse_scontrol(LAUNCH_FAILED.replace(
        "NodeList=gc-poplar-02", "NodeList=gc-poplar-[02-03]")))
    assert (view.batch_host, view.node_list) == ("gc-poplar-02", "gc-poplar-[02-03]")
    pending = plan.slurm_view(plan.parse_scontrol("JobId=1 JobState=PENDING BatchHost=(null)"))
    assert pending.batch_host == ""
