"""The Metis web UI: its pages as rendered (states, escaping, 404), as the gateway serves
them (headers, methods), and in a real headless Chromium driven over the DevTools
protocol against an in-process TLS gateway: a token put in, a message sent, the answer
streamed into the page as it comes, and the API's refusals shown as text."""

from __future__ import annotations

import base64
import datetime
import hashlib
import html
import http.client
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aitestbed.host.systems.cerebras_pki import ClusterCA
from aitestbed.metis import server, state, webui
from aitestbed.metis.gateway import Gateway
from aitestbed.metis.tokens import JsonTokenStore

from .metis_support import gateway_config, start, trained

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NAMES = ["gpt-oss-120b", "Mistral-Large-3-675B-Instruct-2512", "gemma-4-31B-it"]
EVIL = '<img src=x onerror="document.title=\'pwned\'">&amp;"'


def jobs_of(phases: dict[str, str]) -> dict:
    """What GET /resource_server/metis/jobs answers for these states (the gateway's shape)."""
    out: dict = {"running": [], "queued": [], "stopped": [], "others": [],
                 "private_batch_running": [], "private_batch_queued": []}
    for name, phase in phases.items():
        out["running" if phase == state.LIVE else "queued"].append({
            "Models": name, "Framework": "api", "Cluster": "metis",
            "Model Status": "running" if phase == state.LIVE else phase.lower(),
            "Description": f"{name} - about {name}", "Model Version": ""})
    out["cluster_status"] = {"cluster": "metis", "total_models": len(phases)}
    return out


# --- the pages as rendered ------------------------------------------------------------------
def test_the_index_lists_every_model_with_its_state_and_a_link_to_its_chat():
    jobs = jobs_of({"gpt-oss-120b": "Live", "gemma-4-31B-it": "Queued",
                    "Mistral-Large-3-675B-Instruct-2512": "Starting", "cold": "Offline"})
    assert webui.states(jobs) == {"gpt-oss-120b": "Live", "gemma-4-31B-it": "Queued",
                                  "Mistral-Large-3-675B-Instruct-2512": "Starting",
                                  "cold": "Offline"}
    status, page = webui.render("/", "", jobs)
    assert status == 200
    rows = re.findall(r'<tr><td><a href="([^"]+)">([^<]+)</a></td><td class="state (\w+)">'
                      r"(\w+)</td><td>([^<]*)</td></tr>", page)
    assert sorted(rows) == sorted([
        ("/chat/gpt-oss-120b", "gpt-oss-120b", "live", "Live", "about gpt-oss-120b"),
        ("/chat/gemma-4-31B-it", "gemma-4-31B-it", "queued", "Queued", "about gemma-4-31B-it"),
        ("/chat/Mistral-Large-3-675B-Instruct-2512", "Mistral-Large-3-675B-Instruct-2512",
         "starting", "Starting", "about Mistral-Large-3-675B-Instruct-2512"),
        ("/chat/cold", "cold", "offline", "Offline", "about cold")])
    assert '<a href="/" aria-current="page">All (4)</a>' in page
    for phase in state.STATES:  # the docs' tabs: Live, Starting, Queued, Offline, All
        assert f'<a href="/?state={phase}">{phase} (1)</a>' in page
    _, live = webui.render("/", "state=live", jobs)
    assert '<a href="/?state=Live" aria-current="page">Live (1)</a>' in live
    assert "/chat/gpt-oss-120b" in live and "/chat/cold" not in live
    _, none = webui.render("/", "state=Offline", jobs_of({"a": "Live"}))
    assert "No model is in this state." in none and "/chat/a" not in none
    bare = jobs_of({"a": "Live"})
    bare["running"][0]["Description"] = "a"  # the gateway's, for a model without one
    _, page = webui.render("/", "", bare)
    assert "<th>Description</th>" not in page
    assert '<td><a href="/chat/a">a</a></td><td class="state live">Live</td></tr>' in page


def test_every_name_and_text_is_escaped_and_a_name_is_quoted_in_its_link():
    jobs = jobs_of({EVIL: "Live", "a/b c": "Live"})
    _, page = webui.render("/", "", jobs)
    assert "<img" not in page and 'onerror="' not in page
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;&amp;amp;" \
        "&quot;" in page
    assert '<a href="/chat/a%2Fb%20c">a/b c</a>' in page
    status, chat = webui.render(webui.chat_href(EVIL), "", jobs)
    assert status == 200 and "<img" not in chat and 'onerror="' not in chat
    assert f'data-model="{html.escape(EVIL)}"' in chat
    assert webui.render("/chat/a%2Fb%20c", "", jobs)[0] == 200
    status, missing = webui.render("/chat/" + EVIL.replace(" ", "%20"), "", jobs_of({}))
    assert status == 404 and "<img" not in missing
    # the script never puts text in as HTML
    assert "innerHTML" not in webui.SCRIPT and "insertAdjacentHTML" not in webui.SCRIPT
    assert "document.write" not in webui.SCRIPT and "eval(" not in webui.SCRIPT


def test_the_chat_page_shows_the_models_state_the_token_field_and_the_helpers_command():
    status, page = webui.render("/chat/gemma-4-31B-it", "",
                                jobs_of({"gpt-oss-120b": "Live", "gemma-4-31B-it": "Queued"}))
    assert status == 200
    assert '<span id="state" class="state queued">Queued</span>' in page
    assert "<title>gemma-4-31B-it: Metis chat</title>" in page
    assert 'data-model="gemma-4-31B-it"' in page
    assert f'data-api="{server.API}/chat/completions"' in page
    assert f'data-jobs="{server.ROOT}/metis/jobs"' in page
    assert '<input id="token" type="password"' in page and "sessionStorage" in page
    assert "<code>python inference_auth_token.py get_access_token</code>" in page
    assert "Globus" in page
    assert '<button id="send" type="submit">Send</button>' in page
    assert "stream: true" in webui.SCRIPT
    assert webui.API == server.API and webui.JOBS == f"{server.ROOT}/metis/jobs"


def test_an_unknown_model_or_no_model_is_a_404_page_listing_the_models():
    jobs = jobs_of({"gpt-oss-120b": "Live"})
    for path in ("/chat/gpt-5", "/chat"):
        status, page = webui.render(path, "", jobs)
        assert status == 404 and "<h1>Not found</h1>" in page
        assert '<a href="/chat/gpt-oss-120b">gpt-oss-120b</a>' in page
    assert "<code>gpt-5</code>" in webui.render("/chat/gpt-5", "", jobs)[1]
    assert [webui.is_page(p) for p in ("/", "/chat", "/chat/x", "/chatter", "/status")] == [
        True, True, True, False, False]


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_exactly_the_pages_own_script_and_style():
    _, page = webui.render("/chat/a", "", jobs_of({"a": "Live"}))
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1 and "<script src" not in page
    policy = dict(d.strip().split(" ", 1) for d in webui.CSP.split(";"))
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["script-src"] == _sha256(scripts[0])
    assert policy["style-src"] == _sha256(styles[0])
    assert policy["frame-ancestors"] == "'none'" and policy["form-action"] == "'none'"
    assert "unsafe-inline" not in webui.CSP and "http" not in page.split("<body>")[0]


# --- the pages as the gateway serves them ------------------------------------------------
@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return trained(tmp_path_factory)


def fetch(srv, method: str, path: str, token: str | None = None
          ) -> tuple[int, http.client.HTTPResponse, str]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request(method, path, b"" if method != "GET" else None, headers)
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response.status, response, body


def test_the_gateway_serves_the_pages_without_a_token_with_their_headers(weights, tmp_path):
    with start(weights, tmp_path) as (_, srv, client, _):
        for path, status in [("/", 200), ("/chat/gemma-4-31B-it", 200),
                             ("/chat/Mistral-Large-3-675B-Instruct-2512/", 200),
                             ("/chat/nope", 404), ("/chat", 404)]:
            got, response, body = fetch(srv, "GET", path)
            assert got == status, path
            assert response.getheader("Content-Type") == "text/html; charset=utf-8"
            assert response.getheader("Content-Security-Policy") == webui.CSP
            assert response.getheader("X-Content-Type-Options") == "nosniff"
            assert body.startswith("<!doctype html>")
        _, _, index = fetch(srv, "GET", "/?state=Live")
        assert all(f'href="/chat/{name}">{name}</a></td><td class="state live">Live' in index
                   for name in NAMES)
        for path in ("/", "/chat/gpt-oss-120b", f"{server.ROOT}/metis/jobs"):
            got, response, body = fetch(srv, "POST", path, client.token)
            assert (got, response.getheader("Allow")) == (405, "GET"), path
            assert json.loads(body)["error"]["code"] == "method_not_allowed"
        assert fetch(srv, "GET", f"{server.ROOT}/metis/jobs")[0] == 401  # the API: a token


# --- in a real browser ---------------------------------------------------------------------
class _Upstream(BaseHTTPRequestHandler):
    """An OpenAI-compatible server the gateway forwards the model "relay" to: it streams a
    fixed answer whose second half waits for `gate`; "break" ends without [DONE]."""

    protocol_version = "HTTP/1.1"
    FIRST, SECOND = "<b>first</b> & ", EVIL + " second"
    gate = threading.Event()
    seen: list = []

    def log_message(self, *args) -> None:
        pass

    def _event(self, data) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self._event({"choices": [{"index": 0, "delta": {"content": self.FIRST}}]})
        if body["messages"][-1]["content"] == "break":
            return
        self.gate.wait(15)
        self._event({"choices": [{"index": 0, "delta": {"content": self.SECOND}}]})
        self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.wfile.write(b"data: [DONE]\n\n")


@contextmanager
def tls_gateway(weights: Path, tmp: Path, upstream: str):
    """A TLS gateway (the cluster's way) in a thread: the tiny model, the relayed model and
    a cold one; yields (its URL, alice's token)."""
    ca = ClusterCA.in_memory("test-metis-webui", datetime.timedelta(days=1))
    cert, key = ca.issue("metis.alcf.anl.gov", dns=("localhost",), ips=("127.0.0.1",))
    (tmp / "gw.crt").write_bytes(cert)
    (tmp / "gw.key").write_bytes(key)
    store = JsonTokenStore(tmp / "tokens.json")
    store.add_user("alice")
    token = store.issue("alice")
    models = [{"name": "gpt-oss-120b", "template": "harmony", "context_length": 2048,
               "max_tokens_limit": 512},
              {"name": "relay", "upstream": {"url": upstream, "model": "x"}},
              {"name": "gemma-4-31B-it", "template": "gemma", "hot": False}]
    gateway = Gateway(gateway_config(weights, store.path, models=models,
                                     cold_wait_seconds=0.1), store, scale=1.0)
    srv = server.serve(gateway, "127.0.0.1", 0,
                       server.tls_context(str(tmp / "gw.crt"), str(tmp / "gw.key")))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.url, token
    finally:
        srv.shutdown()
        srv.server_close()


class Browser:
    """Headless Chromium and one page of it, driven over the DevTools protocol."""

    def __init__(self, profile: Path):
        import websocket  # websocket-client (requirements.txt)

        self.log = profile.parent / "chromium.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--ignore-certificate-errors",
                 "--no-first-run", "--remote-debugging-port=0",
                 f"--user-data-dir={profile}", "about:blank"],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            port = self._port(profile / "DevToolsActivePort")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                target = next(t for t in json.load(r) if t["type"] == "page")
            self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=10,
                                                  suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self.ids, self.events = 0, []
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.enable")

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"chromium exited: {self.log.read_text()[-2000:]}")
            if path.exists() and path.read_text().strip():
                return int(path.read_text().split()[0])
            time.sleep(0.05)
        pytest.fail(f"chromium did not open its DevTools port: {self.log.read_text()[-2000:]}")

    def call(self, method: str, **params) -> dict:
        self.ids += 1
        self.ws.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 10.0):
        """The value of `expression` once it is truthy (fails after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert value, f"not within {timeout} s: {expression}; page: {self.snapshot()}"
        return value

    def open(self, url: str) -> None:
        self.js("document.documentElement.dataset.left = 'yes'")  # the page before
        self.call("Page.navigate", url=url)
        self.wait("!document.documentElement?.dataset.left && document.readyState === "
                  "'complete' && !!document.getElementById('chat')")

    def snapshot(self) -> dict:
        return self.js("""({
            state: document.getElementById('state')?.textContent,
            note: document.getElementById('state-note')?.textContent,
            busy: !!document.getElementById('chat')?.dataset.busy,
            error: document.getElementById('error')?.hidden ? ''
                   : document.getElementById('error')?.textContent,
            box: document.getElementById('message')?.value,
            messages: [...document.querySelectorAll('#messages li')].map(li => [
                li.className, li.querySelector('.text').textContent]),
            elements: document.querySelectorAll('#messages *').length,
            title: document.title})""")

    def send(self, token: str, text: str) -> None:
        self.js(f"""(() => {{
            const token = document.getElementById('token');
            token.value = {json.dumps(token)};
            token.dispatchEvent(new Event('input'));
            document.getElementById('message').value = {json.dumps(text)};
            document.getElementById('send').click(); }})()""")

    def done(self, turns: int) -> dict:
        """The page once `turns` user messages were sent and no answer is streaming."""
        self.wait(f"!document.getElementById('chat').dataset.busy && "
                  f"document.querySelectorAll('#messages li.user').length === {turns}", 15)
        return self.snapshot()

    def problems(self) -> list:
        """What the page threw or Chromium logged as an error (a CSP refusal among them),
        but the network's (a 401 is logged)."""
        return [e["params"] for e in self.events
                if e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Log.entryAdded"
                    and e["params"]["entry"]["level"] == "error"
                    and e["params"]["entry"]["source"] != "network")]  # the refusals

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium): the web UI is "
                    "tested in a real browser")
    running = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    yield running
    running.close()


@pytest.fixture(scope="module")
def site(weights, tmp_path_factory):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    try:
        with tls_gateway(weights, tmp_path_factory.mktemp("webui"), url) as running:
            yield running
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_in_chromium_a_token_and_a_message_stream_the_tiny_models_answer(browser, site):
    url, token = site
    browser.open(f"{url}/chat/gpt-oss-120b")
    assert browser.snapshot()["state"] == "Live" and browser.snapshot()["title"] == \
        "gpt-oss-120b: Metis chat"
    browser.send(token, "What is the gateway?")
    page = browser.done(1)
    assert page["error"] == "", page
    (user, question), (assistant, answer) = page["messages"]
    assert (user, question) == ("msg user", "What is the gateway?")
    assert assistant == "msg assistant" and answer.strip(), page  # the tiny model's text
    assert browser.js("sessionStorage.getItem('metis-access-token')") == token
    browser.open(f"{url}/chat/gpt-oss-120b")  # the tab keeps the token, not the URL
    assert browser.js("document.getElementById('token').value") == token
    assert token not in browser.js("location.href")
    assert browser.problems() == []


def test_in_chromium_the_answer_appears_as_it_comes_as_text_and_the_conversation_goes_on(
        browser, site):
    url, token = site
    _Upstream.gate.clear()
    _Upstream.seen.clear()
    browser.open(f"{url}/chat/relay")
    browser.send(token, "Hello <b>there</b>")
    # the first half is on the page while the stream is still open
    browser.wait(f"document.querySelector('#messages li.assistant .text')?.textContent === "
                 f"{json.dumps(_Upstream.FIRST)}")
    assert browser.snapshot()["busy"]
    _Upstream.gate.set()
    page = browser.done(1)
    full = _Upstream.FIRST + _Upstream.SECOND
    assert page["messages"] == [["msg user", "Hello <b>there</b>"], ["msg assistant", full]]
    assert page["error"] == "" and page["title"] == "relay: Metis chat"
    assert page["elements"] == 2 * 3  # each message: li, its name, its text; no <b>, <img>
    browser.send(token, "And then?")
    page = browser.done(2)
    assert [m["role"] for m in _Upstream.seen[-1]["messages"]] == [
        "user", "assistant", "user"]
    assert _Upstream.seen[-1]["messages"][1]["content"] == full
    assert _Upstream.seen[-1]["stream"] is True
    browser.js("document.getElementById('new').click()")
    browser.send(token, "break")  # the upstream ends without [DONE]: the page says so
    page = browser.done(1)
    assert "the answer broke off" in page["error"] and "[DONE]" in page["error"], page
    assert page["messages"][-1][0] == "msg assistant failed"
    assert browser.problems() == []


def test_in_chromium_the_apis_refusals_are_shown_as_text(browser, site):
    url, token = site
    browser.open(f"{url}/chat/gpt-oss-120b")
    browser.send("nonsense", "Hello")
    page = browser.done(1)
    assert page["error"] == "401 unauthorized: Token is either not active or invalid", page
    assert page["messages"] == [["msg user failed", "Hello"]]
    assert page["box"] == "Hello"  # the message is back in the box, to send again
    browser.wait("document.getElementById('state-note').textContent.includes('401')")
    browser.send("", "Hello")
    page = browser.done(2)
    assert page["error"].startswith("401 unauthorized: Missing ('Authorization'"), page
    # a cold model: the request waits 0.1 s, then 503 with Retry-After; the state, polled
    # from the jobs route after the turn, is Queued
    browser.open(f"{url}/chat/gemma-4-31B-it")
    assert browser.snapshot()["state"] == "Offline"
    browser.send(token, "Hello")
    page = browser.done(1)
    assert page["error"].startswith("503 model_not_live: 'gemma-4-31B-it' is not currently "
                                    "live on Metis"), page
    assert "(retry after " in page["error"]
    browser.wait("['Queued', 'Starting'].includes(document.getElementById('state')"
                 ".textContent)")
    assert browser.problems() == []
