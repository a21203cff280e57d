"""The wsjob scheduler's decisions: FIFO per job type, systems, the management node's limits."""

import datetime

import pytest
from aitestbed.cerebras import wsjob
from aitestbed.cerebras.scheduler import Limits, decide

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
LIMITS = Limits(systems=("cer-cs2-01", "cer-cs2-02"), management_node="cer-mgmt-01")
_counter = iter(range(1000))


def job(kind="execute", wafers=1, phase=None, systems=(), beat=NOW, **spec):
    n = next(_counter)
    created = (NOW - datetime.timedelta(seconds=600 - n)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"phase": phase, "systems": list(systems)} if phase else {}
    return {"metadata": {"name": f"wsjob-{n:04d}", "creationTimestamp": created,
                         "resourceVersion": "1",
                         "annotations": {wsjob.HEARTBEAT_ANNOTATION:
                                         beat.strftime("%Y-%m-%dT%H:%M:%SZ")}},
            "spec": {"jobType": kind, "numWafers": wafers,
                     "user": {"username": "u"}, **spec},
            "status": status}


def name(j):
    return j["metadata"]["name"]


def test_a_free_system_is_given_to_the_first_execute_job():
    first, second = job(), job()
    out = decide([second, first], LIMITS, NOW)
    assert out.schedule == {name(first): (["cer-cs2-01"], "cer-cs2-01")}
    assert ("top of queue but likely blocked by running jobs, 1 execute job(s) running using "
            "1 system(s)" in out.messages[name(second)])


def test_compiles_run_on_the_first_systems_host_never_the_management_node_one_at_a_time():
    """Users' code stays off the node that holds etcd and the API server (D01)."""
    a, b = job("compile"), job("compile")
    out = decide([a, b], LIMITS, NOW)
    assert out.schedule == {name(a): ([], "cer-cs2-01")}
    assert "1 compile job(s) running using 67Gi memory." in out.messages[name(b)]
    third = job("compile")
    assert ("1 compile job(s) queued before current job."
            in decide([a, b, third], LIMITS, NOW).messages[name(third)])


def test_a_compile_and_an_execute_run_side_by_side():
    c, e = job("compile"), job("execute")
    assert set(decide([c, e], LIMITS, NOW).schedule) == {name(c), name(e)}


def test_strict_fifo_a_two_system_job_is_not_overtaken():
    running = job(phase=wsjob.RUNNING, systems=["cer-cs2-01"])
    two, one = job(wafers=2), job(wafers=1)
    out = decide([running, two, one], Limits(LIMITS.systems, LIMITS.management_node,
                                               max_execute=2), NOW)
    assert out.schedule == {}
    assert ("current job is top of queue but likely blocked by running jobs, 1 execute job(s) "
            "running using 1 system(s), 0 compile job(s) running using 0Gi memory."
            in out.messages[name(two)])
    assert "1 execute job(s) queued before current job." in out.messages[name(one)]
    # when the system frees, the two-system job goes first and gets both
    running["status"]["phase"] = wsjob.SUCCEEDED
    out = decide([running, two, one], LIMITS, NOW)
    assert out.schedule == {name(two): (["cer-cs2-01", "cer-cs2-02"], "cer-cs2-01")}


def test_the_documented_blocked_message():
    c = job("compile", phase=wsjob.RUNNING)
    e = job(phase=wsjob.RUNNING, systems=["cer-cs2-02"])
    waiting = job()
    message = decide([c, e, waiting], LIMITS, NOW).messages[name(waiting)]
    assert message == (
        "job is queueing. Job queue status: current job is top of queue but likely blocked by "
        "running jobs, 1 execute job(s) running using 1 system(s), 1 compile job(s) running "
        "using 67Gi memory. For more information, please run 'csctl get jobs'.")


def test_more_systems_than_the_cluster_has_fails_at_once():
    j = job(wafers=3)
    assert "requests 3 system(s) but the cluster has 2" in decide([j], LIMITS, NOW).fail[name(j)]


def test_queued_jobs_end_on_cancel_or_lost_heartbeat():
    cancelled = job(cancelRequested=True)
    silent = job(beat=NOW - datetime.timedelta(seconds=120))
    out = decide([cancelled, silent], LIMITS, NOW)
    assert out.schedule == {}
    assert set(out.cancel) == {name(cancelled), name(silent)}


def test_running_jobs_without_heartbeat_or_over_time_are_asked_to_stop():
    silent = job(phase=wsjob.RUNNING, systems=["cer-cs2-01"],
                 beat=NOW - datetime.timedelta(seconds=60))
    late = job(phase=wsjob.RUNNING, systems=["cer-cs2-02"], jobTimeSec=10)
    late["status"]["startTime"] = "2026-11-22T11:58:00Z"
    out = decide([silent, late], LIMITS, NOW)
    assert "heartbeats" in out.request_cancel[name(silent)]
    assert "time limit of 10 s" in out.request_cancel[name(late)]


@pytest.mark.parametrize("phase", [wsjob.SCHEDULED, wsjob.RUNNING])
def test_held_systems_come_from_the_jobs_themselves(phase):
    holder = job(phase=phase, systems=["cer-cs2-01", "cer-cs2-02"])
    waiting = job()
    assert decide([holder, waiting], LIMITS, NOW).schedule == {}
    holder["status"]["phase"] = wsjob.FAILED  # e.g. settled by a restarted agent
    assert name(waiting) in decide([holder, waiting], LIMITS, NOW).schedule


def test_an_unchanged_message_is_not_rewritten():
    a, b = job(), job()
    message = decide([a, b], LIMITS, NOW).messages[name(b)]
    b["status"]["message"] = message
    assert name(b) not in decide([a, b], LIMITS, NOW).messages
