"""csctl's output and input checks, without a cluster."""

import datetime
import json

import pytest
from aitestbed.cerebras import csctl, wsjob

NOW = datetime.datetime(2023, 8, 10, 22, 9, 47, tzinfo=datetime.UTC)


def job(name, phase, created, started=None, ended=None, systems=(), labels=None, user="username"):
    status = {"phase": phase, "systems": list(systems)}
    if started:
        status["startTime"] = started
    if ended:
        status["completionTime"] = ended
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": labels or {}},
            "spec": {"user": {"username": user}, "jobType": "execute", "numWafers": 1},
            "status": status}


def test_the_guides_row():
    j = job("wsjob-thjj8zticwsylhppkbmjqe", "RUNNING", "2023-08-10T22:09:34Z",
            started="2023-08-10T22:09:46Z", systems=["cer-cs2-01"], labels={"name": "unet_pt"})
    out = csctl.format_jobs([j], "table", NOW).splitlines()
    assert out[0].split() == ["NAME", "AGE", "DURATION", "PHASE", "SYSTEMS", "USER", "LABELS",
                              "DASHBOARD"]
    assert out[1].split() == [
        "wsjob-thjj8zticwsylhppkbmjqe", "13s", "1s", "RUNNING", "cer-cs2-01", "username",
        "name=unet_pt",
        "https://grafana.cerebras1.lab.alcf.anl.gov/d/WebHNShVz/wsjob-dashboard?orgId=1"
        "&var-wsjob=wsjob-thjj8zticwsylhppkbmjqe&from=1691705374000&to=now"]
    # columns line up as kubectl's do: each starts where its header does
    assert out[1].index("13s") == out[0].index("AGE")
    assert out[1].index("cer-cs2-01") == out[0].index("SYSTEMS")


def test_debug_shows_more_fields():
    j = job("wsjob-q", "QUEUEING", "2023-08-10T22:09:34Z")
    j["status"]["message"] = "job is queueing."
    header, line = csctl.format_jobs([j], "table", NOW, debug=1).splitlines()
    assert header.split() == ["NAME", "AGE", "DURATION", "PHASE", "TYPE", "NODE", "SYSTEMS",
                              "USER", "LABELS", "DASHBOARD", "MESSAGE"]
    assert line.endswith("job is queueing.") and " execute " in line


def test_labels_are_listed_sorted_and_greppable():
    j = job("wsjob-ez6dyfronnsg2rz7f7fqw4", "SUCCEEDED", "2023-08-10T21:50:00Z",
            started="2023-08-10T21:50:05Z", ended="2023-08-10T21:55:00Z",
            systems=["cer-cs2-02"], labels={"user": "username", "testlabel": "test"})
    assert "testlabel=test,user=username" in csctl.format_jobs([j], "table", NOW)


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (13, "13s"), (119, "119s"),
                                           (125, "2m5s"), (600, "10m"), (1140, "19m"),
                                           (3 * 3600 + 240, "3h4m"), (20 * 3600, "20h"),
                                           (3 * 86400, "3d")])
def test_human_durations(seconds, text):
    assert csctl.human_duration(seconds) == text


def test_finished_jobs_show_for_an_hour_unless_all():
    old = job("a", "SUCCEEDED", "2023-08-10T18:00:00Z", ended="2023-08-10T19:00:00Z")
    recent = job("b", "CANCELLED", "2023-08-10T21:00:00Z", ended="2023-08-10T21:50:00Z")
    running = job("c", "RUNNING", "2023-08-10T17:00:00Z")
    assert [csctl.visible(j, NOW, False) for j in (old, recent, running)] == [False, True, True]
    assert csctl.visible(old, NOW, True)


def test_json_and_yaml_are_lists_of_the_jobs():
    j = job("wsjob-x", "QUEUEING", "2023-08-10T22:09:34Z")
    assert json.loads(csctl.format_jobs([j], "json", NOW))["items"][0]["status"]["phase"] == \
        "QUEUEING"
    assert "kind: List" in csctl.format_jobs([j], "yaml", NOW)


def test_label_changes():
    assert csctl.parse_label_changes(["testlabel=test", "old-", "empty="]) == {
        "testlabel": "test", "old": None, "empty": ""}
    for bad in ["novalue", "a=b=c", "bad key=v", "-x=1", "k=" + "v" * 64]:
        with pytest.raises(csctl.CsctlError):
            csctl.parse_label_changes([bad])


def test_help_version_and_types(capsys):
    assert csctl.main(["-h"]) == 0
    assert "clear-worker-cache Clear the worker cache" in capsys.readouterr().out
    assert csctl.main(["-v"]) == 0
    assert capsys.readouterr().out.startswith("csctl version ")
    assert csctl.main(["types"]) == 0
    assert capsys.readouterr().out.split() == ["jobs"]


def test_bad_input_gives_a_message_and_exit_1(capsys, tmp_path):
    missing = tmp_path / "config_v2"
    assert csctl.main(["--csconfig", str(missing), "get", "jobs"]) == 1
    assert "usernode config" in capsys.readouterr().err
    assert csctl.main(["--csconfig", str(missing), "label", "job", "wsjob-x", "a=b=c"]) == 1
    with pytest.raises(SystemExit) as exit_:
        csctl.main(["get"])
    assert exit_.value.code == 2


def test_a_submitted_job_names_and_describes_the_request():
    request = {"num_csx": 2, "job_labels": {"name": "gptj_pt"}, "release": "2.1.1",
               "mount_dirs": ["/home/", "/software"], "python_paths": ["/home/u/modelzoo"],
               "compile_dir": "u", "job_time_sec": None}
    made = wsjob.build("execute", request, "u", 10001, 10001, time_scale="0.5")
    assert made["metadata"]["name"].startswith("wsjob-") and len(made["metadata"]["name"]) == 28
    assert made["metadata"]["labels"] == {"name": "gptj_pt", "user": "u"}
    assert made["spec"]["numWafers"] == 2 and made["spec"]["timeScale"] == "0.5"
    assert made["spec"]["workdir"] == f"/n1/wsjob/workdir/job-operator/{made['metadata']['name']}"
    assert json.loads(made["spec"]["request"]) == request


def test_the_appliance_labels_each_job_with_its_user_and_grep_finds_the_guides_row():
    """002: `csctl label job ... testlabel=test`, then `csctl get jobs | grep "testlabel=test"`
    prints `... cer-cs2-02 username testlabel=test,user=username`."""
    made = wsjob.build("execute", {"job_labels": {"user": "someoneelse"}}, "username",
                       10001, 10001)
    assert made["metadata"]["labels"] == {"user": "username"}  # the appliance's, not the request's
    plain = wsjob.build("compile", {}, "username", 10001, 10001)
    assert plain["metadata"]["labels"] == {"user": "username"}
    made["metadata"].update(creationTimestamp="2023-08-10T21:50:00Z")
    made["metadata"]["labels"].update(csctl.parse_label_changes(["testlabel=test"]))
    made["status"] = {"phase": "SUCCEEDED", "systems": ["cer-cs2-02"],
                      "startTime": "2023-08-10T21:50:05Z", "completionTime": "2023-08-10T21:55:00Z"}
    rows = [line for line in csctl.format_jobs([made], "table", NOW).splitlines()
            if "testlabel=test" in line]
    assert len(rows) == 1
    assert rows[0].split()[3:7] == ["SUCCEEDED", "cer-cs2-02", "username",
                                    "testlabel=test,user=username"]


def test_global_flags_may_follow_the_command():
    for argv in (["-d", "1", "--namespace", "ns", "get", "jobs"],
                 ["get", "jobs", "-d", "1", "--namespace", "ns"]):
        args = csctl.parser().parse_args(argv)
        assert (args.debug, args.namespace, args.type) == (1, "ns", "jobs")
    assert csctl.parser().parse_args(["get", "jobs"]).debug == 0
