"""The device-code login (RFC 8628) completed with the user's passcode, and the admin
commands that age, revoke and list a user's tokens: the token helper (aitestbed.metis.auth)
against an in-process gateway on a clock of the test's, the enrolments rendered from
roles/sshd's own template, the codes computed by pyotp (not by the code under test)."""

from __future__ import annotations

import base64
import fcntl
import http.client
import json
import os
import stat
import threading
import time
import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import pyotp
import pytest
import yaml
from aitestbed.host import sshdconf
from aitestbed.metis import admin, auth, config, device, otp, server
from aitestbed.metis.client import MetisClient, MetisError
from aitestbed.metis.gateway import PASSCODE_STATE, Gateway
from aitestbed.metis.state import EXPIRED, INACTIVE, REAUTHENTICATE
from aitestbed.metis.tokens import ACCESS_TOKEN_SECONDS, SESSION_SECONDS

from . import ansible_render
from .metis_support import gateway_config

START = 1_800_000_000.0  # the gateway's clock at the start of each test (a step's start)
RFC_SECRET = b"12345678901234567890"  # RFC 6238's SHA-1 test key
SECRETS = {"alice": "11" * 20, "bob": "22" * 20, "carol": "33" * 20, "svc": "44" * 20}
BOB_PIN = "4321"  # bob has a CRYPTOCard token: PIN first


def code(user: str, at: float) -> str:
    """What the user's token shows at `at` (pyotp, as aitestbed.host.passcode)."""
    secret = base64.b32encode(bytes.fromhex(SECRETS[user])).decode()
    return pyotp.TOTP(secret, digits=8, interval=30).at(int(at))


def typed(user: str, at: float) -> str:
    return (BOB_PIN if user == "bob" else "") + code(user, at)


class Box:
    """The gateway's wall clock, moved by the tests (and by the helper's sleeps)."""

    def __init__(self) -> None:
        self.now = START


def accounts_json(path: Path, users) -> Path:
    path.write_text(json.dumps({"groups": [], "projects": [], "users": [
        {"name": n, "uid": u, "gid": u, "active": a, "groups": []} for n, u, a in users]}))
    return path


class Running:
    """A gateway (one forwarded model: nothing to load) on 127.0.0.1 with alice, bob
    (a PIN), carol (offboarded, still enrolled), svc (a system uid, enrolled), dave (no
    token); their pam_oath files rendered from roles/sshd/templates/oath-user.j2."""

    def __init__(self, tmp: Path, box: Box | None = None):
        self.tmp, self.box = tmp, box or Box()
        self.oath = tmp / "oath"
        self.oath.mkdir(exist_ok=True)
        tokens = {u: {"secret": s} for u, s in SECRETS.items()}
        tokens["bob"]["pin"] = BOB_PIN
        for name, text in sshdconf.oath_files(tokens).items():
            (self.oath / name).write_text(text)
        self.accounts = accounts_json(tmp / "accounts.json", [
            ("alice", 20001, True), ("bob", 20002, True), ("carol", 20003, False),
            ("svc", 999, True), ("dave", 20004, True)])
        self.tokens_path = tmp / "state" / "tokens.json"
        settings = {"accounts": str(self.accounts), "oath_users": str(self.oath),
                    "models": [{"name": "gpt-oss-120b", "upstream": {
                        "url": "http://127.0.0.1:9/v1", "model": "x"}}]}
        self.config = gateway_config(tmp / "no-weights", self.tokens_path, **settings)
        self.config_file = tmp / "gateway.yml"
        self.config_file.write_text(json.dumps({"weights": str(tmp / "no-weights"),
                                                "tokens": str(self.tokens_path),
                                                **settings}))
        self.gateway = Gateway(self.config, scale=0.0, clock=lambda: self.box.now)
        self.server = server.serve(self.gateway, "127.0.0.1", 0)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def env(self, home: str = "home") -> dict:
        return {"AITESTBED_METIS_URL": self.url,
                "AITESTBED_METIS_TOKENS": str(self.tmp / home / "tokens.json"),
                "AITESTBED_METIS_MUNGE_SOCKET": str(self.tmp / "no-munge-socket")}  # the host

    def post(self, path: str, body, form: bool = False):
        """(status, headers, body: JSON decoded, or the page's text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        if form:
            data, kind = urllib.parse.urlencode(body), server.FORM
        else:
            data, kind = json.dumps(body), "application/json"
        conn.request("POST", path, data, {"Content-Type": kind})
        response = conn.getresponse()
        raw = response.read().decode()
        conn.close()
        decoded = json.loads(raw) if "json" in response.getheader("Content-Type", "") else raw
        return response.status, response, decoded

    def get(self, path: str):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", path)
        response = conn.getresponse()
        raw = response.read().decode()
        conn.close()
        return response.status, response, raw

    def start(self) -> dict:
        status, _, offer = self.post(server.DEVICE, {"client_id": "test"})
        assert status == 200
        return offer

    def verify(self, user_code: str, username: str, passcode: str, form: bool = False):
        return self.post(server.VERIFY, {"user_code": user_code, "username": username,
                                         "passcode": passcode}, form)

    def poll(self, device_code: str):
        return self.post(server.AUTH, {"grant_type": device.GRANT_TYPE,
                                       "device_code": device_code})

    def client(self, token: str) -> MetisClient:
        return MetisClient(self.url, token, timeout=10)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gw(tmp_path):
    running = Running(tmp_path)
    yield running
    running.close()


class Person:
    """The helper's Terminal: what the person types (None: Enter on an empty line), what
    the helper says, and its sleeps (which move the gateway's clock; `on_sleep` runs
    first: the person entering the code at the URL meanwhile)."""

    def __init__(self, box: Box, answers=(), interactive: bool = True, on_sleep=None,
                 speed: float = 1.0):
        self.box, self.answers, self.interactive = box, list(answers), interactive
        self.said: list[str] = []
        self.prompts: list[str] = []
        self.sleeps: list[float] = []
        self.on_sleep, self.speed = on_sleep, speed

    def say(self, line: str) -> None:
        self.said.append(line)

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0) or ""

    secret = ask

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.on_sleep:
            self.on_sleep(len(self.sleeps))
        self.box.now += seconds * self.speed

    def clock(self) -> float:
        return self.box.now


def login(gw: Running, user: str, home: str = "home", force: bool = False) -> dict:
    """The user logs in at the terminal; the helper's stored tokens."""
    person = Person(gw.box, [user, typed(user, gw.box.now)])
    line = auth.authenticate(force, env=gw.env(home), terminal=person)
    assert line.startswith(f"Authenticated as {user}")
    return json.loads((gw.tmp / home / "tokens.json").read_text())


# --- the helper ---------------------------------------------------------------------------------
def test_at_a_terminal_the_helper_asks_and_the_token_works(gw):
    person = Person(gw.box, ["alice", typed("alice", gw.box.now)])
    line = auth.authenticate(env=gw.env(), terminal=person)
    assert line == f"Authenticated as alice; tokens stored in {gw.tmp / 'home/tokens.json'}"
    first = person.said[0]
    assert first.startswith(f"Please go to {gw.url}{server.VERIFY} and enter the code ")
    user_code = first.rsplit(" ", 1)[1]
    assert device.user_code_of(user_code) == user_code and len(user_code) == 9
    assert f"user_code={user_code}" in person.said[1] and "10 minutes" in person.said[1]
    assert person.prompts == ["Username: ", "Passcode: "] and person.sleeps == []
    saved = json.loads((gw.tmp / "home/tokens.json").read_text())
    assert stat.S_IMODE((gw.tmp / "home/tokens.json").stat().st_mode) == 0o600
    assert saved["user"] == "alice" and saved["refresh_token"] != saved["access_token"]
    assert saved["expires_at_seconds"] == int(START + ACCESS_TOKEN_SECONDS)
    assert saved["session_ends_at_seconds"] == int(START + SESSION_SECONDS)
    assert gw.client(auth.get_access_token(env=gw.env(), now=gw.box.now)).models()["data"]
    assert gw.gateway.stats["sessions"] == 1


def test_a_wrong_passcode_at_the_terminal_is_asked_again(gw):
    person = Person(gw.box, ["bob", code("bob", gw.box.now),  # the PIN forgotten
                             "bob", typed("bob", gw.box.now)])
    assert auth.authenticate(env=gw.env(), terminal=person).startswith("Authenticated as bob")
    assert "not right. 4 tries left" in person.said[2]


def test_a_code_entered_on_the_web_page_is_collected_by_polling(gw):
    entered = []

    def on_sleep(count: int) -> None:
        if count == 2:  # after one pending poll, the person fills in the page's form
            user_code = person.said[0].rsplit(" ", 1)[1]
            status, response, page = gw.verify(user_code.lower().replace("-", " "), "bob",
                                               typed("bob", gw.box.now), form=True)
            entered.append((status, page))
    person = Person(gw.box, interactive=False, on_sleep=on_sleep)
    assert auth.authenticate(env=gw.env(), terminal=person).startswith("Authenticated as bob")
    assert person.prompts == [] and person.sleeps == [5, 5]
    assert "Waiting for the code to be entered..." in person.said
    status, page = entered[0]
    assert status == 200 and "Logged in as bob" in page and "<form" not in page


def test_empty_username_at_the_terminal_leaves_it_to_the_url(gw):
    def on_sleep(count: int) -> None:
        user_code = person.said[0].rsplit(" ", 1)[1]
        assert gw.verify(user_code, "alice", typed("alice", gw.box.now))[0] == 200
    person = Person(gw.box, [None], on_sleep=on_sleep)
    assert auth.authenticate(env=gw.env(), terminal=person).startswith("Authenticated as alice")
    assert person.prompts == ["Username: "] and person.sleeps == [5]


def test_the_helper_honours_slow_down_and_stops_when_the_code_expires(gw, capsys):
    # a helper whose sleeps are half as long as it asks (its clock runs slow)
    person = Person(gw.box, interactive=False, speed=0.5)
    with pytest.raises(auth.AuthError, match="expired before it was entered") as err:
        auth.authenticate(env=gw.env(), terminal=person)
    assert err.value.code == "expired_token"
    assert person.sleeps[:4] == [5, 5, 10, 15]  # each slow_down adds 5 s
    assert all(b - a == 5 for a, b in zip(person.sleeps[1:], person.sleeps[2:], strict=False))
    assert not (gw.tmp / "home/tokens.json").exists()


def test_too_many_wrong_passcodes_deny_the_code_and_the_helper_exits_1(gw, monkeypatch,
                                                                        capsys):
    wrong = "00000000" if code("alice", gw.box.now) != "00000000" else "11111111"
    person = Person(gw.box, ["alice", wrong] * 5)
    monkeypatch.setattr(auth, "Terminal", lambda: person)
    for key, value in gw.env().items():
        monkeypatch.setenv(key, value)
    assert auth.main(["authenticate"]) == 1
    err = capsys.readouterr().err
    assert err == ("inference_auth_token.py: Too many wrong passcodes: that code is denied. "
                   "Run `python inference_auth_token.py authenticate` again for a new one.\n")
    assert [s for s in person.said if "tries left" in s][-1].endswith("1 tries left for this "
                                                                       "code.")


def test_authenticate_device_uses_the_device_login_even_beside_a_munge_socket(gw):
    socket = gw.tmp / "munge.socket.2"
    socket.touch()
    env = {**gw.env(), "AITESTBED_METIS_MUNGE_SOCKET": str(socket)}
    person = Person(gw.box, ["alice", typed("alice", gw.box.now)])
    assert auth.authenticate(env=env, device=True, terminal=person).startswith(
        "Authenticated as alice")
    assert person.said[0].startswith("Please go to")


# --- the service's side: RFC 8628 -----------------------------------------------------------
def test_the_device_authorization_response_has_rfc_8628s_fields(gw):
    status, response, offer = gw.post(server.DEVICE, {})
    assert status == 200 and response.getheader("Cache-Control") == "no-store"
    assert set(offer) == {"device_code", "user_code", "verification_uri",
                          "verification_uri_complete", "expires_in", "interval"}
    assert offer["verification_uri"] == f"{gw.url}/auth/device/verify"
    assert offer["verification_uri_complete"].endswith(f"?user_code={offer['user_code']}")
    assert (offer["expires_in"], offer["interval"]) == (600, 5)
    assert all(c in device.ALPHABET + "-" for c in offer["user_code"])
    assert len(offer["device_code"]) >= 40
    status, _, form_offer = gw.post(server.DEVICE, {"client_id": "x"}, form=True)
    assert status == 200 and form_offer["user_code"] != offer["user_code"]


def test_polls_answer_pending_then_slow_down_then_the_session_once(gw):
    offer = gw.start()
    status, _, body = gw.poll(offer["device_code"])
    assert (status, body["error"]) == (400, "authorization_pending")
    assert set(body) == {"error", "error_description"}
    gw.box.now += 1
    status, _, body = gw.poll(offer["device_code"])
    assert (status, body["error"]) == (400, "slow_down") and "10 s" in body["error_description"]
    gw.box.now += 6  # 5 s: slower than before, but not than the new interval (10)
    assert gw.poll(offer["device_code"])[2]["error"] == "slow_down"
    gw.box.now += 15
    assert gw.poll(offer["device_code"])[2]["error"] == "authorization_pending"
    assert gw.verify(offer["user_code"], "alice", typed("alice", gw.box.now))[0] == 200
    status, response, session = gw.poll(offer["device_code"])  # at once: it is approved
    assert status == 200 and session["user"] == "alice" and session["refresh_token"]
    assert response.getheader("Cache-Control") == "no-store"
    assert set(session) == {"access_token", "token_type", "user", "expires_in",
                            "expires_at_seconds", "session_ends_at_seconds", "refresh_token"}
    gw.box.now += 30
    status, _, again = gw.poll(offer["device_code"])  # single use
    assert (status, again["error"]) == (400, "invalid_grant")
    assert gw.poll("not-a-device-code")[2]["error"] == "invalid_grant"
    status, _, used = gw.verify(offer["user_code"], "bob", typed("bob", gw.box.now))
    assert (status, used["error"]["code"]) == (400, "invalid_user_code")


def test_a_code_not_entered_in_time_expires(gw):
    offer = gw.start()
    gw.box.now += 600
    status, _, body = gw.poll(offer["device_code"])
    assert (status, body["error"]) == (400, "expired_token")
    status, _, body = gw.verify(offer["user_code"], "alice", typed("alice", gw.box.now))
    assert (status, body["error"]["code"]) == (400, "expired_user_code")
    approved = gw.start()  # approved, but collected too late
    assert gw.verify(approved["user_code"], "alice", typed("alice", gw.box.now))[0] == 200
    gw.box.now += 601
    assert gw.poll(approved["device_code"])[2]["error"] == "expired_token"
    gw.box.now += 600  # long gone: forgotten at the next grant
    gw.start()
    assert gw.poll(offer["device_code"])[2]["error"] == "invalid_grant"


def test_five_wrong_passcodes_deny_the_code_even_to_the_right_one(gw):
    offer = gw.start()
    right = typed("alice", gw.box.now)
    wrongs = [f"{(int(right) + i) % 10 ** 8:08d}" for i in range(1, 6)]
    for tries, wrong in enumerate(wrongs[:4], 1):
        status, _, body = gw.verify(offer["user_code"], "alice", wrong)
        assert (status, body["error"]["code"]) == (401, "invalid_passcode")
        assert f"{5 - tries} tries left" in body["error"]["message"]
    status, _, body = gw.verify(offer["user_code"], "alice", wrongs[4])
    assert (status, body["error"]["code"]) == (403, "access_denied")
    status, _, body = gw.verify(offer["user_code"], "alice", right)
    assert (status, body["error"]["code"]) == (403, "access_denied")
    assert gw.poll(offer["device_code"])[2]["error"] == "access_denied"
    other = gw.start()  # the passcode was not taken: another code takes it
    assert gw.verify(other["user_code"], "alice", right)[0] == 200


def test_a_passcode_is_taken_once_even_across_a_restart(gw):
    first, second = gw.start(), gw.start()
    now_code = typed("alice", gw.box.now)
    assert gw.verify(first["user_code"], "alice", now_code)[0] == 200
    status, _, body = gw.verify(second["user_code"], "alice", now_code)
    assert (status, body["error"]["code"]) == (401, "passcode_replayed")
    earlier = typed("alice", gw.box.now - 30)  # within the window, but before the one taken
    assert gw.verify(second["user_code"], "alice", earlier)[2]["error"]["code"] == \
        "passcode_replayed"
    taken = json.loads((gw.tokens_path.parent / PASSCODE_STATE).read_text())
    assert taken == {"last_step": {"alice": int(START // 30)}}
    gw.close()
    restarted = Running(gw.tmp, gw.box)  # the same state directory
    try:
        third = restarted.start()
        assert restarted.verify(third["user_code"], "alice", now_code)[2]["error"]["code"] == \
            "passcode_replayed"
        restarted.box.now += 30
        assert restarted.verify(third["user_code"], "alice",
                                typed("alice", restarted.box.now))[0] == 200
    finally:
        restarted.close()


def test_passcodes_beyond_one_step_either_side_are_refused(gw):
    offer = gw.start()
    for offset in (-60, 60, 3600):
        status, _, body = gw.verify(offer["user_code"], "alice", typed("alice",
                                                                        gw.box.now + offset))
        assert (status, body["error"]["code"]) == (401, "invalid_passcode"), offset
    assert gw.verify(offer["user_code"], "alice", typed("alice", gw.box.now + 30))[0] == 200


@pytest.mark.parametrize("username, passcode_of", [
    ("carol", "carol"),  # offboarded, though still enrolled and her code right
    ("svc", "svc"),  # a system uid (999), enrolled
    ("root", "alice"), ("dave", "alice"),  # no account / no token: not alice's code either
    ("nobody", "alice"), ("../oath/alice", "alice"), ("alice/../alice", "alice"),
    ("Alice", "alice"), ("alice ", "bob"),
])
def test_only_an_active_testbed_account_with_its_own_passcode_completes_a_code(
        gw, username, passcode_of):
    offer = gw.start()
    status, _, body = gw.verify(offer["user_code"], username, typed(passcode_of, gw.box.now))
    assert (status, body["error"]["code"]) == (401, "invalid_passcode")
    assert not (gw.tokens_path.parent / PASSCODE_STATE).exists()  # nobody's code taken
    assert gw.poll(offer["device_code"])[2]["error"] == "authorization_pending"


def test_one_user_cannot_complete_a_code_as_another_or_take_over_a_completed_one(gw):
    offer = gw.start()  # alice's helper
    attacks = [("alice", typed("bob", gw.box.now)),  # bob's own valid passcode
               ("alice", code("bob", gw.box.now)),  # its code without bob's PIN
               ("alice", BOB_PIN + code("alice", gw.box.now + 90)),  # a guess off the window
               ("bob", code("bob", gw.box.now))]  # bob without his PIN
    for username, passcode in attacks:
        status, _, body = gw.verify(offer["user_code"], username, passcode)
        assert status == 401, (username, passcode)
    assert gw.verify(offer["user_code"], "alice", typed("alice", gw.box.now))[0] == 200
    gw.box.now += 30  # bob, with a fresh valid passcode, tries to make it his
    status, _, body = gw.verify(offer["user_code"], "bob", typed("bob", gw.box.now))
    assert (status, body["error"]["code"]) == (400, "invalid_user_code")
    session = gw.poll(offer["device_code"])[2]
    assert session["user"] == "alice"
    guessed = gw.verify("BCDF-GHJK", "bob", typed("bob", gw.box.now))  # a code nobody has
    assert (guessed[0], guessed[2]["error"]["code"]) == (400, "invalid_user_code")
    assert gw.verify(offer["user_code"], "bob", typed("bob", gw.box.now), form=True)[0] == 400


def test_an_account_offboarded_after_its_passcode_gets_no_session(gw):
    offer = gw.start()
    assert gw.verify(offer["user_code"], "alice", typed("alice", gw.box.now))[0] == 200
    accounts_json(gw.accounts, [("alice", 20001, False)])
    os.utime(gw.accounts, ns=(1, 2))
    status, _, body = gw.poll(offer["device_code"])
    assert (status, body["error"]) == (400, "access_denied") and "no active account" in \
        body["error_description"]


def test_bad_verify_requests_are_refused_with_json(gw):
    offer = gw.start()
    for body, field in [({"username": "alice", "passcode": "1"}, "user_code"),
                        ({"user_code": offer["user_code"], "passcode": "1"}, "username"),
                        ({"user_code": offer["user_code"], "username": "alice",
                          "passcode": ["1"]}, "passcode")]:
        status, _, answer = gw.post(server.VERIFY, body)
        assert (status, answer["error"]["param"]) == (400, field)
    status, _, answer = gw.post(server.AUTH, {"grant_type": device.GRANT_TYPE})
    assert (status, answer["error"]) == (400, "invalid_request")
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    conn.request("DELETE", server.VERIFY)
    assert conn.getresponse().status == 405
    conn.close()


def test_the_page_escapes_what_it_shows_and_loads_nothing_from_elsewhere(gw):
    status, response, page = gw.get(server.VERIFY + "?user_code=%3Cscript%3Ealert(1)"
                                                    "%3C%2Fscript%3E")
    assert status == 200 and response.getheader("Content-Type").startswith("text/html")
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "default-src 'none'" in response.getheader("Content-Security-Policy")
    assert response.getheader("X-Frame-Options") == "DENY"
    assert "src=" not in page and "http" not in page.replace("http-equiv", "")
    offer = gw.start()
    status, _, page = gw.get(f"{server.VERIFY}?user_code={offer['user_code']}")
    assert f'value="{offer["user_code"]}"' in page and 'type="password"' in page
    status, _, page = gw.verify(offer["user_code"], '"><img src=x onerror=alert(1)>',
                                "1", form=True)
    assert status == 401 and "<img" not in page and "&quot;&gt;&lt;img" in page
    assert "not right" in page


# --- the admin commands -------------------------------------------------------------------------
def run_admin(gw: Running, capsys, *argv) -> tuple[int, dict | str]:
    """The admin command at the gateway's clock."""
    saved, admin.CLOCK = admin.CLOCK, lambda: gw.box.now
    try:
        code_ = admin.main(["--config", str(gw.config_file), *argv])
    finally:
        admin.CLOCK = saved
    out, err = capsys.readouterr()
    return code_, (json.loads(out) if code_ == 0 else err)


def test_an_aged_token_is_expired_then_refreshed_by_get_access_token(gw, capsys):
    saved = login(gw, "alice")
    token = saved["access_token"]
    code_, aged = run_admin(gw, capsys, "age", "--user", "alice", "--seconds",
                            str(ACCESS_TOKEN_SECONDS - 100))
    assert code_ == 0 and aged["aged"] == 1 and aged["session"] is False
    access = [t for t in aged["tokens"] if t["kind"] == "access"]
    assert [t["seconds_left"] for t in access] == [100]
    assert auth.get_time_until_token_expiration(env=gw.env(), now=gw.box.now) == 100
    gw.box.now += 200
    with pytest.raises(MetisError) as err:
        gw.client(token).models()
    assert (err.value.status, str(err.value), err.value.code) == (401, EXPIRED, "unauthorized")
    assert auth.get_time_until_token_expiration(env=gw.env(), now=gw.box.now) == -100
    fresh = auth.get_access_token(env=gw.env(), now=gw.box.now)  # its own copy says 48 h
    assert fresh != token and gw.client(fresh).models()["object"] == "list"
    again = json.loads((gw.tmp / "home/tokens.json").read_text())
    assert again["expires_at_seconds"] == int(gw.box.now + ACCESS_TOKEN_SECONDS)
    assert again["refresh_token"] == saved["refresh_token"]


def test_an_aged_session_forces_re_authentication(gw, capsys):
    login(gw, "alice")
    code_, aged = run_admin(gw, capsys, "age", "--user", "alice", "--seconds",
                            str(SESSION_SECONDS), "--session")
    assert code_ == 0 and aged["aged"] == 2 and aged["session"] is True
    assert {t["kind"] for t in aged["tokens"]} == {"access", "refresh"}
    assert all(t["session_seconds_left"] == 0 and not t["live"] for t in aged["tokens"])
    with pytest.raises(auth.AuthError) as err:
        auth.get_access_token(env=gw.env(), now=gw.box.now)
    assert str(err.value) == REAUTHENTICATE
    gw.box.now += 30  # a new code for the new login
    login(gw, "alice", force=True)
    assert gw.client(auth.get_access_token(env=gw.env(), now=gw.box.now)).models()


def test_ageing_without_session_leaves_the_session(gw, capsys):
    login(gw, "alice")
    run_admin(gw, capsys, "age", "--user", "alice", "--seconds", "60")
    _, listed = run_admin(gw, capsys, "list", "--user", "alice")
    by_kind = {t["kind"]: t for t in listed["tokens"]}
    assert by_kind["access"]["seconds_left"] == ACCESS_TOKEN_SECONDS - 60
    assert by_kind["access"]["session_seconds_left"] == SESSION_SECONDS
    assert by_kind["refresh"]["seconds_left"] == SESSION_SECONDS


def test_revoke_stops_the_tokens_and_the_refresh(gw, capsys):
    saved = login(gw, "alice")
    login(gw, "bob", home="bob")
    code_, revoked = run_admin(gw, capsys, "revoke", "--user", "alice")
    assert code_ == 0 and revoked == {"user": "alice", "revoked": 2}
    with pytest.raises(MetisError) as err:
        gw.client(saved["access_token"]).models()
    assert (err.value.status, str(err.value)) == (401, INACTIVE)
    with pytest.raises(auth.AuthError, match="refresh token is not valid"):
        auth.get_access_token(env=gw.env(), now=gw.box.now)
    bob = json.loads((gw.tmp / "bob/tokens.json").read_text())
    assert gw.client(bob["access_token"]).models()  # only alice's


def test_list_shows_the_tokens_never_a_token(gw, capsys):
    saved = login(gw, "alice")
    code_, listed = run_admin(gw, capsys, "list", "--user", "alice")
    assert code_ == 0 and listed["user"] == "alice"
    assert [t["kind"] for t in listed["tokens"]] == ["access", "refresh"]
    assert set(listed["tokens"][0]) == {"id", "kind", "expires_at", "revoked", "seconds_left",
                                        "session_ends", "session_seconds_left", "live"}
    text = json.dumps(listed)
    stored = json.loads(gw.tokens_path.read_text())
    assert saved["access_token"] not in text and saved["refresh_token"] not in text
    assert not any(t["sha256"] in text for t in stored["tokens"])
    assert run_admin(gw, capsys, "list", "--user", "bob")[1]["tokens"] == []


@pytest.mark.parametrize("argv, message", [
    (["age", "--user", "alice", "--seconds", "-5"], "--seconds must be a positive number"),
    (["age", "--user", "alice", "--seconds", "nan"], "--seconds must be a positive number"),
    (["age", "--user", "alice", "--seconds", "soon"], "not a number"),
    (["age", "--user", "../alice", "--seconds", "5"], "--user must be an account name"),
    (["age", "--user", "bob", "--seconds", "5"], "bob has no live tokens"),
    (["revoke", "--user", "bob"], "bob has no tokens"),
    (["list"], "--user"),
])
def test_admin_bad_input_is_one_line_and_exit_2(gw, capsys, argv, message):
    login(gw, "alice")
    code_, err = run_admin(gw, capsys, *argv)
    assert code_ == 2 and message in err and "Traceback" not in err


def test_admin_without_a_usable_config_is_one_line_and_exit_2(tmp_path, capsys):
    assert admin.main(["--config", str(tmp_path / "none.yml"), "list", "--user", "a"]) == 2
    assert capsys.readouterr().err.startswith("metis admin: cannot read")
    (tmp_path / "g.yml").write_text("weights: /w\n")
    assert admin.main(["--config", str(tmp_path / "g.yml"), "list", "--user", "a"]) == 2
    assert "names no token store" in capsys.readouterr().err


def test_an_admin_edit_waits_for_the_gateways_lock(gw):
    login(gw, "alice")
    store = admin.store_of(gw.config_file)
    lock = os.open(gw.tokens_path.with_name("tokens.json.lock"), os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as another process (the gateway) mid-change
    done = []
    worker = threading.Thread(target=lambda: done.append(
        store.age_user("alice", 60, now=gw.box.now)))
    worker.start()
    time.sleep(0.2)
    assert done == []
    os.close(lock)
    worker.join(5)
    assert done == [1]


def test_as_root_the_admin_becomes_the_stores_owner(monkeypatch):
    def directory(uid: int, gid: int):
        return SimpleNamespace(stat=lambda: SimpleNamespace(st_uid=uid, st_gid=gid))
    monkeypatch.setattr(admin.os, "geteuid", lambda: 0)
    assert admin.become_owner(directory(9902, 9903)) == (9902, 9903)  # the gateway's user
    assert admin.become_owner(directory(0, 0)) is None  # root's: stay root
    assert admin.become_owner(Path("/nonexistent/state")) is None
    monkeypatch.setattr(admin.os, "geteuid", lambda: 1000)
    assert admin.become_owner(directory(9902, 9903)) is None  # not root: nothing to drop


# --- the passcode check itself ---------------------------------------------------------------
@pytest.mark.parametrize("at, expected", [(59, "94287082"), (1111111109, "07081804"),
                                          (1111111111, "14050471"), (1234567890, "89005924"),
                                          (2000000000, "69279037"), (20000000000, "65353130")])
def test_totp_gives_rfc_6238s_sha1_test_vectors(at, expected):
    assert otp.hotp(RFC_SECRET, at // 30, 8) == expected


def test_the_login_nodes_usersfile_line_is_read_as_pam_oath_reads_it():
    line = sshdconf.oath_files({"bob": {"secret": SECRETS["bob"], "pin": "4321"}})["bob.oath"]
    enrolment = otp.read_enrolment(line, "bob")
    assert enrolment == otp.Enrolment("bob", bytes.fromhex(SECRETS["bob"]), "4321", 30, 8)
    assert otp.read_enrolment(line, "alice") is None
    written = f"# a comment\n{line.strip()}\t0\t12345678\t2026-01-01T00:00:00L\n"
    assert otp.read_enrolment(written, "bob") == enrolment  # pam_oath's own fields after
    for bad in ("HOTP\tbob\t-\t00ff\n", "HOTP/E/8\tbob\t-\t00ff\n", "HOTP/T30/8\tbob\t+\t00ff\n",
                "HOTP/T30/8\tbob\t-\tnothex\n", "HOTP/T30/9\tbob\t-\t00ff\n"):
        assert otp.read_enrolment(bad, "bob") is None, bad
    assert otp.read_enrolment("HOTP/T60\tbob\t-\t00ff\n", "bob").digits == 6


def test_check_takes_a_code_once_and_only_with_its_pin():
    enrolment = otp.Enrolment("bob", RFC_SECRET, "12", 30, 8)
    assert otp.check(enrolment, "12" + "94287082", 59, None) == otp.Check(otp.OK, 1)
    assert otp.check(enrolment, "12" + "94287082", 59, 1).reason == otp.REPLAYED
    assert otp.check(enrolment, "13" + "94287082", 59, None).reason == otp.WRONG
    assert otp.check(enrolment, "94287082", 59, None).reason == otp.WRONG
    assert otp.check(enrolment, "12" + "9428708x", 59, None).reason == otp.WRONG
    assert otp.check(None, "1294287082", 59, None).reason == otp.NOT_ENROLLED
    assert otp.check(enrolment, "12" + "94287082", 59 + 30, None).ok  # one step late
    assert not otp.check(enrolment, "12" + "94287082", 59 + 60, None).ok  # two


def test_an_enrolment_is_looked_up_by_account_name_never_by_path(tmp_path):
    (tmp_path / "oath").mkdir()
    (tmp_path / "evil.oath").write_text(f"HOTP/T30/8\t../evil\t-\t{'11' * 20}\n")
    passcodes = otp.Passcodes(tmp_path / "oath")
    assert passcodes.enrolment("../evil") is None
    assert passcodes.verify("../evil", otp.hotp(bytes.fromhex("11" * 20), 0, 8), 1).reason \
        == otp.NOT_ENROLLED


def test_the_page_escapes_its_message_too():
    page = device.page("A", "b", message="<b>bold</b>")
    assert "<b>" not in page and "&lt;b&gt;bold" in page


def test_the_roles_configuration_reads_the_gateways_own_enrolments():
    text = ansible_render.template("metis_gateway", "gateway.yml.j2", {})
    loaded = config.from_dict(yaml.safe_load(text), Path("/"))
    assert loaded.oath_users == Path("/etc/metis/oath")
    assert loaded.tokens.parent / PASSCODE_STATE == Path("/var/lib/metis/state/passcodes.json")
