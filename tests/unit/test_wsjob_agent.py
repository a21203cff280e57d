"""The appliance agent against an in-memory API: start, cancel, restart, settle."""

import base64
import io
import json
import os
import pwd
import sys
import tarfile
import time

import pytest
from aitestbed.cerebras import agent as agent_module
from aitestbed.cerebras import wsjob

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
        made.pythons = {"2.1.1": str(python)}
        made.workloads = {}
        return made
    return make


def job(tmp_path, name, phase=wsjob.SCHEDULED, **request):
    return {"metadata": {"name": name},
            "spec": {"jobType": "execute", "release": "2.1.1", "request": json.dumps(request),
                     "workdir": str(tmp_path / name)},
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
    (tmp_path / "workload.log").write_bytes(os.urandom(300_000).hex().encode() + b"THE END")
    data = agent_module.logs_archive("wsjob-h", tmp_path, limit=100_000)
    assert len(data) <= 100_000
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        log = tar.extractfile("wsjob-h/workload.log").read()
    assert log.startswith(b"[... earlier output cut ...]") and log.endswith(b"THE END")
