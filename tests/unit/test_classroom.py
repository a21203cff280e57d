"""The classroom's pure parts: who is in the room, their tokens' URIs, the sheets' endpoints."""

from __future__ import annotations

import datetime as dt
import threading
import time
from urllib.parse import parse_qs, unquote, urlparse

import pyotp
import pytest
from aitestbed.classroom import otp, roster, sheets
from aitestbed.classroom.room import check_listen
from aitestbed.classroom.roster import ClassroomError
from aitestbed.host import passcode
from aitestbed.host.sshconfig import connect_address

pytestmark = pytest.mark.unit

GROUPS = {"cerebras": 3001, "graphcore": 3002, "sambanova": 3003}
TODAY = dt.date(2026, 11, 27)


def plan(count=3, prefix="learner", project="workshop", systems=(), users=None, projects=None):
    return roster.plan(count=count, prefix=prefix, project=project, systems=list(systems),
                       cluster_systems=list(GROUPS), users=users or {}, projects=projects or {},
                       system_groups=GROUPS, today=TODAY)


def test_names_and_ids():
    room = plan(3)
    assert list(room.learners) == ["learner01", "learner02", "learner03"]
    assert room.project_gid == 20000 and list(room.learners.values()) == [20001, 20002, 20003]
    assert room.systems == list(GROUPS)
    assert roster.learner_names("s", 100)[0] == "s001"
    assert roster.learner_names("s", 100)[-1] == "s100"


def test_ids_skip_what_is_taken():
    users = {"alice": {"uid": 20001, "gid": 20001, "active": True}}
    room = plan(2, users=users, projects={"other": {"gid": 20000}})
    assert room.project_gid == 20002
    assert list(room.learners.values()) == [20003, 20004]


def test_an_offboarded_learner_comes_back_with_their_uid():
    users = {"learner02": {"uid": 20007, "gid": 20007, "active": False,
                           "projects": ["workshop"]}}
    room = plan(3, users=users, projects={"workshop": {"gid": 20005}})
    assert room.project_gid == 20005
    assert room.learners == {"learner01": 20000, "learner02": 20007, "learner03": 20001}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"count": 0}, "--learners must be at least 1"),
    ({"count": -3}, "--learners must be at least 1"),
    ({"count": 40000}, "is more than the 39999 uids"),
    ({"prefix": "Learner"}, "is not a user name's start"),
    ({"prefix": "x" * 29}, "is not a user name's start"),
    ({"project": "9lives"}, "is not a project name"),
    ({"systems": ["groq"]}, "this cluster has no 'groq' system"),
    ({"users": {"learner02": {"uid": 1001, "active": True}}},
     "clashes with the existing user 'learner02'"),
    ({"project": "graphcore"}, "is the name of a user or a system group"),
    ({"users": {"bob": {"uid": 1001, "active": True, "projects": ["workshop"]}},
      "projects": {"workshop": {"gid": 5000}}}, "already exists on this cluster with members"),
])
def test_bad_requests_are_refused(kwargs, message):
    with pytest.raises(ClassroomError, match=message):
        plan(**kwargs)


def test_the_uid_range_running_out_is_one_clear_error():
    taken = set(range(roster.UID_FIRST, roster.UID_LAST - 1))
    with pytest.raises(ClassroomError, match="only 2 free uids are left"):
        roster.free_ids(taken, 5)


def test_account_vars_are_what_the_onboarding_playbook_reads():
    room = plan(2, systems=["graphcore"])
    found = roster.account_vars(room, "instructor", TODAY)
    assert found["accounts"] == [{"name": "learner01", "uid": 20001, "systems": ["graphcore"]},
                                 {"name": "learner02", "uid": 20002, "systems": ["graphcore"]}]
    assert found["projects"] == [{"name": "workshop", "gid": 20000, "pi": "instructor",
                                  "members": ["learner01", "learner02"],
                                  "systems": ["graphcore"], "end_date": "2026-12-27"}]


def test_room_record_round_trip(tmp_path):
    room = plan(2)
    roster.save_room(tmp_path, room)
    assert roster.load_room(tmp_path) == room
    assert (tmp_path / "classroom").stat().st_mode & 0o777 == 0o700
    roster.save_room(tmp_path, None)
    assert roster.load_room(tmp_path) is None


def test_a_second_change_while_one_runs_is_refused(tmp_path):
    entered, release = threading.Event(), threading.Event()

    def first():
        with roster.exclusive(tmp_path, "classroom create"):
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    entered.wait(5)
    try:
        with pytest.raises(ClassroomError, match=r"`classroom create` \(pid \d+\) is running"):
            with roster.exclusive(tmp_path, "classroom create"):
                pass
    finally:
        release.set()
        thread.join()
    with roster.exclusive(tmp_path, "classroom reset"):  # free again
        pass


def test_otpauth_uri_gives_the_codes_pam_oath_checks():
    token = {"type": "mobilepass", "secret": "3132333435363738393031323334353637383930"}
    uri = otp.uri(token, "learner07", "ws")
    parsed = urlparse(uri)
    assert parsed.scheme == "otpauth" and parsed.netloc == "totp"
    assert unquote(parsed.path) == "/ALCF AI Testbed (ws):learner07"
    query = parse_qs(parsed.query)
    assert query["digits"] == ["8"] and query["period"] == ["30"]
    assert query["algorithm"] == ["SHA1"] and query["issuer"] == ["ALCF AI Testbed (ws)"]
    app = pyotp.parse_uri(uri)  # what an authenticator app does with the QR code
    now = time.time()
    assert app.at(now) == passcode.code(token, now)
    # RFC 6238's SHA-1 test vector (its key is this secret), 8 digits at T=59
    assert app.at(59) == "94287082"
    assert otp.issuer("aitestbed") == "ALCF AI Testbed"


def test_qr_code_is_an_inline_svg():
    svg = otp.qr_svg("otpauth://totp/x?secret=AAAA")
    assert svg.startswith("<svg") and "<path" in svg and "<?xml" not in svg


SSH_CONFIG = """\
Host *
    User learner

Host gc-login-01 gc-login-01.ai.alcf.anl.gov
    HostName 127.0.0.2
    Port 22002
    HostKeyAlias gc-login-01

Match originalhost cerebras,cerebras.ai.alcf.anl.gov exec "ssh -O check cer-login-01"
    HostName 127.0.0.2
    Port 22001

Host cerebras cerebras.ai.alcf.anl.gov
    ProxyCommand python -m aitestbed.host.relay 22001
"""


def test_ssh_config_endpoints():
    assert sheets.parse_ssh_config(SSH_CONFIG) == {
        "gc-login-01": (("gc-login-01", "gc-login-01.ai.alcf.anl.gov"), 22002)}


def test_host_key_fingerprint_as_ssh_shows_it():
    key = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl "
           "x@y")
    assert sheets.fingerprint(key).startswith("SHA256:") and "=" not in sheets.fingerprint(key)


class _Node:
    def __init__(self, name, mfa):
        self.name, self.node_class, self.ssh_mfa = name, "login", mfa


class _Topology:
    def __init__(self, *nodes):
        self.nodes = list(nodes)


def test_listen_address_checks():
    mfa = _Topology(_Node("gc-login-01", True))
    assert check_listen("127.0.0.2", mfa) == "127.0.0.2"
    with pytest.raises(ClassroomError, match="is not an IP address"):
        check_listen("classroom.example", mfa)
    with pytest.raises(ClassroomError, match="this machine has no such address"):
        check_listen("192.0.2.77", mfa)  # TEST-NET-1: never a host's (bind only, no traffic)
    with pytest.raises(ClassroomError, match="gc-login-02 log.* without a one-time passcode"):
        check_listen("127.0.0.2", _Topology(_Node("gc-login-01", True),
                                            _Node("gc-login-02", False)))
    assert connect_address("0.0.0.0") == "127.0.0.1"
    assert connect_address("127.0.0.2") == "127.0.0.2"


def test_a_failed_playbook_is_reported_by_the_task_s_stderr(tmp_path):
    from aitestbed.classroom.room import _failure
    log = tmp_path / "onboard-user.log"
    log.write_text(
        "TASK [accounts : Create the user accounts] ***\n"
        'fatal: [gc-poplar-01]: FAILED! => {"changed": true, "cmd": ["python"], '
        '"msg": "non-zero return code", "rc": 1, "stderr": "useradd: UID 20001 is not '
        'unique", "stdout": ""}\n')
    assert _failure(log) == "useradd: UID 20001 is not unique"
    log.write_text('fatal: [n]: FAILED! => {"changed": false, "msg": "Group x does not exist"}\n')
    assert _failure(log) == "Group x does not exist"
    log.write_text("PLAY RECAP\n")
    assert _failure(log) == "see the log"
