"""Accounts and projects as code: what the registry accepts, refuses and records."""

import datetime as dt
import json

import pytest
from aitestbed.host import accounts, passcode
from aitestbed.host.accounts import AccountError, Registry, Spec

SYSTEMS = {"cerebras": 3001, "graphcore": 3002, "sambanova": 3003}
TODAY = dt.date(2026, 11, 22)
ALICE = {"name": "alice", "uid": 20001, "systems": ["cerebras"]}
BOB = {"name": "bob", "uid": 20002, "systems": ["graphcore"], "token": "cryptocard",
       "pin": "4321"}
PROJECT = {"name": "DemoProj", "gid": 40001, "pi": "alice", "members": ["alice"],
           "systems": ["sambanova"], "end_date": "2027-06-30"}
ENDED = {"name": "OldProj", "gid": 40002, "pi": "zed", "members": [],
         "end_date": "2025-01-31"}


def spec(accounts_=(ALICE, BOB), projects=(PROJECT, ENDED)) -> Spec:
    return Spec.from_vars(SYSTEMS, list(accounts_), list(projects))


@pytest.fixture
def registry(tmp_path):
    return Registry(tmp_path / "accounts")


def snapshot(registry: Registry) -> dict:
    return {p.name: p.read_text() for p in registry.directory.rglob("*") if p.is_file()}


def test_onboarding_grants_the_systems_and_projects_with_the_documented_quotas(registry):
    assert registry.onboard(spec(), ["alice"], today=TODAY) == ["DemoProj", "alice"]
    alice = registry.users["alice"]
    assert alice["systems"] == ["cerebras", "sambanova"]  # sambanova through DemoProj
    assert alice["projects"] == ["DemoProj"]
    assert alice["quota"] == {"bytes": 2**40, "files": 1_000_000}
    assert registry.projects["DemoProj"]["quota"] == {"bytes": 2 * 2**40, "files": 2_000_000}
    resolved = registry.resolved(SYSTEMS, {})
    (user,) = resolved["users"]
    assert user["groups"] == ["cerebras", "sambanova", "DemoProj"]
    assert resolved["projects"][0]["members"] == ["alice"]


def test_onboarding_twice_changes_nothing(registry):
    registry.onboard(spec(), ["alice", "bob"], today=TODAY)
    before = snapshot(registry)
    assert registry.onboard(spec(), ["alice", "bob"], today=TODAY) == []
    assert snapshot(registry) == before


def test_tokens_are_private_and_cryptocard_users_keep_their_pin(registry):
    registry.onboard(spec(), ["alice", "bob"], today=TODAY)
    assert set(registry.token("alice")) == {"type", "secret"}
    assert registry.token("bob")["pin"] == "4321"
    path = registry.directory / "tokens" / "bob.json"
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_generated_pin_has_four_digits(registry):
    carol = {"name": "carol", "uid": 20003, "token": "cryptocard"}
    registry.onboard(spec([carol], []), ["carol"])
    pin = registry.token("carol")["pin"]
    assert len(pin) == 4 and pin.isdigit()


@pytest.mark.parametrize(("accounts_", "projects", "message"), [
    ([{**ALICE, "pin": "12345", "token": "cryptocard"}], [], "the PIN must be 4 digits"),
    ([{**ALICE, "pin": "12a4", "token": "cryptocard"}], [], "the PIN must be 4 digits"),
    ([{**ALICE, "pin": "1234"}], [], "a PIN is for CRYPTOCard users"),
    ([{**ALICE, "systems": ["groq"]}], [], "unknown system 'groq'"),
    ([ALICE, {**BOB, "name": "alice"}], [], "'alice' is listed twice"),
    ([ALICE], [{**PROJECT, "systems": ["habana"]}], "unknown system 'habana'"),
    ([ALICE], [{**PROJECT, "name": "alice"}], "the name is taken"),
    ([ALICE], [{**PROJECT, "end_date": "2027-13-01"}], "is not a date"),
    ([{"name": "Bad Name", "uid": 20001}], [], "does not match"),
])
def test_bad_inventory_entries_are_refused_clearly(accounts_, projects, message):
    with pytest.raises(AccountError, match=message):
        Spec.from_vars(SYSTEMS, accounts_, projects)


def test_bad_requests_change_nothing(registry):
    registry.onboard(spec(), ["alice"], today=TODAY)
    before = snapshot(registry)
    taken = {"name": "dave", "uid": 20001}
    cases = [
        (lambda: registry.onboard(spec(), ["zoe"], today=TODAY), "unknown user 'zoe'"),
        (lambda: registry.onboard(spec([ALICE, BOB, taken]), ["bob", "dave"], today=TODAY),
         "duplicate uid 20001: user dave would share it with alice"),
        (lambda: registry.onboard(spec([{**BOB, "uid": 40001}]), ["bob"], today=TODAY),
         "duplicate uid 40001"),
        (lambda: registry.join(spec(), "alice", "DemoProj", TODAY),
         "already a member of project DemoProj"),
        (lambda: registry.join(spec(), "alice", "NoSuch", TODAY), "unknown project 'NoSuch'"),
        (lambda: registry.join(spec(), "alice", "OldProj", TODAY),
         "project OldProj ended on 2025-01-31"),
        (lambda: registry.join(spec(), "bob", "DemoProj", TODAY), "has no account here"),
        (lambda: registry.onboard(spec(projects=[{**ENDED, "members": ["bob"]}]), ["bob"],
                                  today=TODAY), "project OldProj ended"),
        (lambda: registry.offboard("zoe"), "unknown user 'zoe'"),
    ]
    for request, message in cases:
        with pytest.raises(AccountError, match=message):
            request()
        assert snapshot(registry) == before, message


def test_joining_a_project_adds_its_group_and_systems(registry):
    registry.onboard(spec(), ["alice", "bob"], today=TODAY)
    registry.join(spec(), "bob", "DemoProj", TODAY)
    assert registry.users["bob"]["projects"] == ["DemoProj"]
    assert registry.users["bob"]["systems"] == ["graphcore", "sambanova"]
    members = registry.resolved(SYSTEMS, {})["projects"][0]["members"]
    assert members == ["alice", "bob"]


def test_offboarding_keeps_the_uid_but_drops_every_group(registry):
    registry.onboard(spec(), ["alice"], today=TODAY)
    assert registry.offboard("alice") is True
    assert registry.offboard("alice") is False  # a second run changes nothing
    (user,) = registry.resolved(SYSTEMS, {})["users"]
    assert (user["uid"], user["active"], user["groups"]) == (20001, False, [])
    with pytest.raises(AccountError, match="was offboarded"):
        registry.join(spec(), "alice", "DemoProj", TODAY)


def test_projects_are_purged_six_months_after_their_end(registry):
    registry.onboard(spec(), ["alice"], today=TODAY)
    assert registry.purge_date(spec(), "DemoProj") == dt.date(2027, 12, 30)
    assert accounts.add_months(dt.date(2026, 8, 31), 6) == dt.date(2027, 2, 28)


def test_quota_sizes_read_as_people_write_them():
    assert accounts.parse_size("1T") == 2**40
    assert accounts.parse_size("2 TiB") == 2 * 2**40
    assert accounts.parse_size("500G") == 500 * 2**30
    assert accounts.parse_size(1234) == 1234
    with pytest.raises(AccountError, match="cannot read the size"):
        accounts.parse_size("lots")


def test_passcodes_are_rfc6238_totp_with_8_digits():
    token = {"secret": b"12345678901234567890".hex()}  # RFC 6238's SHA-1 test key
    assert passcode.code(token, at=59) == "94287082"
    assert passcode.code(token, at=1111111109) == "07081804"
    assert passcode.typed({**token, "pin": "4321"}, at=59) == "432194287082"
    assert passcode.seconds_left(at=59) == 1


def test_the_registry_file_is_readable_json(registry):
    registry.onboard(spec(), ["alice"], today=TODAY)
    data = json.loads(registry.path.read_text())
    assert set(data) == {"users", "projects"}


class _State:
    """What passcode.token_of asks of a ClusterState."""

    def __init__(self, registry: Registry):
        self.name, self._registry = "practice", registry

    def registry(self) -> Registry:
        return self._registry


def test_the_passcode_app_knows_active_users_only(registry):
    from aitestbed.host.errors import AitestbedError

    registry.onboard(spec(), ["alice", "bob"], today=TODAY)
    state = _State(registry)
    assert passcode.token_of(state, "bob")["pin"] == "4321"
    with pytest.raises(AitestbedError,
                       match="unknown user 'zoe': cluster 'practice' has alice, bob"):
        passcode.token_of(state, "zoe")
    registry.offboard("alice")
    with pytest.raises(AitestbedError, match="user alice was offboarded"):
        passcode.token_of(state, "alice")
