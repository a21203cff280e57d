"""Metis in the cluster, without containers: its inventory, its per-cluster PKI and MUNGE
key, the role's configuration, the gateway over TLS, and the token helper's sessions
(MUNGE through an injected verifier) against an in-process gateway."""

from __future__ import annotations

import ast
import datetime
import json
import os
import socket
import ssl
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from aitestbed.host import sshdconf, systems
from aitestbed.host.inventory import load
from aitestbed.host.systems import metis as metis_entry
from aitestbed.host.systems.cerebras_pki import ClusterCA
from aitestbed.metis import auth, config, identity, node_setup, server, state, train
from aitestbed.metis.client import MetisClient, MetisError
from aitestbed.metis.gateway import Gateway
from aitestbed.metis.tokens import ACCESS_TOKEN_SECONDS, SESSION_SECONDS, JsonTokenStore
from aitestbed.node.munge import MungeError
from cryptography import x509

from . import ansible_render
from .metis_support import CORPUS, gateway_config, trained

ROOT = Path(__file__).resolve().parents[2]
HELLO = [{"role": "user", "content": "What is the gateway?"}]
CREDENTIAL = "MUNGE:AwQFAAB8XkU1zRqUcVeO+Yq0/tU5AAAA=:"


# --- inventory and registry -------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["alcf-2026", "alcf-2026-mini"])
def test_the_2026_profiles_have_one_gateway_at_the_docs_names(profile):
    topology = load(profile)
    gateways = [n for n in topology.nodes if n.system == "metis"]
    assert [(n.name, n.node_class) for n in gateways] == [("metis-gw-01", "metis_gateway")]
    gateway = gateways[0]
    assert {"inference-api.alcf.anl.gov", "metis.alcf.anl.gov"} <= set(gateway.dns_names)
    assert gateway.ssh_allow_groups == () and not gateway.ssh_publish
    assert gateway.services == ("metis-munge", "metis-gateway")
    assert "metis" in topology.class_systems["login"]
    assert topology.class_systems["metis_gateway"] == ("metis",)


def test_metis_alone_is_the_gateway_alone_and_other_profiles_have_none():
    topology = load("alcf-2026-mini", ["metis"])
    assert [n.name for n in topology.nodes] == ["metis-gw-01"]
    carried = {s for classes in topology.class_systems.values() for s in classes}
    assert [a.name for a in systems.artifacts(carried)][-1].startswith("the Metis training")
    for profile in ("alcf", "mini"):
        assert "metis" not in load(profile).systems
    assert "metis" not in load("alcf-2026-mini", ["groq"]).class_systems["login"]


def test_the_corpus_artifact_is_the_docs_pages(tmp_path, monkeypatch):
    monkeypatch.setenv("AITESTBED_BUILD_DIR", str(tmp_path / "build"))
    out = metis_entry.build_metis(ROOT)
    assert sorted(p.name for p in (out / "corpus").iterdir()) == sorted(
        p.name for p in (ROOT / "docs").glob("*.md"))
    empty = tmp_path / "empty"
    (empty / "docs").mkdir(parents=True)
    with pytest.raises(Exception, match="no docs/\\*.md"):
        metis_entry.build_metis(empty)


# --- per-cluster files ------------------------------------------------------------------------
def fake_state(root: Path):
    return SimpleNamespace(root=root, common_dir=root / "common",
                           node_dir=lambda name: root / "nodes" / name)


def test_prepare_makes_the_ca_the_gateway_certificate_and_the_munge_key_once(tmp_path):
    state_ = fake_state(tmp_path)
    metis_entry.prepare(state_, load("alcf-2026-mini"))
    ca = x509.load_pem_x509_certificate((tmp_path / "common/metis/ca.crt").read_bytes())
    cert_path = tmp_path / "nodes/metis-gw-01/metis/gateway.crt"
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = names.get_values_for_type(x509.DNSName)
    assert dns[:2] == ["inference-api.alcf.anl.gov", "metis.alcf.anl.gov"]
    assert {"metis-gw-01", "metis-gw-01.ai.alcf.anl.gov", "localhost"} <= set(dns)
    assert (tmp_path / "metis/ca.key").is_file()  # the CA's key: never under common/
    # under common/ (every node's): the CA's certificate and the MUNGE key, no TLS key
    assert sorted(p.name for p in (tmp_path / "common").rglob("*.key")) == ["munge.key"]
    key = tmp_path / "common/metis/munge.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 1024
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    metis_entry.prepare(state_, load("alcf-2026-mini"))
    assert before == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}


def test_prepare_makes_nothing_without_a_gateway(tmp_path):
    metis_entry.prepare(fake_state(tmp_path), load("alcf-2026-mini", ["groq"]))
    assert not list(tmp_path.rglob("*"))


def test_publish_gives_the_gateway_exactly_the_active_users_enrolments(tmp_path):
    tokens = {"alice": {"type": "mobilepass", "secret": "11" * 20},
              "bob": {"type": "cryptocard", "secret": "22" * 20, "pin": "1234"},
              "carol": {"type": "mobilepass", "secret": "33" * 20}}
    state_ = fake_state(tmp_path)
    state_.registry = lambda: SimpleNamespace(token=lambda name: tokens[name])
    state_.write = lambda path, text: (path.parent.mkdir(parents=True, exist_ok=True),
                                       path.write_text(text))
    users = [{"name": n, "active": a} for n, a in (("alice", True), ("bob", True),
                                                   ("carol", False))]
    assert metis_entry.SYSTEM.publish is metis_entry.publish
    metis_entry.publish(state_, load("alcf-2026-mini"), {"users": users})
    directory = tmp_path / "nodes/metis-gw-01/metis/oath"
    assert sorted(p.name for p in directory.iterdir()) == ["alice.oath", "bob.oath"]
    assert (directory / "bob.oath").read_text() == sshdconf.oath_files(
        {"bob": tokens["bob"]})["bob.oath"]  # the login nodes' own line
    assert stat.S_IMODE((directory / "bob.oath").stat().st_mode) == 0o600
    assert [p.parent.parent.name for p in tmp_path.rglob("oath")] == ["metis-gw-01"]
    users[1]["active"] = False  # bob offboarded: his enrolment goes
    metis_entry.publish(state_, load("alcf-2026-mini"), {"users": users})
    assert [p.name for p in directory.iterdir()] == ["alice.oath"]
    other = tmp_path / "groq-only"
    metis_entry.publish(fake_state(other), load("alcf-2026-mini", ["groq"]), {"users": users})
    assert not other.exists()


def test_node_setup_installs_the_enrolments_for_the_gateways_user(tmp_path):
    source, dest = tmp_path / "source", tmp_path / "dest"
    source.mkdir()
    for name in ("alice", "bob"):
        (source / f"{name}.oath").write_text(f"HOTP/T30/8\t{name}\t-\t{'11' * 20}\n")
    node_setup.install_enrolments(source, dest)  # no directory: an image from before
    assert not dest.exists()
    dest.mkdir(mode=0o700)
    (dest / "carol.oath").write_text("HOTP/T30/8\tcarol\t-\t00\n")  # offboarded since
    node_setup.install_enrolments(source, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["alice.oath", "bob.oath"]
    for path in dest.iterdir():
        assert path.read_text() == (source / path.name).read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert (path.stat().st_uid, path.stat().st_gid) == (dest.stat().st_uid,
                                                            dest.stat().st_gid)


def test_the_roles_configuration_is_one_the_gateway_loads():
    text = ansible_render.template("metis_gateway", "gateway.yml.j2", {})
    loaded = config.from_dict(yaml.safe_load(text), Path("/"))
    assert [m.name for m in loaded.models] == [n for n, _, _ in config.DOCS_MODELS]
    assert [m.template for m in loaded.models] == [t for _, t, _ in config.DOCS_MODELS]
    assert all(m.hot for m in loaded.models) and loaded.port == 443
    assert loaded.accounts == Path("/etc/aitestbed/cluster/accounts.json")
    assert loaded.munge_socket == identity.SOCKET == auth.MUNGE_SOCKET


def test_training_is_skipped_when_corpus_size_and_steps_are_the_same(tmp_path_factory):
    weights = trained(tmp_path_factory)
    assert train.up_to_date(weights, [CORPUS * 3], "tiny", 30)
    assert not train.up_to_date(weights, [CORPUS * 3], "tiny", 31)
    assert not train.up_to_date(weights, [CORPUS], "tiny", 30)
    assert not train.up_to_date(tmp_path_factory.mktemp("none"), [CORPUS], "tiny", 30)


# --- the gateway over TLS ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return trained(tmp_path_factory)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and the gateway's certificate for the docs' names and 127.0.0.1, as files."""
    directory = tmp_path_factory.mktemp("pki")
    ca = ClusterCA.in_memory("test-metis-ca", datetime.timedelta(days=1))
    cert, key = ca.issue("inference-api.alcf.anl.gov", dns=metis_entry.SERVICE_NAMES,
                         ips=("127.0.0.1",))
    for name, data in (("ca.crt", ca.cert_pem), ("gateway.crt", cert), ("gateway.key", key)):
        (directory / name).write_bytes(data)
    return directory


def accounts_file(path: Path, users: list[tuple[str, int, bool]]) -> Path:
    path.write_text(json.dumps({"groups": [], "projects": [], "users": [
        {"name": n, "uid": u, "gid": u, "active": a, "groups": []} for n, u, a in users]}))
    return path


class Running:
    """A TLS gateway in a thread with alice (uid 20001) and bob (20002, offboarded)."""

    def __init__(self, weights: Path, pki: Path, tmp: Path, identify=None):
        self.accounts_path = accounts_file(tmp / "accounts.json",
                                           [("alice", 20001, True), ("bob", 20002, False)])
        self.clock_now = 1_800_000_000.0
        cfg = gateway_config(weights, tmp / "state" / "tokens.json",
                             accounts=str(self.accounts_path))
        self.gateway = Gateway(cfg, scale=0.0, clock=lambda: self.clock_now)
        self.credentials: list[str] = []

        def verify(credential: str) -> int:  # what unmunge would say
            self.credentials.append(credential)
            if credential == CREDENTIAL:
                return 20001
            raise MungeError("Invalid credential")
        tls = server.tls_context(str(pki / "gateway.crt"), str(pki / "gateway.key"))
        self.server = server.serve(self.gateway, "127.0.0.1", 0, tls, identify or verify)
        self.port = self.server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, token=None) -> MetisClient:
        return MetisClient(self.url, token, timeout=20, context=self.context)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tls_gateway(weights, pki, tmp_path):
    running = Running(weights, pki, tmp_path)
    yield running
    running.close()


def test_the_gateway_serves_tls_with_the_clusters_certificate(tls_gateway):
    assert tls_gateway.server.url.startswith("https://")
    assert set(tls_gateway.client().status()) == {n for n, _, _ in config.DOCS_MODELS}
    with pytest.raises(MetisError, match="CERTIFICATE_VERIFY_FAILED"):
        MetisClient(tls_gateway.url, timeout=5,
                    context=ssl.create_default_context()).status()  # not the cluster's CA


def test_a_plain_or_silent_client_does_not_stop_the_tls_gateway(tls_gateway):
    import http.client

    plain = http.client.HTTPConnection("127.0.0.1", tls_gateway.port, timeout=5)
    with pytest.raises((OSError, http.client.HTTPException)):
        plain.request("GET", "/status")
        plain.getresponse().read()
    plain.close()
    silent = socket.create_connection(("127.0.0.1", tls_gateway.port))  # never says hello
    try:
        assert tls_gateway.client().status()  # served while the silent one waits
    finally:
        silent.close()


def test_the_server_refuses_a_missing_or_mismatched_key_in_one_line(pki, tmp_path, capsys):
    cfg = tmp_path / "gateway.yml"
    cfg.write_text("weights: /nonexistent\n")
    assert server.main(["--config", str(cfg), "--certfile", str(pki / "gateway.crt"),
                        "--keyfile", str(tmp_path / "missing.key")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metis gateway: cannot use the certificate") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        server.main(["--config", str(cfg), "--certfile", str(pki / "gateway.crt")])


# --- sessions: the token helper against the gateway ---------------------------------------------
@pytest.fixture
def helper_env(tls_gateway, pki, tmp_path, monkeypatch):
    """The helper's settings, and a `munge` on PATH that prints alice's credential (and
    the Metis MUNGE domain's socket: a login node)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "munge"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {bin_dir}/munge.args\n"
                    f"echo '{CREDENTIAL}'\n")
    fake.chmod(0o755)
    (tmp_path / "munge.socket.2").touch()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env = {"AITESTBED_METIS_URL": tls_gateway.url, "AITESTBED_METIS_CA": str(pki / "ca.crt"),
           "AITESTBED_METIS_TOKENS": str(tmp_path / "home" / "tokens.json"),
           "AITESTBED_METIS_MUNGE_SOCKET": str(tmp_path / "munge.socket.2")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return SimpleNamespace(env=env, bin=bin_dir, tokens=Path(env["AITESTBED_METIS_TOKENS"]),
                           socket=env["AITESTBED_METIS_MUNGE_SOCKET"])


def test_authenticate_then_the_docs_calls_work_with_the_token(tls_gateway, helper_env, capsys):
    assert auth.main(["authenticate"]) == 0
    assert "Authenticated as alice" in capsys.readouterr().out
    assert (helper_env.bin / "munge.args").read_text().split() == [
        "-n", f"--socket={helper_env.socket}"]
    assert tls_gateway.credentials == [CREDENTIAL]
    assert stat.S_IMODE(helper_env.tokens.stat().st_mode) == 0o600
    saved = json.loads(helper_env.tokens.read_text())
    assert saved["user"] == "alice" and saved["refresh_token"] != saved["access_token"]
    assert auth.main(["get_access_token"]) == 0
    token = capsys.readouterr().out.strip()
    assert token == saved["access_token"]
    answer = tls_gateway.client(token).chat("gpt-oss-120b", HELLO, max_tokens=4)
    assert answer["object"] == "chat.completion"
    real_now = auth.time.time()
    left = auth.get_time_until_token_expiration("seconds", now=real_now)
    assert left == pytest.approx(tls_gateway.clock_now + ACCESS_TOKEN_SECONDS - real_now, abs=2)
    assert auth.main(["get_time_until_token_expiration", "--units", "seconds"]) == 0
    assert int(capsys.readouterr().out) == pytest.approx(left, abs=2)
    assert auth.main(["authenticate"]) == 0  # a session is open: nothing asked
    assert "Already authenticated as alice" in capsys.readouterr().out
    assert tls_gateway.credentials == [CREDENTIAL]
    assert auth.main(["authenticate", "--force"]) == 0
    assert len(tls_gateway.credentials) == 2


def test_an_expired_access_token_is_refreshed_until_the_session_ends(tls_gateway, helper_env,
                                                                     capsys):
    start = tls_gateway.clock_now
    auth.authenticate(now=start)
    first = auth.get_access_token(now=start)
    tls_gateway.clock_now = start + ACCESS_TOKEN_SECONDS + 1  # 48 h later: expired
    with pytest.raises(MetisError, match="Access token expired") as err:
        tls_gateway.client(first).models()
    assert err.value.status == 401
    second = auth.get_access_token(now=tls_gateway.clock_now)
    assert second != first and tls_gateway.client(second).models()["object"] == "list"
    tls_gateway.clock_now = start + SESSION_SECONDS + 1  # 7 days later: re-authenticate
    with pytest.raises(auth.AuthError, match="re-authentication is required every 7 days"):
        auth.get_access_token(now=tls_gateway.clock_now)
    assert auth.authenticate(force=True, now=tls_gateway.clock_now).startswith("Authenticated")


def test_a_refreshed_token_never_outlives_its_session(tls_gateway):
    store = tls_gateway.gateway.store
    start = tls_gateway.clock_now
    session = tls_gateway.gateway.start_session(20001)
    tls_gateway.clock_now = start + SESSION_SECONDS - 3600  # an hour before the end
    again = tls_gateway.gateway.refresh(session["refresh_token"])
    assert again["expires_at_seconds"] == int(start + SESSION_SECONDS)
    assert store.lookup(again["access_token"]).expires_at == start + SESSION_SECONDS


def test_an_offboarded_users_tokens_stop_working_at_once(tls_gateway):
    gateway = tls_gateway.gateway
    session = gateway.start_session(20001)
    assert tls_gateway.client(session["access_token"]).models()
    accounts_file(tls_gateway.accounts_path, [("alice", 20001, False)])
    os.utime(tls_gateway.accounts_path, ns=(1, 2))  # another stamp, whatever the clock
    with pytest.raises(MetisError, match="no active account") as err:
        tls_gateway.client(session["access_token"]).models()
    assert err.value.status == 403
    with pytest.raises(state.ApiError, match="no active account"):
        gateway.refresh(session["refresh_token"])
    with pytest.raises(state.ApiError, match="no active account"):
        gateway.start_session(20001)


@pytest.mark.parametrize("uid, why", [(0, "uid 0 is not a testbed account"),
                                      (9902, "uid 9902 is not a testbed account"),
                                      (20002, "bob may not use")])
def test_only_active_testbed_accounts_get_a_session(tls_gateway, uid, why):
    with pytest.raises(state.ApiError, match=why) as err:
        tls_gateway.gateway.start_session(uid)
    assert err.value.status == 403


def _post_token(running: Running, body: dict, headers: dict | None = None):
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", running.port, timeout=10,
                                       context=running.context)
    conn.request("POST", server.AUTH, json.dumps(body),
                 {"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


@pytest.mark.parametrize("headers, status, message", [
    ({}, 401, "A session starts with a MUNGE credential"),
    ({"Authorization": "Bearer x"}, 401, "A session starts with a MUNGE credential"),
    ({"Authorization": "MUNGE MUNGE:forged0000000000000=:"}, 401, "refused: Invalid credential"),
])
def test_no_session_without_a_credential_munged_vouches_for(tls_gateway, headers, status,
                                                           message):
    code, data = _post_token(tls_gateway, {"grant_type": "munge"}, headers)
    assert code == status and message in data["error"]["message"]
    assert not tls_gateway.gateway.store.path.exists()  # nothing issued


def test_a_refresh_token_is_no_bearer_token_and_a_wrong_one_gets_nothing(tls_gateway):
    session = tls_gateway.gateway.start_session(20001)
    with pytest.raises(MetisError, match="not active or invalid"):
        tls_gateway.client(session["refresh_token"]).models()
    code, data = _post_token(tls_gateway, {"grant_type": "refresh_token",
                                           "refresh_token": session["access_token"]})
    assert code == 401 and data["error"]["code"] == "invalid_grant"
    code, data = _post_token(tls_gateway, {"grant_type": "password"})
    assert code == 400 and data["error"]["code"] == "unsupported_grant_type"


def test_a_gateway_without_accounts_issues_nothing(weights, tmp_path):
    store = JsonTokenStore(tmp_path / "tokens.json")
    gateway = Gateway(gateway_config(weights, store.path), store, scale=0.0)
    with pytest.raises(state.ApiError, match="issues no tokens"):
        gateway.start_session(20001)


def test_the_helper_says_what_is_wrong_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AITESTBED_METIS_TOKENS", str(tmp_path / "none.json"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no munge here
    (tmp_path / "munge.socket.2").touch()  # a login node's Metis MUNGE socket
    monkeypatch.setenv("AITESTBED_METIS_MUNGE_SOCKET", str(tmp_path / "munge.socket.2"))
    assert auth.main(["get_access_token"]) == 1
    assert capsys.readouterr().err == ("inference_auth_token.py: no tokens: run `python "
                                       "inference_auth_token.py authenticate` first\n")
    assert auth.main(["authenticate"]) == 1
    assert "munge is not installed here" in capsys.readouterr().err
    monkeypatch.setenv("AITESTBED_METIS_URL", "https://127.0.0.1:9")
    (tmp_path / "munge").write_text(f"#!/bin/sh\necho '{CREDENTIAL}'\n")
    (tmp_path / "munge").chmod(0o755)
    for argv in (["authenticate"], ["authenticate", "--device"]):
        assert auth.main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("inference_auth_token.py: cannot reach https://127.0.0.1:9")
        assert err.count("\n") == 1
    monkeypatch.setenv("AITESTBED_METIS_MUNGE_SOCKET", str(tmp_path / "absent"))  # the host
    assert auth.main(["authenticate"]) == 1  # a device-code login, which cannot reach it
    assert capsys.readouterr().err.startswith("inference_auth_token.py: cannot reach")


def test_the_helper_is_one_standard_library_file():
    tree = ast.parse((ROOT / "emulator/aitestbed/metis/auth.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "argparse", "getpass", "json", "os", "ssl",
                        "subprocess", "sys", "time", "urllib", "pathlib"}


def test_the_metis_munge_domain_is_asked_through_its_socket(monkeypatch):
    from aitestbed.node import munge

    seen = []
    monkeypatch.setattr(munge, "_run", lambda argv, stdin="": seen.append(argv) or
                        "UID: alice (20001)\n")
    assert identity.munge_verifier()(CREDENTIAL) == 20001
    assert seen == [["unmunge", "--keys=UID", f"--socket={identity.SOCKET}"]]
