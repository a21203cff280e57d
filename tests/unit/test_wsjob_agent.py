"""The appliance agent against an in-memory API: start, cancel, restart, settle."""

import base64
import io
import json
import os
import pwd
import sys
import tarfile
import time
from pathlib import Path

import pytest
from aitestbed.cerebras import agent as agent_module
from aitestbed.cerebras import wsjob
from aitestbed.cerebras.jobdir import JobDir, UnsafeWorkdir

# A stand-in for cerebras_pytorch's worker: it reads its arguments, sleeps as
# long as the request says, then writes the result file the agent reads.
WORKER = """
import json, sys, time
args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
request = json.load(open(args["--request"]))
print("worker started", flush=True)
time.sleep(request.get("sleep", 0))
json.dump({"ok": request.get("ok", True), "message": request.get("message", "")},
          open(args["--result"], "w"))
"""


class FakeApi:
    def __init__(self, jobs):
        self.jobs = {j["metadata"]["name"]: j for j in jobs}
        self.config_maps = {}

    def list_jobs(self):
        return {"items": list(self.jobs.values()), "metadata": {"resourceVersion": "1"}}

    def patch_status(self, name, status, **_):
        self.jobs[name].setdefault("status", {}).update(status)

    def put_config_map(self, name, binary, labels):
        self.config_maps[name] = binary

    def grant_read(self, config_map, user, labels):
        self.readers = getattr(self, "readers", {})
        self.readers[config_map] = user


@pytest.fixture
def make_agent(tmp_path, monkeypatch):
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{WORKER}' \"$@\"\n")
    python.chmod(0o755)
    monkeypatch.setattr(agent_module.wsjob, "COMPILE_ROOT", str(tmp_path / "compile"))

    def make(jobs):
        made = agent_module.Agent.__new__(agent_module.Agent)
        made.node, made.api = "cer-cs2-01", FakeApi(jobs)
        made.service_user = pwd.getpwuid(os.getuid())
        # the jobs' user, "owner", stands for this test's own account
        made.runner = lambda job: made.service_user
        made.pythons = {"2.1.1": str(python)}
        made.workloads = {}
        made.workdir_root = str(tmp_path / "workdir")
        (tmp_path / "workdir" / "job-operator").mkdir(parents=True, exist_ok=True)
        return made
    return make


def job(tmp_path, name, phase=wsjob.SCHEDULED, **request):
    return {"metadata": {"name": name},
            "spec": {"user": {"username": "owner"}, "jobType": "execute", "release": "2.1.1",
                     "request": json.dumps(request), "workdir": str(tmp_path / name),
                     wsjob.TOKEN_FIELD: wsjob.token_hash("secret")},
            "status": {"phase": phase, "node": "cer-cs2-01", "systems": ["cer-cs2-01"]}}


def settle(agent, name, timeout=10):
    deadline = time.monotonic() + timeout
    while agent.api.jobs[name]["status"]["phase"] not in wsjob.FINISHED:
        assert time.monotonic() < deadline, agent.api.jobs[name]
        agent.reconcile()
        time.sleep(0.05)
    return agent.api.jobs[name]["status"]


def test_a_scheduled_job_runs_and_succeeds_with_its_logs_kept(make_agent, tmp_path):
    agent = make_agent([job(tmp_path, "wsjob-a")])
    agent.reconcile()
    status = agent.api.jobs["wsjob-a"]["status"]
    assert status["phase"] == wsjob.RUNNING and status["ingress"].startswith("cer-cs2-01:")
    assert settle(agent, "wsjob-a")["phase"] == wsjob.SUCCEEDED
    archive = agent.api.config_maps["wsjob-a-logs"]["wsjob-a.tar.gz"]
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive))) as tar:
        log = tar.extractfile("wsjob-a/workload.log").read()
    assert b"worker started" in log


def test_a_failed_workload_reports_its_message(make_agent, tmp_path):
    agent = make_agent([job(tmp_path, "wsjob-b", ok=False, message="ModuleNotFoundError: x")])
    agent.reconcile()
    status = settle(agent, "wsjob-b")
    assert (status["phase"], status["message"]) == (wsjob.FAILED, "ModuleNotFoundError: x")


def test_cancel_stops_the_workload_within_a_second(make_agent, tmp_path):
    agent = make_agent([job(tmp_path, "wsjob-c", sleep=60)])
    agent.reconcile()
    pid = agent.workloads["wsjob-c"].pid
    agent.api.jobs["wsjob-c"]["spec"].update(cancelRequested=True, cancelReason="canceled by u")
    started = time.monotonic()
    agent.reconcile()
    assert time.monotonic() - started < 1.5
    assert agent.api.jobs["wsjob-c"]["status"]["phase"] == wsjob.CANCELLED
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_restarted_agent_adopts_running_work_and_settles_what_ended(make_agent, tmp_path):
    first = make_agent([job(tmp_path, "wsjob-d", sleep=1), job(tmp_path, "wsjob-e")])
    first.reconcile()
    jobs = list(first.api.jobs.values())
    time.sleep(0.3)  # wsjob-e ends while no agent watches
    restarted = make_agent(jobs)  # same jobs, no memory of the workloads
    restarted.reconcile()
    assert "wsjob-d" in restarted.workloads and restarted.workloads["wsjob-d"].process is None
    assert settle(restarted, "wsjob-e")["phase"] == wsjob.SUCCEEDED
    assert settle(restarted, "wsjob-d")["phase"] == wsjob.SUCCEEDED
    for workload in first.workloads.values():  # reap the first agent's children
        workload.process.wait()


def test_a_running_job_without_a_workload_record_fails_instead_of_hanging(make_agent, tmp_path):
    lost = job(tmp_path, "wsjob-f", phase=wsjob.RUNNING)
    agent = make_agent([lost])
    agent.reconcile()
    status = agent.api.jobs["wsjob-f"]["status"]
    assert (status["phase"], status["message"]) == (wsjob.FAILED,
                                                    "the appliance lost the workload")


def test_an_unknown_release_fails_clearly(make_agent, tmp_path):
    old = job(tmp_path, "wsjob-g")
    old["spec"]["release"] = "1.2.3"
    agent = make_agent([old])
    agent.reconcile()
    assert "release '1.2.3' is not installed" in agent.api.jobs["wsjob-g"]["status"]["message"]


def test_huge_logs_keep_their_end_within_the_limit(tmp_path):
    jobdir = JobDir(tmp_path, "job-operator", "wsjob-h", os.getuid(), os.getgid())
    (tmp_path / "job-operator").mkdir()
    jobdir.create()
    jobdir.write("workload.log", os.urandom(300_000).hex() + "THE END")
    data = agent_module.logs_archive("wsjob-h", jobdir, limit=100_000)
    assert len(data) <= 100_000
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        log = tar.extractfile("wsjob-h/workload.log").read()
    assert log.startswith(b"[... earlier output cut ...]") and log.endswith(b"THE END")


# Attacks on the root agent (security review B20, B21): it must never act on a path
# a user chose, nor follow a link anything but itself could have made.
@pytest.fixture
def canary(tmp_path):
    """A file the attacker may not change or read (root's, on the appliance)."""
    path = tmp_path / "root-only" / "canary.txt"
    path.parent.mkdir()
    path.write_text("ORIGINAL-CANARY")
    return path


def evil_dir(tmp_path, canary):
    """The review's ~/evil: request.json and result.json are links to root's files."""
    evil = tmp_path / "home" / "mallory" / "evil"
    evil.mkdir(parents=True)
    for file in ("request.json", "result.json", "workload.log"):
        (evil / file).symlink_to(canary)
    return evil


def test_spec_workdir_is_ignored_so_links_in_it_are_never_written_or_read(make_agent,
                                                                         tmp_path, canary):
    evil = evil_dir(tmp_path, canary)
    attack = job(tmp_path, "wsjob-probeattack1")
    attack["spec"]["workdir"] = str(evil)  # as POSTed with her own certificate
    agent = make_agent([attack])
    agent.reconcile()
    assert settle(agent, "wsjob-probeattack1")["phase"] == wsjob.SUCCEEDED
    assert canary.read_text() == "ORIGINAL-CANARY"  # request.json was not written through
    assert sorted(p.name for p in evil.iterdir()) == ["request.json", "result.json",
                                                      "workload.log"]
    assert all(p.is_symlink() for p in evil.iterdir())
    ran = tmp_path / "workdir" / "job-operator" / "wsjob-probeattack1"
    assert (ran / "request.json").read_text() == attack["spec"]["request"]
    archive = agent.api.config_maps["wsjob-probeattack1-logs"]["wsjob-probeattack1.tar.gz"]
    assert b"ORIGINAL-CANARY" not in tar_contents(archive)


def tar_contents(encoded: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(encoded))) as tar:
        return b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())


def test_a_work_dir_replaced_by_a_link_is_refused(make_agent, tmp_path, canary):
    """Even at the derived path: a link where the job's dir goes is not followed."""
    evil = evil_dir(tmp_path, canary)
    agent = make_agent([job(tmp_path, "wsjob-linked")])
    (tmp_path / "workdir" / "job-operator" / "wsjob-linked").symlink_to(evil)
    agent.reconcile()
    status = agent.api.jobs["wsjob-linked"]["status"]
    assert status["phase"] == wsjob.FAILED
    assert "cannot prepare the job's work dir" in status["message"]
    assert canary.read_text() == "ORIGINAL-CANARY"
    assert "wsjob-linked" not in agent.workloads


@pytest.mark.parametrize("plant", ["symlink", "hardlink"])
def test_result_and_log_links_planted_by_the_workload_are_not_read(make_agent, tmp_path,
                                                                   canary, plant):
    """The workload runs the user's code: if it swaps result.json or workload.log for a
    link to a secret (admin.key), the agent reads neither into the logs ConfigMap."""
    agent = make_agent([job(tmp_path, "wsjob-swap", sleep=0.5)])
    agent.reconcile()
    ran = tmp_path / "workdir" / "job-operator" / "wsjob-swap"
    agent.workloads["wsjob-swap"].process.wait()
    for file in ("result.json", "workload.log"):
        (ran / file).unlink()
        if plant == "symlink":
            (ran / file).symlink_to(canary)
        else:
            os.link(canary, ran / file)
    status = settle(agent, "wsjob-swap")
    assert (status["phase"], status["message"]) == (wsjob.FAILED, agent_module.NO_RESULT)
    contents = tar_contents(agent.api.config_maps["wsjob-swap-logs"]["wsjob-swap.tar.gz"])
    assert b"ORIGINAL-CANARY" not in contents and b"[not exported:" in contents


def test_a_work_dir_root_others_may_write_is_refused(make_agent, tmp_path):
    agent = make_agent([job(tmp_path, "wsjob-open")])
    (tmp_path / "workdir" / "job-operator").chmod(0o777)
    agent.reconcile()
    status = agent.api.jobs["wsjob-open"]["status"]
    assert status["phase"] == wsjob.FAILED and "writable by others" in status["message"]


def test_a_restarted_agent_does_not_adopt_through_a_link(make_agent, tmp_path, canary):
    """workload.pid replaced by a link: the job fails instead of the agent reading it."""
    first = make_agent([job(tmp_path, "wsjob-pid", sleep=1)])
    first.reconcile()
    ran = tmp_path / "workdir" / "job-operator" / "wsjob-pid"
    (ran / "workload.pid").unlink()
    (ran / "workload.pid").symlink_to(canary)
    restarted = make_agent(list(first.api.jobs.values()))
    restarted.reconcile()
    status = restarted.api.jobs["wsjob-pid"]["status"]
    assert (status["phase"], status["message"]) == (wsjob.FAILED,
                                                    "the appliance lost the workload")
    first.workloads["wsjob-pid"].process.wait()


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", "wsjob-X"])
def test_job_names_that_are_not_kubernetes_names_are_refused(name, tmp_path):
    with pytest.raises(UnsafeWorkdir):
        JobDir(tmp_path, "job-operator", name, os.getuid(), os.getgid())


def test_a_job_without_the_ingress_token_hash_is_not_started(make_agent, tmp_path):
    bare = job(tmp_path, "wsjob-notoken")
    del bare["spec"][wsjob.TOKEN_FIELD]
    agent = make_agent([bare])
    agent.reconcile()
    status = agent.api.jobs["wsjob-notoken"]["status"]
    assert status["phase"] == wsjob.FAILED and wsjob.TOKEN_FIELD in status["message"]


def test_only_the_owner_is_granted_the_logs(make_agent, tmp_path):
    """B11: the logs' ConfigMap gets a Role and RoleBinding for the job's owner alone."""
    agent = make_agent([job(tmp_path, "wsjob-mine")])
    agent.reconcile()
    settle(agent, "wsjob-mine")
    assert agent.api.readers == {"wsjob-mine-logs": "owner"}


EVIL_MODULE = """
import os
HERE = os.path.dirname(os.getcwd())
for name in ("result.json", "workload.log", "request.json"):
    path = os.path.join(HERE, name)
    for how in ("symlink", "hardlink"):
        try:
            if how == "symlink":
                os.symlink({secret!r}, "swap")
                os.replace("swap", path)
            else:
                os.link({secret!r}, path + ".new")
                os.replace(path + ".new", path)
            print("SWAP", name, how, "done", flush=True)
        except OSError as err:
            print("SWAP", name, how, "refused", type(err).__name__, flush=True)
        finally:
            if os.path.lexists("swap"):
                os.remove("swap")


def flow(params, **functions):
    return None
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the workload as another user: needs root")
def test_the_real_worker_run_as_its_user_cannot_swap_the_agents_files():
    """B21 from inside: the user's own code, imported by cerebras_pytorch's worker as the
    job's user (`nobody` standing for mallory here), replaces result.json, workload.log
    and request.json with links to a root-only secret. Every swap is refused; nothing
    secret is exported."""
    import shutil
    import tempfile

    import aitestbed
    from cerebras_pytorch.appliance import channel

    root = Path(tempfile.mkdtemp(prefix="wsjob-b21-", dir="/tmp"))
    try:
        root.chmod(0o755)
        service = pwd.getpwnam("nobody")
        secret = root / "admin.key"
        secret.write_text("-----BEGIN PRIVATE KEY----- root only")
        secret.chmod(0o600)
        (root / "workdir" / "job-operator").mkdir(parents=True)
        (root / "compile").mkdir()
        os.chown(root / "compile", service.pw_uid, service.pw_gid)
        package = root / "evilpkg"
        package.mkdir(mode=0o755)
        (package / "evilmod.py").write_text(EVIL_MODULE.format(secret=str(secret)))
        (package / "evilmod.py").chmod(0o644)
        python = root / "python"
        emulator = Path(aitestbed.__file__).resolve().parents[1]
        python.write_text(f"#!/bin/sh\nPYTHONPATH={emulator} exec {sys.executable} \"$@\"\n")
        python.chmod(0o755)

        token = "owners-secret"
        request = {"release": "2.1.1", "python_paths": [str(package)],
                   "mount_dirs": [str(package)],
                   "program": {"flow": "evilmod:flow", "functions": {"model_fn": "evilmod:flow"},
                               "params": {}}}
        made = wsjob.build("compile", request, "mallory", 1, 1, token=token)
        name = made["metadata"]["name"]
        made["status"] = {"phase": wsjob.SCHEDULED, "node": "cer-cs2-01"}
        agent = agent_module.Agent.__new__(agent_module.Agent)
        agent.node, agent.api = "cer-cs2-01", FakeApi([made])
        agent.service_user, agent.pythons = service, {"2.1.1": str(python)}
        agent.runner = lambda job: service
        agent.workloads, agent.workdir_root = {}, str(root / "workdir")
        original = wsjob.COMPILE_ROOT
        wsjob.COMPILE_ROOT = str(root / "compile")
        try:
            agent.reconcile()
        finally:
            wsjob.COMPILE_ROOT = original
        port = int(agent.api.jobs[name]["status"]["ingress"].rpartition(":")[2])
        assert list(channel.connect("127.0.0.1", port, 30, token))[-1]["type"] == "error"
        settle(agent, name, timeout=30)
        contents = tar_contents(agent.api.config_maps[f"{name}-logs"][f"{name}.tar.gz"])
        swaps = [line for line in contents.decode().splitlines() if line.startswith("SWAP ")]
        assert len(swaps) == 6 and all(" refused " in line for line in swaps), swaps
        assert b"PRIVATE KEY" not in contents
        assert secret.read_text() == "-----BEGIN PRIVATE KEY----- root only"
    finally:
        shutil.rmtree(root)


def test_the_loop_lists_the_jobs_when_woken_or_every_resync_not_every_tick(
        make_agent, monkeypatch):
    """Each tick looks at the agent's own workloads; the API's job list is read when the
    watch reports a change, and every RESYNC_SECONDS otherwise."""
    import threading
    import time

    monkeypatch.setattr(agent_module, "TICK_SECONDS", 0.02)
    monkeypatch.setattr(agent_module, "RESYNC_SECONDS", 0.5)
    made = make_agent([])
    made.wake = threading.Event()
    calls = {"list": 0, "settle": 0}
    made.watch = lambda: None
    made.reconcile = lambda: calls.__setitem__("list", calls["list"] + 1)
    made.settle = lambda: calls.__setitem__("settle", calls["settle"] + 1)
    threading.Thread(target=made.run, daemon=True).start()
    time.sleep(0.3)
    assert calls["list"] == 1 and calls["settle"] >= 1  # the first look only
    made.wake.set()  # the watch saw a change
    time.sleep(0.1)
    assert calls["list"] == 2
    time.sleep(0.6)
    assert 3 <= calls["list"] <= 4  # the resync


def test_every_releases_workloads_run_as_their_user_never_a_system_account(tmp_path):
    """The appliance reads the user's files as the user (2.10 did; earlier releases' one
    service user for every job let users attack each other's, D02); the account comes
    from the name the API server checked, never from spec.user.uid (which the user
    writes)."""
    service = pwd.struct_passwd(("wsjob", "x", 9901, 9901, "", "/", "/bin/false"))
    alice = pwd.struct_passwd(("alice", "x", 20001, 20001, "", "/home/alice", "/bin/bash"))
    accounts = {"alice": alice, "root": pwd.getpwnam("root")}

    def job_of(user, release):
        made = wsjob.build("execute", {"release": release}, user, 0, 0)  # uid 0 claimed
        made["spec"]["release"] = release
        return made

    lookup = accounts.__getitem__
    assert agent_module.workload_user(job_of("alice", "2.1.1"), service, lookup) is alice
    assert agent_module.workload_user(job_of("alice", "2.10.0"), service, lookup) is alice
    with pytest.raises(agent_module.WorkloadUserError, match="system account"):
        agent_module.workload_user(job_of("root", "2.10.0"), service, lookup)
    with pytest.raises(agent_module.WorkloadUserError, match="no account"):
        agent_module.workload_user(job_of("mallory", "2.10.0"), service, lookup)


@pytest.mark.skipif(os.geteuid() != 0, reason="makes directories for another uid")
def test_a_users_compile_dir_is_never_reached_through_a_link(tmp_path):
    root = tmp_path / "users"
    root.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    alice = pwd.struct_passwd(("alice", "x", 20001, 20001, "", "/home/alice", "/bin/bash"))
    made = agent_module.user_compile_dir(str(root), alice)
    info = os.stat(made)
    assert (info.st_uid, info.st_mode & 0o777) == (20001, 0o700)
    target = tmp_path / "elsewhere"
    target.mkdir()
    bob = pwd.struct_passwd(("bob", "x", 20002, 20002, "", "/home/bob", "/bin/bash"))
    (root / "bob").symlink_to(target)  # the attack: the agent would chown the link's target
    with pytest.raises(agent_module.UnsafeWorkdir, match="a link"):
        agent_module.user_compile_dir(str(root), bob)
    assert os.stat(target).st_uid == 0
    (root / "carol").mkdir()
    os.chown(root / "carol", 20002, 20002)  # someone else's directory under the name
    carol = pwd.struct_passwd(("carol", "x", 20003, 20003, "", "/home/carol", "/bin/bash"))
    with pytest.raises(agent_module.UnsafeWorkdir, match="belongs to uid 20002"):
        agent_module.user_compile_dir(str(root), carol)
