"""The Inference Service's web UI for Metis: its pages as HTML, from the gateway's data.

ALCF's docs name a web UI at https://inference.alcf.anl.gov/ (Open WebUI, an ANL or
ALCF login) that lists the models with their states (Live, Starting, Queued, Offline,
All) and chats with them. Ours is served by the gateway itself (aitestbed.metis.server):

  GET /                 the models and their states (`?state=Live` ... shows one state)
  GET /chat/<model>     a chat with one model: its state (polled), the access token,
                        the conversation, streamed as it is generated

The real UI logs in with Globus; ours takes the access token `python
inference_auth_token.py get_access_token` prints, and keeps it in the tab's
sessionStorage (never in a URL or a cookie). The pages need no token, as a login page
needs none; the API they call does, and what it refuses (401, 403, 429, 400, ...) is
shown in the page as text.

Pure functions: `render(path, query, jobs)` -> (status, HTML) from the data of GET
/resource_server/metis/jobs. Every name and text put into HTML is escaped here; the
page's script puts the conversation in with textContent only. The script and the style
are constants, so HEADERS' Content-Security-Policy allows exactly them, by hash: no other
script or style, no other origin, no frames, no form targets. No external resource: the
cluster is offline.
"""

from __future__ import annotations

import base64
import hashlib
import html
from urllib.parse import parse_qs, quote, unquote

from aitestbed.metis.state import LIVE, OFFLINE, QUEUED, STARTING, STATES

API = "/resource_server/metis/api/v1"  # the gateway's (aitestbed.metis.server.API)
CHAT_API = f"{API}/chat/completions"
JOBS = "/resource_server/metis/jobs"
STATUS = "/status"
CHAT = "/chat"
TOKEN_COMMAND = "python inference_auth_token.py get_access_token"

# the jobs route's "Model Status" -> the docs' states
_STATUS = {"running": LIVE, "starting": STARTING, "queued": QUEUED, "offline": OFFLINE,
           "stopped": OFFLINE}

STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#1b1b1b}
a{color:#0b5cad}code{background:#f1f1f1;padding:0 .2em}
table{border-collapse:collapse}th,td{padding:.3rem .9rem;text-align:left}
tr+tr td{border-top:1px solid #ddd}
.state{font-weight:600}.live{color:#17702b}.starting{color:#8a5a00}.queued{color:#8a5a00}
.offline{color:#666}
nav a{margin-right:.6rem}nav a[aria-current]{font-weight:700;text-decoration:none}
header{display:flex;gap:1rem;align-items:baseline;flex-wrap:wrap}header h1{margin:.2rem 0}
.note{color:#555;font-size:.9rem}
#login{display:flex;gap:.5rem;align-items:center;flex-wrap:wrap}#token{flex:1;min-width:16rem}
#messages{list-style:none;padding:0}
.msg{margin:.6rem 0;padding:.5rem .7rem;border-radius:.4rem;background:#f4f6f8}
.msg.user{background:#e6f0fb}.msg.failed{opacity:.55}
.who{display:block;font-size:.8rem;color:#555}.text{white-space:pre-wrap;overflow-wrap:anywhere}
#error{color:#a40000;white-space:pre-wrap}
#compose{display:flex;gap:.5rem;align-items:flex-end}#message{flex:1;font:inherit}
""".strip()

# The chat page's script: constant (its data come from the page's data-* attributes), so
# the Content-Security-Policy names it by hash.
SCRIPT = r"""
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const page = $("chat"), model = page.dataset.model, KEY = "metis-access-token";
  const tokenField = $("token"), box = $("message"), send = $("send"), list = $("messages");
  const error = $("error"), stateEl = $("state"), stateNote = $("state-note");
  const NAMES = {running: "Live", starting: "Starting", queued: "Queued", offline: "Offline",
                 stopped: "Offline"};
  let messages = [];  // the conversation, sent again with each turn
  let busy = false;

  tokenField.value = sessionStorage.getItem(KEY) || "";
  const keep = () => {
    const token = tokenField.value.trim();
    if (token) sessionStorage.setItem(KEY, token); else sessionStorage.removeItem(KEY);
    return token;
  };
  tokenField.addEventListener("input", keep);
  $("forget").addEventListener("click", () => { tokenField.value = ""; keep(); });
  const headers = (extra) => {
    const token = keep(), out = Object.assign({}, extra);
    if (token) out.Authorization = "Bearer " + token;
    return out;
  };

  // the API's refusal as one line: status, code, message, Retry-After
  async function refusal(response) {
    const text = await response.text();
    let message = text.trim().slice(0, 500) || response.statusText, code = "";
    try {
      const err = JSON.parse(text).error;
      if (err && err.message) { message = err.message; code = err.code || ""; }
    } catch (_) { /* not JSON: its text as it is */ }
    const retry = response.headers.get("Retry-After");
    return response.status + (code ? " " + code : "") + ": " + message +
      (retry ? " (retry after " + retry + " s)" : "");
  }
  const showError = (text) => { error.textContent = text; error.hidden = !text; };

  function showState(name, note) {
    if (name) {
      stateEl.textContent = name;
      stateEl.className = "state " + name.toLowerCase();
    }
    stateNote.textContent = note || "";
  }
  // the model's state: the jobs route with the token, else the public status page
  async function poll() {
    try {
      if (tokenField.value.trim()) {
        const response = await fetch(page.dataset.jobs, {headers: headers({}), cache: "no-store"});
        if (!response.ok) return showState("", "state not refreshed: " + await refusal(response));
        const jobs = await response.json();
        for (const entries of Object.values(jobs)) {
          if (!Array.isArray(entries)) continue;
          for (const job of entries) {
            if (job.Models === model) return showState(NAMES[job["Model Status"]] || "Offline");
          }
        }
        return showState("Offline", "not in the jobs list");
      }
      const response = await fetch(page.dataset.status,
                                   {headers: {Accept: "application/json"}, cache: "no-store"});
      if (!response.ok) return showState("", "state not refreshed: " + await refusal(response));
      const entry = (await response.json())[model];
      showState(entry ? entry.status : "Offline");
    } catch (err) {
      showState("", "state not refreshed: " + (err.message || err));
    }
  }
  const polling = () => poll().finally(() => setTimeout(polling, 5000));
  setTimeout(polling, 5000);

  function bubble(role, text) {
    const item = document.createElement("li"), who = document.createElement("span");
    const body = document.createElement("div");
    item.className = "msg " + role;
    who.className = "who";
    who.textContent = role === "user" ? "You" : model;
    body.className = "text";
    body.textContent = text;
    item.append(who, body);
    list.append(item);
    item.scrollIntoView({block: "end"});
    return body;
  }

  // one turn: the conversation so far and this message, the answer streamed (SSE)
  async function turn(text) {
    busy = true;
    send.disabled = true;
    page.dataset.busy = "true";
    showError("");
    messages.push({role: "user", content: text});
    const mine = bubble("user", text);
    let answer = null, got = "";
    try {
      const response = await fetch(page.dataset.api, {
        method: "POST", cache: "no-store", headers: headers({"Content-Type": "application/json"}),
        body: JSON.stringify({model: model, messages: messages, stream: true})});
      if (!response.ok) throw new Error(await refusal(response));
      answer = bubble("assistant", "");
      const reader = response.body.getReader(), decoder = new TextDecoder();
      let pending = "", done = false;
      while (!done) {
        const part = await reader.read();
        if (part.done) break;
        pending += decoder.decode(part.value, {stream: true});
        let cut;
        while (!done && (cut = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, cut).trim();
          pending = pending.slice(cut + 1);
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") { done = true; break; }
          const event = JSON.parse(data);
          if (event.error) {
            throw new Error("the answer broke off: " + (event.error.code || "error") + ": " +
                            event.error.message);
          }
          for (const choice of event.choices || []) {
            const piece = (choice.delta || {}).content;
            if (piece) { got += piece; answer.textContent = got; }
          }
        }
      }
      if (!done) throw new Error("the answer broke off: the stream ended before [DONE]");
      reader.cancel().catch(() => {});
      messages.push({role: "assistant", content: got});
    } catch (err) {
      messages.pop();  // this turn did not happen: the next is sent without it
      mine.parentNode.classList.add("failed");
      if (answer) answer.parentNode.classList.add("failed");
      showError(err.message || String(err));
      if (!box.value) box.value = text;
    } finally {
      busy = false;
      send.disabled = false;
      delete page.dataset.busy;
      poll();
    }
  }

  $("compose").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = box.value;
    if (busy || !text.trim()) return;
    box.value = "";
    turn(text);
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("compose").requestSubmit();
    }
  });
  $("new").addEventListener("click", () => {
    if (busy) return;
    messages = [];
    list.replaceChildren();
    showError("");
  });
})();
""".strip()


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = ("default-src 'none'; "
       f"script-src {_hash(SCRIPT)}; style-src {_hash(STYLE)}; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def is_page(path: str) -> bool:
    """Whether a request's path (without its query) is one of the web UI's."""
    return path == "/" or path == CHAT or path.startswith(CHAT + "/")


def _entries(jobs: dict):
    """The jobs route's model entries, in its order (its lists; not cluster_status)."""
    for entries in jobs.values():
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and "Models" in entry:
                yield str(entry["Models"]), entry


def states(jobs: dict) -> dict[str, str]:
    """Each model's state (Live, Starting, Queued, Offline) from the jobs route's answer."""
    return {name: _STATUS.get(str(entry.get("Model Status", "")).lower(), OFFLINE)
            for name, entry in _entries(jobs)}


def descriptions(jobs: dict) -> dict[str, str]:
    """Each model's description from the jobs route's ("<name> - <description>")."""
    out = {}
    for name, entry in _entries(jobs):
        text = str(entry.get("Description", ""))
        out[name] = text[len(name) + 3:] if text.startswith(name + " - ") else (
            "" if text == name else text)
    return out


def chat_href(name: str) -> str:
    return f"{CHAT}/{quote(name, safe='')}"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, script: bool = False, refresh: int | None = None) -> str:
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    tail = f"<script>{SCRIPT}</script>" if script else ""
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{meta}<title>{_e(title)}</title><style>{STYLE}</style></head>"
            f"<body>{body}{tail}</body></html>\n")


def index(jobs: dict, only: str | None = None) -> str:
    """The models and their states; `only`: one of the states (else All)."""
    found = states(jobs)
    about = descriptions(jobs)
    only = next((s for s in STATES if only and s.lower() == only.lower()), None)
    tabs = [("All", "/", len(found), only is None)] + [
        (s, f"/?state={s}", sum(v == s for v in found.values()), only == s) for s in STATES]
    mark = ' aria-current="page"'
    nav = " ".join(f'<a href="{_e(href)}"{mark if current else ""}>{label} ({count})</a>'
                   for label, href, count, current in tabs)
    described = any(about.values())  # the column only when a model has a description
    rows = "".join(
        f'<tr><td><a href="{_e(chat_href(name))}">{_e(name)}</a></td>'
        f'<td class="state {phase.lower()}">{phase}</td>'
        + (f"<td>{_e(about.get(name, ''))}</td>" if described else "") + "</tr>"
        for name, phase in found.items() if only is None or phase == only)
    if not rows:
        rows = f'<tr><td colspan="{3 if described else 2}">No model is in this state.</td></tr>'
    body = (
        "<h1>ALCF Inference Service: Metis</h1>"
        "<p>The models SambaNova Metis (SN40L) serves, and their states. Choose one to chat "
        f"with it. The API is <code>{_e(API)}</code> (OpenAI chat completions, with an "
        "access token).</p>"
        f'<nav aria-label="states">Show: {nav}</nav>'
        '<table id="models"><thead><tr><th>Model</th><th>State</th>'
        f'{"<th>Description</th>" if described else ""}</tr></thead><tbody>{rows}</tbody>'
        "</table>"
        '<p class="note">This page refreshes every 10 s. The status page: '
        f'<a href="{STATUS}">{STATUS}</a>.</p>')
    return _page("Metis: models", body, refresh=10)


def chat(name: str, phase: str) -> str:
    """The chat page of the model `name`, whose state is `phase` now."""
    body = (
        '<header><a href="/">All models</a>'
        f'<h1>{_e(name)}</h1><span id="state" class="state {_e(phase.lower())}">{_e(phase)}'
        '</span><span id="state-note" class="note"></span></header>'
        f'<main id="chat" data-model="{_e(name)}" data-api="{_e(CHAT_API)}" '
        f'data-jobs="{_e(JOBS)}" data-status="{_e(STATUS)}">'
        '<section id="login"><label for="token">Access token</label>'
        '<input id="token" type="password" autocomplete="off" spellcheck="false" '
        'placeholder="paste the token here">'
        '<button id="forget" type="button">Forget it</button></section>'
        '<p class="note">The ALCF service logs you in with Globus here. This one takes an '
        "access token instead: on a login node, run "
        f"<code>{_e(TOKEN_COMMAND)}</code> and paste what it prints. The token stays in "
        "this tab only (sessionStorage) and goes to the API in the Authorization header."
        "</p>"
        '<ol id="messages" aria-live="polite"></ol>'
        '<p id="error" role="alert" hidden></p>'
        '<form id="compose"><textarea id="message" rows="3" aria-label="Message" '
        'placeholder="Send a message (Enter sends, Shift+Enter a new line)"></textarea>'
        '<button id="send" type="submit">Send</button>'
        '<button id="new" type="button">New chat</button></form></main>')
    return _page(f"{name}: Metis chat", body, script=True)


def not_found(what: str, jobs: dict) -> str:
    links = "".join(f'<li><a href="{_e(chat_href(n))}">{_e(n)}</a></li>' for n in states(jobs))
    body = (f"<h1>Not found</h1><p>No model <code>{_e(what)}</code> is served on Metis. "
            f"The models:</p><ul>{links}</ul>")
    return _page("Metis: not found", body)


def render(path: str, query: str, jobs: dict) -> tuple[int, str]:
    """(HTTP status, HTML) of a web UI path (is_page) with its query string."""
    if path == "/":
        only = (parse_qs(query).get("state") or [None])[0]
        return 200, index(jobs, only)
    name = unquote(path[len(CHAT) + 1:]) if path.startswith(CHAT + "/") else ""
    phase = states(jobs).get(name)
    if phase is None:
        return 404, not_found(name or "(none)", jobs)
    return 200, chat(name, phase)
