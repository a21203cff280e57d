"""roles/accounts' filter: the account tasks loop only over what differs from the node."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_PATH = (Path(__file__).resolve().parents[2] / "roles" / "accounts" / "filter_plugins"
         / "accounts_pending.py")
_spec = importlib.util.spec_from_file_location("accounts_pending", _PATH)
pending = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pending)

PASSWD = {"ann": ["x", "2001", "2001", "", "/home/ann", "/bin/bash"],
          "old": ["x", "2002", "2002", "", "/home/old", "/bin/bash"]}
GROUP = {"graphcore": ["x", "3002", "ann"], "ann": ["x", "2001", ""], "old": ["x", "2002", ""],
         "proj": ["x", "5000", "ann"]}
SHADOW = {"ann": ["!", "20000", "0", "99999", "7", "", "", ""],
          "old": ["!", "20000", "0", "99999", "7", "", "1", ""]}
ANN = {"name": "ann", "uid": 2001, "gid": 2001, "groups": ["graphcore", "proj"],
       "shell": "/bin/bash", "active": True}
OLD = {"name": "old", "uid": 2002, "gid": 2002, "groups": [], "shell": "/bin/bash",
       "active": False}


def test_nothing_is_pending_when_the_node_has_it_all():
    assert pending.pending_users([ANN, OLD], PASSWD, GROUP, SHADOW) == []
    assert pending.pending_groups({"graphcore": 3002, "proj": 5000}, GROUP) == []


@pytest.mark.parametrize("change", [
    {"uid": 2009}, {"gid": 2009}, {"shell": "/bin/sh"}, {"groups": ["graphcore"]},
    {"groups": ["graphcore", "proj", "cerebras"]}, {"active": False}, {"name": "new"},
])
def test_any_difference_makes_the_user_pending(change):
    user = {**ANN, **change}
    assert pending.pending_users([user], PASSWD, GROUP, SHADOW) == [user]


def test_an_offboarded_user_coming_back_is_pending():
    back = {**OLD, "active": True, "groups": ["graphcore"]}
    assert pending.pending_users([back], PASSWD, GROUP, SHADOW) == [back]


def test_missing_or_moved_groups_are_pending():
    assert pending.pending_groups({"graphcore": 3002, "cerebras": 3001, "proj": 5001},
                                  GROUP) == [{"name": "cerebras", "gid": 3001},
                                             {"name": "proj", "gid": 5001}]
    assert pending.pending_groups({"a": 1}, None) == [{"name": "a", "gid": 1}]
    assert pending.pending_users([ANN], None, None, None) == [ANN]
