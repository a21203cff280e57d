"""aitestbed.node.accounts: the useradd/usermod each pending account gets (pure)."""

from aitestbed.node.accounts import EXPIRED, command_for

USER = {"name": "learner01", "uid": 20001, "gid": 20001, "groups": ["graphcore", "workshop"],
        "shell": "/bin/bash", "active": True}


def test_a_new_account_is_added_without_a_home():
    assert command_for(USER, None) == [
        "useradd", "-M", "-u", "20001", "-g", "learner01", "-G", "graphcore,workshop",
        "-d", "/home/learner01", "-s", "/bin/bash", "learner01"]


def test_a_new_offboarded_account_is_added_expired():
    argv = command_for({**USER, "active": False}, None)
    assert argv[-3:] == ["-e", EXPIRED, "learner01"]


def test_an_existing_account_keeps_its_uid_so_usermod_never_re_owns_the_home():
    argv = command_for(USER, 20001)
    assert argv[0] == "usermod" and "-u" not in argv
    assert argv[-3:] == ["-e", "", "learner01"]  # active: no expiry


def test_a_changed_uid_is_set():
    argv = command_for(USER, 1234)
    assert argv[1:3] == ["-u", "20001"]


def test_offboarding_expires_and_no_groups_means_none():
    argv = command_for({**USER, "active": False, "groups": []}, 20001)
    assert argv[argv.index("-G") + 1] == ""
    assert argv[-3:] == ["-e", EXPIRED, "learner01"]
