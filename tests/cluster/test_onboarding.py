"""Onboarding as staff rehearse it: accounts and projects as code, MFA logins, offboarding.

People come from a vars file given to the playbooks (`-e @people.yml`), as a site
keeps them next to its inventory.
"""

import json
import shlex
import subprocess
import time

import pytest
import yaml
from aitestbed.host import passcode
from aitestbed.host.driver import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

PEOPLE = {
    "accounts": [
        {"name": "alice", "uid": 21001, "systems": ["cerebras"]},
        {"name": "bob", "uid": 21002, "systems": ["graphcore", "sambanova"],
         "token": "cryptocard", "pin": "2468"},
        {"name": "carol", "uid": 21003, "systems": ["sambanova"]},
        {"name": "dave", "uid": 21004, "systems": ["graphcore"]},
        {"name": "erin", "uid": 21001, "systems": ["graphcore"]},  # alice's uid: refused
    ],
    "projects": [
        {"name": "proj1", "gid": 41001, "pi": "alice", "members": ["alice", "carol"],
         "end_date": "2027-06-30"},
        {"name": "done1", "gid": 41002, "pi": "zed", "members": [], "end_date": "2025-01-31"},
    ],
}


@pytest.fixture(scope="module")
def people(cluster, tmp_path_factory):
    path = tmp_path_factory.mktemp("people") / "people.yml"
    path.write_text(yaml.safe_dump(PEOPLE))
    return path


def playbook(cluster, people, name: str, *extra: str) -> subprocess.CompletedProcess:
    return cluster.driver.cli("playbook", name, "-e", f"@{people}", *extra, timeout=900)


def recap_changed(output: str) -> dict[str, int]:
    return {line.split()[0]: int(line.split("changed=")[1].split()[0])
            for line in output.splitlines() if "changed=" in line and " : " in line}


@pytest.fixture(scope="module")
def onboarded(cluster, people):
    result = playbook(cluster, people, "onboard-user", "-e", "user=alice,bob,carol,dave")
    assert result.returncode == 0, result.stdout[-3000:]
    return result


def password_login(cluster, host: str, user: str, typed: str):
    """One login typing `typed` at the prompt, without a shared connection."""
    askpass = cluster.state.root / f"typed-{user}"
    askpass.write_text(f"#!/bin/sh\necho \"$1\" > {askpass}.prompt\necho {typed}\n")
    askpass.chmod(0o700)
    result = cluster.driver.password_login(host, user, askpass,
                                           "-o", "NumberOfPasswordPrompts=1", timeout=60)
    prompt = askpass.with_suffix(".prompt")
    result.prompt = prompt.read_text() if prompt.exists() else ""
    return result


def fresh_code(cluster, user: str) -> str:
    """A code with at least 8 s of its 30 s step left, so two logins share it."""
    while int(time.time()) % 30 > 22:
        time.sleep(1)
    return cluster.cli("passcode", user).stdout.strip()


@pytest.mark.slow("a full onboard-user playbook re-run to show it changes nothing")
def test_onboarding_again_changes_nothing(cluster, people, onboarded):
    result = playbook(cluster, people, "onboard-user", "-e", "user=alice,bob,carol,dave")
    assert result.returncode == 0, result.stdout[-3000:]
    changed = recap_changed(result.stdout)
    assert changed and not any(changed.values()), changed


def test_login_asks_password_and_takes_the_passcode_once(cluster, onboarded):
    code = fresh_code(cluster, "alice")
    first = password_login(cluster, "cer-login-01", "alice", code)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "alice"
    assert "Password:" in first.prompt
    replay = password_login(cluster, "cer-login-01", "alice", code)
    assert replay.returncode == 255 and "Permission denied" in replay.stderr


def test_a_wrong_code_is_refused(cluster, onboarded):
    code = cluster.cli("passcode", "carol").stdout.strip()
    wrong = f"{(int(code) + 1) % 10**8:08d}"
    result = password_login(cluster, "sambanova", "carol", wrong)
    assert result.returncode == 255 and "Permission denied" in result.stderr


def test_cryptocard_users_type_their_pin_then_the_code(cluster, onboarded):
    code = fresh_code(cluster, "bob")
    assert password_login(cluster, "gc-login-01", "bob", code).returncode == 255  # no PIN
    assert password_login(cluster, "gc-login-01", "bob", "1357" + code).returncode == 255
    result = password_login(cluster, "gc-login-01", "bob", "2468" + code)
    assert result.returncode == 0, result.stderr


def test_a_code_is_taken_once_across_the_login_nodes(cluster, onboarded):
    """The login nodes share one passcode store, as ALCF checks codes centrally."""
    time.sleep(passcode.seconds_left() + 0.5)  # a step whose code nobody has used yet
    code = fresh_code(cluster, "bob")
    first = password_login(cluster, "gc-login-01", "bob", "2468" + code)
    assert first.returncode == 0, first.stderr
    elsewhere = password_login(cluster, "sambanova", "bob", "2468" + code)
    assert elsewhere.returncode == 255 and "Permission denied" in elsewhere.stderr


def test_a_user_without_the_system_grant_is_refused_there(cluster, onboarded):
    code = fresh_code(cluster, "alice")  # cerebras only
    result = password_login(cluster, "gc-login-01", "alice", code)
    assert result.returncode == 255 and "Permission denied" in result.stderr


def test_root_cannot_log_in_with_a_code(cluster, onboarded):
    result = password_login(cluster, "sambanova", "root", "12345678")
    assert result.returncode == 255 and "Permission denied" in result.stderr


def test_the_same_ids_on_every_node(cluster, onboarded, node):
    host = cluster.host(node)
    assert host.user("alice").uid == 21001 and host.user("alice").gid == 21001
    assert host.group("proj1").gid == 41001
    assert "proj1" in host.user("carol").groups


def test_homes_are_private(cluster, onboarded):
    host = cluster.host("sambanova")
    assert host.file("/home/bob").mode == 0o700
    result = host.run("runuser -u carol -- ls /home/bob")
    assert result.rc != 0 and "Permission denied" in result.stderr


def test_project_members_share_the_project_directory(cluster, onboarded):
    login = cluster.host("sambanova")
    directory = login.file("/projects/proj1")
    assert directory.group == "proj1" and directory.mode == 0o2770
    made = cluster.host("cer-login-01").run(
        "runuser -u alice -- sh -c 'umask 007; echo shared > /projects/proj1/notes.txt'")
    assert made.rc == 0, made.stderr
    read = login.run("runuser -u carol -- cat /projects/proj1/notes.txt")
    assert read.stdout == "shared\n"
    assert login.file("/projects/proj1/notes.txt").group == "proj1"  # setgid
    outsider = login.run("runuser -u dave -- ls /projects/proj1")
    assert outsider.rc != 0


def test_myquota_reports_home_and_projects(cluster, onboarded):
    result = cluster.host("cer-login-01").run("runuser -u alice -- myquota")
    assert result.rc == 0, result.stderr
    assert "/home" in result.stdout and "proj1" in result.stdout
    if cluster.record.get("storage") == "image":  # the cluster's own file systems
        assert "Byte quotas are enforced" in result.stdout
    else:
        assert "Quotas are reported, not enforced" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["-e", "user=zoe"], "unknown user 'zoe'"),
    (["-e", "user=erin"], "duplicate uid 21001"),
    ([], "name the user(s)"),
])
def test_bad_onboarding_requests_fail_clearly(cluster, people, onboarded, args, message):
    result = playbook(cluster, people, "onboard-user", *args)
    assert result.returncode != 0
    assert message in result.stdout
    assert not cluster.host("gc-login-01").user("erin").exists  # nothing half-created


@pytest.mark.slow("a full join-project playbook run; a refused request's path is presubmit")
def test_joining_a_project_twice_is_refused(cluster, people, onboarded):
    first = playbook(cluster, people, "join-project", "-e", "user=bob", "-e", "project=proj1")
    assert first.returncode == 0, first.stdout[-3000:]
    assert "proj1" in cluster.host("sm-01").user("bob").groups
    again = playbook(cluster, people, "join-project", "-e", "user=bob", "-e", "project=proj1")
    assert again.returncode != 0
    assert "bob is already a member of project proj1" in again.stdout


@pytest.mark.slow("one more refused playbook request (its rule is unit-tested)")
def test_joining_an_ended_project_is_refused(cluster, people, onboarded):
    result = playbook(cluster, people, "join-project", "-e", "user=carol", "-e", "project=done1")
    assert result.returncode != 0
    assert "project done1 ended on 2025-01-31" in result.stdout


@pytest.mark.slow("one more refused playbook request (its rule is unit-tested)")
def test_a_bad_pin_is_refused(cluster, tmp_path, onboarded):
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump({"accounts": [
        {"name": "frank", "uid": 21009, "token": "cryptocard", "pin": "12345"}]}))
    result = playbook(cluster, bad, "onboard-user", "-e", "user=frank")
    assert result.returncode != 0 and "the PIN must be 4 digits" in result.stdout


@pytest.mark.slow("three expire-project playbook runs, the last a purge")
def test_project_data_is_purged_only_when_due_and_confirmed(cluster, people, onboarded):
    early = playbook(cluster, people, "expire-project", "-e", "project=proj1",
                     "-e", "today=2027-07-01")
    assert early.returncode != 0 and "may be purged from 2027-12-30" in early.stdout
    dry = playbook(cluster, people, "expire-project", "-e", "project=proj1",
                   "-e", "today=2028-01-02")
    assert dry.returncode == 0 and "dry run: would remove /projects/proj1" in dry.stdout
    assert cluster.host("sambanova").file("/projects/proj1").exists
    purge = playbook(cluster, people, "expire-project", "-e", "project=proj1",
                     "-e", "today=2028-01-02", "-e", "confirm=yes")
    assert purge.returncode == 0, purge.stdout[-3000:]
    assert not cluster.host("sambanova").file("/projects/proj1").exists


def test_an_offboarded_user_is_refused_and_their_jobs_are_gone(cluster, people, onboarded):
    login = cluster.host("gc-login-01")
    submit = login.run("cd /home/dave && runuser -u dave -- sbatch --wrap 'sleep 600' && "
                       "runuser -u dave -- sbatch --begin=now+1hour --wrap 'sleep 600'")
    assert submit.rc == 0, submit.stderr
    assert len(login.run("squeue -h -u dave").stdout.splitlines()) == 2
    result = playbook(cluster, people, "offboard-user", "-e", "user=dave")
    assert result.returncode == 0, result.stdout[-3000:]
    assert login.run("squeue -h -u dave").stdout.strip() == ""
    code = fresh_code_or_none(cluster, "dave")
    assert code is None  # the token is gone with the account
    refused = password_login(cluster, "gc-login-01", "dave", "12345678")
    assert refused.returncode == 255
    assert login.file("/home/dave").exists  # policy: keep
    assert not login.file("/etc/oath/users/dave.oath").exists
    again = playbook(cluster, people, "offboard-user", "-e", "user=dave")
    assert again.returncode == 0 and not any(recap_changed(again.stdout).values())


def fresh_code_or_none(cluster, user: str):
    result = cluster.cli("passcode", user, check=False)
    if result.returncode:
        assert "was offboarded" in result.stderr
        return None
    return result.stdout.strip()


@pytest.mark.slow("a second offboarding playbook run (archive policy); offboarding is presubmit")
def test_offboarding_can_archive_the_home(cluster, people, onboarded):
    sambanova = cluster.host("sambanova")
    sambanova.run("runuser -u carol -- sh -c 'echo results > /home/carol/results.txt'")
    result = playbook(cluster, people, "offboard-user", "-e", "user=carol",
                      "-e", '{"account_policy": {"offboard_home": "archive"}}')
    assert result.returncode == 0, result.stdout[-3000:]
    assert not sambanova.file("/home/carol").exists
    listing = sambanova.run("tar -tzf /home/.offboarded/carol.tar.gz")
    assert "carol/results.txt" in listing.stdout
    assert sambanova.file("/home/.offboarded").mode == 0o700


def wsjob_manifest(name: str, user: str, wafers: int) -> str:
    return json.dumps({
        "apiVersion": "jobs.cerebras.com/v1", "kind": "WSJob",
        "metadata": {"name": name, "namespace": "job-operator"},
        "spec": {"user": {"username": user}, "jobType": "execute", "numWafers": wafers,
                 "workdir": f"/n1/wsjob/workdir/job-operator/{name}", "release": "none",
                 "request": "{}"}})


@pytest.mark.slow("a third offboarding playbook run, with a queued wsjob on the appliance")
def test_offboarding_cancels_the_users_queued_wsjobs(cluster, people, onboarded):
    """alice's job waits behind another user's job holding both CS-2s; offboarding cancels
    hers through the appliance's scheduler and leaves the other user's alone."""
    admin = cluster.host("cer-mgmt-01")
    blocker, queued = "wsjob-offboardblocker000000000", "wsjob-offboardalice00000000000"

    def job(name: str) -> dict:
        return json.loads(admin.check_output(f"kubectl get wsjob -n job-operator {name} -o json"))

    admin.check_output(f"echo {shlex.quote(wsjob_manifest(blocker, 'someone', 2))} "
                       "| kubectl apply -f -")
    try:
        # Its release is not installed, so it fails at once; then staff mark it running
        # on both systems somewhere no agent looks, so the next job has to queue.
        wait_for(lambda: job(blocker).get("status", {}).get("phase") == "FAILED", 60, 0.5,
                 "the blocking job to fail")
        systems = job(blocker)["status"]["systems"]
        assert len(systems) == 2
        status = json.dumps({"status": {"phase": "RUNNING", "node": "nowhere",
                                        "systems": systems}})
        admin.check_output(f"kubectl patch wsjob -n job-operator {blocker} "
                           f"--subresource=status --type=merge -p {shlex.quote(status)}")
        admin.check_output(f"echo {shlex.quote(wsjob_manifest(queued, 'alice', 1))} "
                           "| kubectl apply -f -")
        wait_for(lambda: "job is queueing" in job(queued).get("status", {}).get("message", ""),
                 60, 0.5, "alice's job to queue")

        result = playbook(cluster, people, "offboard-user", "-e", "user=alice")
        assert result.returncode == 0, result.stdout[-3000:]
        wait_for(lambda: job(queued)["status"].get("phase") == "CANCELLED", 60, 0.5,
                 "alice's job to be cancelled")
        assert job(queued)["spec"]["cancelReason"] == "the user was offboarded"
        assert job(blocker)["status"]["phase"] == "RUNNING"
        assert not job(blocker)["spec"].get("cancelRequested")
    finally:
        admin.run(f"kubectl delete wsjob -n job-operator {blocker} {queued} --ignore-not-found")
