"""Metis as the current docs use it (using_an_inference_endpoint.md, inference-endpoints.md;
alcf-testbed-2026.md §5), on an alcf-2026-mini cluster of Graphcore's POD and the gateway:
a testbed user on gc-login-03 takes the token helper, authenticates, and makes the docs'
`curl` calls over HTTPS with the cluster's CA; root is refused a token; a streamed answer
ends with `[DONE]`. See docs/metis.md.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from .conftest import Cluster

pytestmark = pytest.mark.presubmit

PROFILE = "alcf-2026-mini"
LOGIN = "gc-login-03"
API = "https://inference-api.alcf.anl.gov/resource_server"
HELPER = "python3 inference_auth_token.py"


@pytest.fixture(scope="module")
def testbed():
    existing = os.environ.get("AITESTBED_TEST_CLUSTER_METIS")
    name = existing or f"cimetis-{uuid.uuid4().hex[:6]}"
    os.environ["AITESTBED_USER"] = "learner"
    c = Cluster(name, "learner", logins=(LOGIN,))
    if not existing:
        c.cli("up", "--profile", PROFILE, "--systems", "graphcore,metis", timeout=1800)
    try:
        result = c.log_in(LOGIN)
        assert result.returncode == 0, result.stderr
        yield c
    finally:
        c.log_out(LOGIN)
        if not existing:
            c.cli("destroy", check=False)


def run(c: Cluster, command: str, timeout: float = 120) -> str:
    rc, out = c.run(LOGIN, command, timeout=timeout)
    assert rc == 0, out
    return out


def test_the_docs_token_commands_then_their_curl_calls(testbed):
    run(testbed, "cp /software/metis/inference_auth_token.py ~/ && cd ~ && "
                 f"{HELPER} authenticate")
    left = int(run(testbed, f"cd ~ && {HELPER} get_time_until_token_expiration --units seconds")
               .strip().splitlines()[-1].split(".")[0])
    assert 172000 <= left <= 172800  # 48 h
    answer = json.loads(run(testbed, (
        f"cd ~ && access_token=$({HELPER} get_access_token) && "
        f"curl -sS -X POST '{API}/metis/api/v1/chat/completions' "
        '-H "Authorization: Bearer ${access_token}" -H "Content-Type: application/json" '
        """-d '{"model": "gpt-oss-120b", "messages":[{"role": "user", "content": """
        """"Explain quantum computing in simple terms."}]}'""")))
    assert answer["object"] == "chat.completion" and answer["model"] == "gpt-oss-120b"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["usage"]["completion_tokens"] > 0
    metis = json.loads(run(testbed, (
        f"cd ~ && access_token=$({HELPER} get_access_token) && "
        f"curl -sS -X GET '{API}/list-endpoints' -H \"Authorization: Bearer ${{access_token}}\""
        " | jq -C '.clusters.metis' | sed 's/\\x1b\\[[0-9;]*m//g'")))
    models = json.dumps(metis)
    for name in ("gpt-oss-120b", "Mistral-Large-3-675B-Instruct-2512", "gemma-4-31B-it"):
        assert name in models


def test_a_streamed_answer_ends_with_done(testbed):
    out = run(testbed, (
        f"cd ~ && access_token=$({HELPER} get_access_token) && "
        f"curl -sS -N -X POST '{API}/metis/api/v1/chat/completions' "
        '-H "Authorization: Bearer ${access_token}" -H "Content-Type: application/json" '
        """-d '{"model": "gemma-4-31B-it", "stream": true, "max_tokens": 8, """
        """"messages":[{"role": "user", "content": "hello"}]}'"""))
    events = [ln for ln in out.splitlines() if ln.startswith("data:")]
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[0][5:])["object"] == "chat.completion.chunk"


def test_no_token_is_a_401_and_root_gets_none(testbed):
    out = run(testbed, f"curl -sS -o /dev/null -w '%{{http_code}}' '{API}/metis/api/v1/models'")
    assert out.strip() == "401"
    refused = testbed.host(LOGIN).run(
        "cd /tmp && cp /software/metis/inference_auth_token.py /tmp/helper.py && "
        "python3 /tmp/helper.py authenticate")
    assert refused.rc != 0
    assert "403" in refused.stderr + refused.stdout or "not a testbed account" in \
        refused.stderr + refused.stdout


def test_from_the_host_the_docs_python_example_with_the_real_openai_package(testbed):
    """The gateway on 127.0.0.1 (the gate's forward): `aitestbed metis env` points the
    `openai` package (httpx) at it and at the cluster's CA; the token is the one the
    docs' helper printed on the login node. Plain TLS without the CA is refused."""
    import subprocess
    import sys

    env = dict(os.environ)
    for line in testbed.cli("metis", "env").stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value.strip("'")
    assert env["OPENAI_BASE_URL"].startswith("https://127.0.0.1:")
    token = run(testbed, f"cd ~ && cp /software/metis/inference_auth_token.py ~/ && "
                         f"{HELPER} authenticate --force >/dev/null && "
                         f"{HELPER} get_access_token").strip().splitlines()[-1]
    script = (
        "import os\n"
        "from openai import OpenAI\n"
        "client = OpenAI(api_key=os.environ['TOKEN'], base_url=os.environ['OPENAI_BASE_URL'])\n"
        "answer = client.chat.completions.create(model='gpt-oss-120b', max_tokens=12,\n"
        "    messages=[{'role': 'user',\n"
        "               'content': 'Explain quantum computing in simple terms.'}])\n"
        "print(answer.model, answer.usage.completion_tokens)\n"
        "print(sorted(m.id for m in client.models.list()))\n")
    result = subprocess.run([sys.executable, "-c", script], env={**env, "TOKEN": token},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    first, models = result.stdout.splitlines()[:2]
    assert first.split()[0] == "gpt-oss-120b" and int(first.split()[1]) > 0
    assert "gemma-4-31B-it" in models
    untrusted = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", env["OPENAI_BASE_URL"] + "/models"],
        capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
    assert untrusted.returncode == 60, untrusted  # curl: the peer's certificate unverified
    trusted = subprocess.run(
        ["curl", "-sS", "--cacert", env["SSL_CERT_FILE"], "-o", "/dev/null", "-w",
         "%{http_code}", env["OPENAI_BASE_URL"] + "/models"],
        capture_output=True, text=True, timeout=30)
    assert trusted.stdout == "401", trusted


def test_on_a_login_node_pip_installs_the_docs_packages_and_their_example_runs(testbed):
    """The docs: `pip install openai globus_sdk`, then OpenAI(api_key=access_token,
    base_url=...). From the login node's wheels (PyPI is out of reach), in a venv."""
    out = run(testbed, (
        "cd ~ && cp /software/metis/inference_auth_token.py ~/ && "
        "python3 -m venv ~/metis-venv && . ~/metis-venv/bin/activate && "
        "pip install -q openai globus_sdk && "
        "export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt && "
        "python - <<'PY'\n"
        "from openai import OpenAI\n"
        "from inference_auth_token import get_access_token\n"
        "import globus_sdk  # noqa: F401 - the docs install it too\n"
        "client = OpenAI(api_key=get_access_token(),\n"
        "    base_url='https://inference-api.alcf.anl.gov/resource_server/metis/api/v1')\n"
        "r = client.chat.completions.create(model='gemma-4-31B-it', max_tokens=8,\n"
        "    messages=[{'role': 'user', 'content': 'Hello'}])\n"
        "print('answered', r.model, r.usage.completion_tokens)\n"
        "PY"), timeout=300)
    assert "answered gemma-4-31B-it" in out, out
# --- the device-code login and the admin's ageing (docs/metis.md, Tokens) ---------------------
GATEWAY = "metis-gw-01"
ADMIN = "/opt/aitestbed/venv/bin/python -m aitestbed.metis.admin"


def admin(c: Cluster, *args: str) -> dict:
    """The admin command on the gateway node, as root (what the host runs with docker exec)."""
    result = c.host(GATEWAY).run(f"{ADMIN} {' '.join(args)}")
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout)


def test_the_gateway_has_the_users_enrolments_for_its_own_user(testbed):
    gateway = testbed.host(GATEWAY)
    owner = gateway.run("stat -c '%U %a' /etc/metis/oath /etc/metis/oath/learner.oath")
    assert owner.stdout.split("\n")[:2] == ["metis 700", "metis 600"], owner.stdout
    assert gateway.run("test -e /etc/metis/oath/root.oath").rc != 0
    config = gateway.run("cat /etc/metis/gateway.yml").stdout
    assert "oath_users: /etc/metis/oath" in config


def test_a_device_code_login_with_the_users_passcode(testbed):
    from aitestbed.host import passcode  # noqa: PLC0415

    run(testbed, "cd ~ && rm -f device.out && (setsid nohup python3 inference_auth_token.py "
                 "authenticate --device --force </dev/null >device.out 2>&1 &) && sleep 3")
    shown = run(testbed, "cat ~/device.out")
    assert "Please go to https://inference-api.alcf.anl.gov/auth/device/verify and enter " \
           "the code " in shown, shown
    user_code = shown.split("enter the code ")[1].split()[0]
    # one passcode for this test (the gateway takes each code once: a new step's)
    time.sleep(passcode.seconds_left() + 1)
    typed = passcode.typed(passcode.token_of(testbed.state, "learner"))
    body = json.dumps({"user_code": user_code, "username": "learner", "passcode": typed})
    approved = json.loads(run(testbed, (
        "curl -sS -X POST https://inference-api.alcf.anl.gov/auth/device/verify "
        f"-H 'Content-Type: application/json' -d '{body}'")))
    assert approved == {"status": "approved", "user": "learner", "user_code": user_code}
    again = json.loads(run(testbed, (
        "curl -sS -X POST https://inference-api.alcf.anl.gov/auth/device/verify "
        f"-H 'Content-Type: application/json' -d '{body}'")))
    assert again["error"]["code"] == "invalid_user_code"  # used
    for _ in range(30):  # the helper polls every 5 s
        out = run(testbed, "cat ~/device.out")
        if "Authenticated as learner" in out:
            break
        time.sleep(1)
    assert "Authenticated as learner" in out, out
    assert run(testbed, f"cd ~ && {HELPER} get_access_token").strip().startswith("Agm")


def test_admin_ageing_rehearses_expiry_and_re_authentication(testbed):
    run(testbed, f"cd ~ && {HELPER} authenticate --force")
    old = run(testbed, f"cd ~ && {HELPER} get_access_token").strip()
    listed = admin(testbed, "list", "--user", "learner")
    assert old not in json.dumps(listed)
    assert {t["kind"] for t in listed["tokens"] if t["live"]} == {"access", "refresh"}
    aged = admin(testbed, "age", "--user", "learner", "--seconds", str(48 * 3600))
    assert aged["aged"] >= 1
    expired = json.loads(run(testbed, (
        f"curl -sS '{API}/metis/api/v1/models' -H 'Authorization: Bearer {old}'")))
    assert expired["error"]["message"].startswith("Access token expired")
    fresh = run(testbed, f"cd ~ && {HELPER} get_access_token").strip()
    assert fresh != old
    models = json.loads(run(testbed, (
        f"curl -sS '{API}/metis/api/v1/models' -H 'Authorization: Bearer {fresh}'")))
    assert models["object"] == "list"
    admin(testbed, "age", "--user", "learner", "--seconds", str(7 * 24 * 3600), "--session")
    rc, out = testbed.run(LOGIN, f"cd ~ && {HELPER} get_access_token")
    assert rc == 1 and "re-authentication is required every 7 days" in out, out
    run(testbed, f"cd ~ && {HELPER} authenticate --force")  # MUNGE: nothing to type here
    assert admin(testbed, "revoke", "--user", "learner")["revoked"] >= 2
    rc, out = testbed.run(LOGIN, f"cd ~ && {HELPER} get_access_token")
    assert rc == 1 and "refresh token is not valid" in out, out
    bad = testbed.host(GATEWAY).run(f"{ADMIN} age --user learner --seconds -1")
    assert bad.rc == 2 and "positive number" in bad.stderr
    owner = testbed.host(GATEWAY).run("stat -c %U /var/lib/metis/state/tokens.json")
    assert owner.stdout.strip() == "metis"  # the admin worked as the gateway's user


def test_from_the_host_a_token_by_device_code_then_aged_and_revoked(testbed):
    """`aitestbed metis token` (a device code completed with the user's passcode from the
    host), `metis env --token`, then `metis age`: the token is expired (401), and the
    helper's get_access_token on the login node still refreshes its own; `metis revoke`
    ends every token of the user."""
    import ssl
    import urllib.error
    import urllib.request

    env = {}
    for line in testbed.cli("metis", "env", "--token").stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value.strip("'")
    context = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])

    def models(token: str) -> int:
        request = urllib.request.Request(env["OPENAI_BASE_URL"] + "/models",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                return answer.status
        except urllib.error.HTTPError as err:
            return err.code

    assert models(env["OPENAI_API_KEY"]) == 200
    session = json.loads(testbed.cli("metis", "token", "--json").stdout)
    assert 172000 <= session["expires_in"] <= 172800 and session["refresh_token"]
    run(testbed, f"cd ~ && cp /software/metis/inference_auth_token.py ~/ && {HELPER} "
                 "authenticate --force")
    listed = json.loads(testbed.cli("metis", "tokens").stdout)
    assert listed and env["OPENAI_API_KEY"] not in json.dumps(listed)  # never a token
    testbed.cli("metis", "age")  # 48 h: every access token of the user expired
    assert models(env["OPENAI_API_KEY"]) == 401
    fresh = run(testbed, f"cd ~ && {HELPER} get_access_token").strip().splitlines()[-1]
    assert models(fresh) == 200  # refreshed by the helper, as the docs say
    testbed.cli("metis", "revoke")
    try:
        assert models(fresh) == 401
    finally:  # the other tests' helper session, as they found it
        run(testbed, f"cd ~ && {HELPER} authenticate --force")
    refused = testbed.cli("metis", "age", "--user", "nobody-here", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr


def test_a_projects_tests_use_the_plugins_metis_fixture(testbed, tmp_path):
    """CI: a project's own test, run by pytest with the aitestbed plugin against this
    cluster, gets the gateway and a token from the `metis` fixture and calls it with the
    real openai package."""
    import subprocess
    import sys

    (tmp_path / "test_agent.py").write_text(
        "from openai import OpenAI\n\n\n"
        "def test_agent(metis, monkeypatch):\n"
        "    for key, value in metis.environment.items():\n"
        "        monkeypatch.setenv(key, value)  # OPENAI_*, SSL_CERT_FILE\n"
        "    client = OpenAI()\n"
        "    answer = client.chat.completions.create(model='gpt-oss-120b', max_tokens=4,\n"
        "        messages=[{'role': 'user', 'content': 'hi'}])\n"
        "    assert answer.usage.completion_tokens > 0\n"
        "    assert metis.environment['OPENAI_API_KEY'] == metis.token\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--aitestbed-cluster={testbed.name}", str(tmp_path / "test_agent.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
