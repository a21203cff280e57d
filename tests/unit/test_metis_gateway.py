"""The Metis gateway through its HTTP API: its client, raw http.client for bad requests."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aitestbed.metis import chat, lm, server
from aitestbed.metis.client import MetisClient, MetisError

from .metis_support import start, trained

API = server.API
HELLO = [{"role": "user", "content": "What is the gateway?"}]


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return trained(tmp_path_factory)


@pytest.fixture
def metis(weights, tmp_path):
    with start(weights, tmp_path) as running:
        yield running


def raw(srv, method, path, body=b"", headers=None, token=None):
    """(status, headers, decoded JSON) of one request sent as given."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response, json.loads(data) if data else None


def error_of(call) -> MetisError:
    with pytest.raises(MetisError) as err:
        call()
    return err.value


def long_seed(client, model="gpt-oss-120b", tokens=24):
    """A seed with which the tiny model writes `tokens` tokens without ending first."""
    for seed in range(40):
        answer = client.chat(model, HELLO, max_tokens=tokens, seed=seed)
        if answer["choices"][0]["finish_reason"] == "length":
            return seed, answer
    pytest.fail("the tiny model ended every answer early")


def test_a_chat_completion_has_the_openai_shape_and_the_tokenizers_counts(metis, weights):
    _, _, client, _ = metis
    seed, answer = long_seed(client)
    assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-")
    assert answer["model"] == "gpt-oss-120b" and isinstance(answer["created"], int)
    message = answer["choices"][0]["message"]
    assert message["role"] == "assistant" and message["content"]
    model = lm.load(weights)
    prompt = chat.template("harmony").render(model.tokenizer, HELLO)
    assert answer["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": 24,
                               "total_tokens": len(prompt) + 24}
    again = client.chat("gpt-oss-120b", HELLO, max_tokens=24, seed=seed)
    assert again["choices"] == answer["choices"]  # the same seed, the same text


def test_a_stream_sends_chunks_then_done_with_the_same_text_and_usage(metis):
    _, _, client, _ = metis
    seed, answer = long_seed(client, "gemma-4-31B-it", 20)
    chunks = list(client.stream("gemma-4-31B-it", HELLO, max_tokens=20, seed=seed,
                                stream_options={"include_usage": True}))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == answer["choices"][0]["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == answer["usage"]
    plain = list(client.stream("gemma-4-31B-it", HELLO, max_tokens=5, seed=seed))
    assert "usage" not in plain[-1]


def test_a_stop_sequence_ends_the_answer_before_it(metis):
    _, _, client, _ = metis
    seed, answer = long_seed(client, tokens=40)
    text = answer["choices"][0]["message"]["content"]
    stop = text[len(text) // 2:len(text) // 2 + 3]
    if "\ufffd" in stop or not stop.strip():
        pytest.skip("the tiny model's text has no clean three characters to stop at")
    cut = client.chat("gpt-oss-120b", HELLO, max_tokens=40, seed=seed, stop=[stop, "@@@"])
    assert cut["choices"][0]["message"]["content"] == text[:text.find(stop)]
    assert cut["choices"][0]["finish_reason"] == "stop"
    streamed = list(client.stream("gpt-oss-120b", HELLO, max_tokens=40, seed=seed, stop=stop))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in streamed) == \
        text[:text.find(stop)]


def test_the_discovery_routes_list_the_models_and_their_states(metis):
    _, srv, client, _ = metis
    names = ["gpt-oss-120b", "Mistral-Large-3-675B-Instruct-2512", "gemma-4-31B-it"]
    assert [m["id"] for m in client.models()["data"]] == names
    assert client.models()["object"] == "list"
    metis_cluster = client.list_endpoints()["clusters"]["metis"]
    assert metis_cluster == {"base_url": "/resource_server/metis", "frameworks": {"api": {
        "models": sorted(names), "endpoints": ["/v1/chat/completions"]}}}
    jobs = client.jobs()
    assert [j["Models"] for j in jobs["running"]] == names and jobs["queued"] == []
    assert jobs["cluster_status"]["live_models"] == 3
    assert client.states() == dict.fromkeys(names, "Live")
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
    conn.request("GET", "/status")
    page = conn.getresponse()
    assert page.status == 200 and "text/html" in page.getheader("Content-Type")
    assert "gemma-4-31B-it" in page.read().decode()
    assert client.status()["gpt-oss-120b"]["status"] == "Live"


def test_tokens_missing_malformed_expired_revoked_or_offboarded_are_refused(metis):
    gateway, srv, client, store = metis
    expired, revoked = store.issue("alice", lifetime=-1), store.issue("alice")
    store.revoke(revoked)
    aged = store.issue("alice")
    store.age(aged, 49 * 3600)
    store.add_user("bob", active=False)
    for token, status, text in [(None, 401, "Missing"), ("", 401, "only allows"),
                                ("nonsense", 401, "not active"), (expired, 401, "expired"),
                                (aged, 401, "expired"), (revoked, 401, "not active"),
                                (store.issue("bob"), 403, "Permission denied")]:
        err = error_of(lambda t=token: MetisClient(srv.url, t).models())
        assert (err.status, err.code is not None) == (status, True) and text in str(err)
    status, _, body = raw(srv, "GET", f"{API}/models", headers={"Authorization": "Basic x"})
    assert status == 401 and set(body["error"]) == {"message", "type", "param", "code"}
    assert client.models()  # alice's own token still works


def test_a_user_beyond_the_rate_gets_429_with_retry_after(weights, tmp_path):
    with start(weights, tmp_path, limits={"requests_per_minute": 2, "concurrent": 4}) as (
            _, _, client, store):
        for _ in range(2):
            client.chat("gpt-oss-120b", HELLO, max_tokens=2)
        err = error_of(lambda: client.chat("gpt-oss-120b", HELLO, max_tokens=2))
        assert err.status == 429 and 1 <= err.retry_after <= 60 and "per minute" in str(err)
        other = MetisClient(client.url, store.issue("alice"))
        assert error_of(lambda: other.chat("gpt-oss-120b", HELLO)).status == 429  # per user
        store.add_user("carol")
        carol = MetisClient(client.url, store.issue("carol"))
        assert carol.chat("gpt-oss-120b", HELLO, max_tokens=2)["usage"]


def test_concurrent_requests_beyond_the_limit_get_429_and_a_closed_stream_frees_its_slot(
        weights, tmp_path):
    slow = [{"name": "gpt-oss-120b", "template": "harmony",
             "timing": {"tokens_per_second": 40}}]
    with start(weights, tmp_path, scale=1.0, models=slow,
               limits={"requests_per_minute": 100, "concurrent": 1}) as (gateway, _, client, _):
        stream = client.stream("gpt-oss-120b", HELLO, max_tokens=400, seed=1, temperature=0.3)
        next(stream)
        err = error_of(lambda: client.chat("gpt-oss-120b", HELLO, max_tokens=2))
        assert err.status == 429 and err.retry_after == 1 and "concurrent" in str(err)
        stream.close()  # the client goes away mid-stream
        deadline = time.monotonic() + 5
        while gateway.active("alice") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gateway.active("alice") == 0
        assert gateway.stats["cancelled"] + gateway.stats["completed"] == 1
        assert client.chat("gpt-oss-120b", HELLO, max_tokens=2)["choices"]


def test_sixteen_concurrent_streams_all_finish(weights, tmp_path):
    with start(weights, tmp_path, limits={"requests_per_minute": 100, "concurrent": 16}) as (
            gateway, _, client, _):
        results, errors = [], []

        def one(i):
            try:
                chunks = list(client.stream("gpt-oss-120b", HELLO, max_tokens=12, seed=i))
                results.append(chunks[-1]["choices"][0]["finish_reason"])
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(err))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and len(results) == 16
        assert set(results) <= {"stop", "length"}
        deadline = time.monotonic() + 5  # the gateway counts after its last write
        while gateway.stats["completed"] < 16 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gateway.stats["completed"] == 16 and gateway.stats["cancelled"] == 0


def test_a_cold_model_is_queued_then_starting_then_live_when_first_asked(weights, tmp_path):
    models = [{"name": "gpt-oss-120b"},
              {"name": "gemma-4-31B-it", "template": "gemma", "hot": False}]
    with start(weights, tmp_path, scale=0.4, models=models) as (gateway, _, client, _):
        assert client.states() == {"gpt-oss-120b": "Live", "gemma-4-31B-it": "Offline"}
        assert gateway.models["gemma-4-31B-it"].backend is None  # nothing loaded yet
        answers = []
        asking = threading.Thread(target=lambda: answers.append(
            client.chat("gemma-4-31B-it", HELLO, max_tokens=3)))
        asking.start()
        seen = []
        while asking.is_alive():
            state = client.states()["gemma-4-31B-it"]
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.05)
        asking.join()
        assert [s for s in seen if s != "Offline"][:2] == ["Queued", "Starting"]
        assert answers[0]["choices"]
        assert client.states()["gemma-4-31B-it"] == "Live"
        queued = client.jobs()
        assert queued["cluster_status"]["live_models"] == 2


def test_a_cold_model_that_takes_too_long_answers_503_with_retry_after(weights, tmp_path):
    models = [{"name": "gemma-4-31B-it", "template": "gemma", "hot": False}]
    with start(weights, tmp_path, scale=1.0, models=models, cold_wait_seconds=0.2) as (
            _, _, client, _):
        err = error_of(lambda: client.chat("gemma-4-31B-it", HELLO, max_tokens=3))
        assert err.status == 503 and err.retry_after >= 2 and "not currently live" in str(err)
        assert client.states()["gemma-4-31B-it"] in ("Queued", "Starting")


def test_bad_requests_get_the_services_status_and_a_json_error(metis, capfd):
    _, srv, client, store = metis
    token = client.token
    post = f"{API}/chat/completions"
    good = {"model": "gpt-oss-120b", "messages": HELLO}
    json_type = {"Content-Type": "application/json"}
    cases = [
        (b"{not json", json_type, 400, "invalid_json"),
        (json.dumps({**good, "model": "gpt-5"}).encode(), json_type, 404, "model_not_found"),
        (json.dumps({**good, "messages": []}).encode(), json_type, 400, "empty_array"),
        (json.dumps({**good, "messages": [{"role": "user", "content": "word " * 3000}]})
         .encode(), json_type, 400, "context_length_exceeded"),
        (json.dumps({**good, "max_tokens": 0}).encode(), json_type, 400, "invalid_value"),
        (json.dumps({**good, "max_tokens": 100000}).encode(), json_type, 400, "invalid_value"),
        (json.dumps(good).encode(), {"Content-Type": "text/plain"}, 415,
         "unsupported_media_type"),
        (json.dumps({**good, "tools": [{"type": "function", "function": {"name": "f"}}]})
         .encode(), json_type, 400, "unsupported_parameter"),
        (b"[1, 2]", json_type, 400, "invalid_request"),
    ]
    for body, headers, status, code in cases:
        got, _, error = raw(srv, "POST", post, body, headers, token)
        assert (got, error["error"]["code"]) == (status, code), body[:60]
        assert set(error["error"]) == {"message", "type", "param", "code"}
    for path, method, status, code in [
            (f"{API}/completions", "POST", 400, "unsupported_endpoint"),
            (f"{API}/embeddings", "POST", 400, "unsupported_endpoint"),
            (f"{API}/batches", "POST", 400, "batch_unavailable"),
            (post, "GET", 405, "method_not_allowed"),
            ("/resource_server/sophia/vllm/v1/models", "GET", 404, "cluster_not_found"),
            ("/nothing/here", "GET", 404, "not_found")]:
        got, _, error = raw(srv, method, path, b"{}", json_type, token)
        assert (got, error["error"]["code"]) == (status, code), path
    assert "Traceback" not in capfd.readouterr().err


def test_a_huge_body_is_refused_before_it_is_read(metis):
    _, srv, client, _ = metis
    with socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5) as sock:
        sock.sendall((f"POST {API}/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {client.token}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
                     .encode())
        answer = b""
        while part := sock.recv(65536):  # the server closes the connection after its answer
            answer += part
    answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413") and "request_too_large" in answer
    assert "Connection: close" in answer


def test_a_slow_client_holds_only_its_own_connection(weights, tmp_path):
    with start(weights, tmp_path, socket_timeout=1.0) as (_, srv, client, _):
        slow = socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5)
        slow.sendall((f"POST {API}/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {client.token}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"mo")
                     .encode())
        started = time.monotonic()
        assert client.chat("gpt-oss-120b", HELLO, max_tokens=3)["choices"]  # served meanwhile
        assert time.monotonic() - started < 1.0
        answer = slow.recv(65536).decode()  # the server gives up on it after its timeout
        slow.close()
        assert answer == "" or answer.startswith("HTTP/1.1 408")


class _Upstream(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible server: it answers "forwarded" and keeps what it got."""

    protocol_version = "HTTP/1.1"
    seen: list = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, self.headers.get("Authorization"), body))
        usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        if not body.get("stream"):
            data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                               "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                   "role": "assistant", "content": "forwarded answer"}}],
                               "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for delta, reason in [({"content": "forwarded "}, None), ({"content": "answer"}, None),
                              ({}, "stop")]:
            chunk = {"model": body["model"], "choices": [
                {"index": 0, "delta": delta, "finish_reason": reason}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


def test_a_forwarded_model_answers_from_the_upstream_under_the_gateways_name(weights, tmp_path):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    _Upstream.seen = []
    url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    models = [{"name": "gpt-oss-120b", "upstream": {"url": url, "model": "llama3.2:1b",
                                                    "api_key": "secret"}},
              {"name": "gemma-4-31B-it", "template": "gemma",
               "upstream": {"url": "http://127.0.0.1:9/v1", "model": "x"}}]
    try:
        with start(weights, tmp_path, models=models) as (_, _, client, _):
            answer = client.chat("gpt-oss-120b", HELLO, max_tokens=5, seed=2)
            assert answer["model"] == "gpt-oss-120b"
            assert answer["choices"][0]["message"]["content"] == "forwarded answer"
            assert answer["usage"]["total_tokens"] == 9
            path, authorization, body = _Upstream.seen[-1]
            assert (path, authorization) == ("/v1/chat/completions", "Bearer secret")
            assert body["model"] == "llama3.2:1b" and body["seed"] == 2
            chunks = list(client.stream("gpt-oss-120b", HELLO,
                                        stream_options={"include_usage": True}))
            assert {c["model"] for c in chunks} == {"gpt-oss-120b"}
            assert "".join(c["choices"][0]["delta"].get("content", "")
                           for c in chunks if c["choices"]) == "forwarded answer"
            assert chunks[-1]["usage"]["completion_tokens"] == 2
            err = error_of(lambda: client.chat("gemma-4-31B-it", HELLO))
            assert err.status == 502 and "does not answer" in str(err)
            assert error_of(lambda: client.models() and MetisClient(
                client.url, "bad").chat("gpt-oss-120b", HELLO)).status == 401
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_the_openai_package_talks_to_the_gateway(metis):
    openai = pytest.importorskip("openai")
    _, _, client, _ = metis
    api = openai.OpenAI(api_key=client.token, base_url=client.base_url)
    answer = api.chat.completions.create(model="gpt-oss-120b", messages=HELLO, max_tokens=4)
    assert answer.choices[0].message.role == "assistant"
    streamed = api.chat.completions.create(model="gpt-oss-120b", messages=HELLO, max_tokens=4,
                                           stream=True)
    assert [c.object for c in streamed][0] == "chat.completion.chunk"


def test_the_server_command_helps_and_refuses_a_bad_config_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        server.main(["--help"])
    assert done.value.code == 0 and "--config" in capsys.readouterr().out
    bad = tmp_path / "metis.yaml"
    bad.write_text("models: [{name: x, template: nope}]\nweights: w\n")
    assert server.main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "template 'nope'" in err and "Traceback" not in err
    assert server.main(["--config", str(tmp_path / "missing.yaml")]) == 2
    (tmp_path / "nomodel.yaml").write_text(f"weights: {tmp_path / 'none'}\n")
    assert server.main(["--config", str(tmp_path / "nomodel.yaml")]) == 2
    assert "no trained model" in capsys.readouterr().err
    assert sys.modules["aitestbed.metis.server"] is server


def test_a_cold_model_whose_weights_cannot_load_answers_503_at_once(weights, tmp_path):
    models = [{"name": "gpt-oss-120b"},
              {"name": "gemma-4-31B-it", "hot": False, "weights": str(tmp_path / "none")}]
    with start(weights, tmp_path, models=models) as (_, _, client, _):
        started = time.monotonic()
        err = error_of(lambda: client.chat("gemma-4-31B-it", HELLO, max_tokens=3))
        assert err.status == 503 and "failed to start" in str(err) and "no trained model" in \
            str(err)
        assert time.monotonic() - started < 5
        assert client.states()["gemma-4-31B-it"] == "Offline"
