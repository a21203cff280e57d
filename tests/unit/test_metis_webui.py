"""The Metis web UI: its pages as rendered (states, escaping, 404) and as the gateway
serves them (headers, methods)."""

from __future__ import annotations

import base64
import hashlib
import html
import http.client
import json
import re

import pytest
from aitestbed.metis import server, state, webui

from .metis_support import start, trained

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
