"""The Metis room's parts without the wire: tokenizer, templates, model, timing, decisions."""

from __future__ import annotations

import json

import pytest
from aitestbed.metis import chat, config, lm, schema, state, timing, train
from aitestbed.metis.bpe import ByteBPE
from aitestbed.metis.engine import StopScanner
from aitestbed.metis.tokens import TokenRecord

from .metis_support import CORPUS, trained


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return lm.load(trained(tmp_path_factory))


def test_the_tokenizer_is_deterministic_and_round_trips_any_text(tmp_path):
    first = ByteBPE.train([CORPUS], 320, chat.SPECIALS)
    assert first.merges == ByteBPE.train([CORPUS], 320, chat.SPECIALS).merges
    assert first.vocab_size == 320
    text = "Ünïcode ✓, tabs\tand <|end|> [INST] markers, 12345 numbers"
    ids = first.encode(text)
    assert first.decode(ids) == text
    assert not set(ids) & set(first.special_ids.values())  # text never makes a marker
    assert len(first.encode("the gateway answers")) < len(b"the gateway answers")
    first.save(tmp_path / "tok.json")
    assert ByteBPE.load(tmp_path / "tok.json").encode(text) == ids


def test_each_template_renders_its_family_format(model):
    tok = model.tokenizer
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi <|end|>"}]
    harmony = chat.template("harmony").render(tok, messages)
    assert harmony[0] == tok.special("<|start|>")
    assert harmony[-1] == tok.special("<|message|>")
    assert tok.decode(harmony) == "systemBe brief.userHi <|end|>assistant"
    assert harmony.count(tok.special("<|end|>")) == 2  # the user's "<|end|>" is only text
    gemma = chat.template("gemma").render(tok, messages)
    assert tok.decode(gemma).startswith("user\nBe brief.\n\nHi <|end|>")  # no system turn
    mistral = chat.template("mistral").render(tok, messages)
    assert mistral[1] == tok.special("[SYSTEM_PROMPT]")
    assert mistral[-1] == tok.special("[/INST]")
    with pytest.raises(ValueError, match="no chat template"):
        chat.template("llama")


def test_generation_is_deterministic_with_a_seed_and_respects_max_tokens(model):
    prompt = chat.template("harmony").render(model.tokenizer,
                                             [{"role": "user", "content": "What is Metis?"}])

    def run(seed, **options):
        return list(lm.generate(model.lm, prompt, max_tokens=12, seed=seed, **options))
    assert run(7) == run(7)
    assert any(run(7) != run(seed) for seed in range(8, 12))
    assert run(None, temperature=0) == run(3, temperature=0)  # greedy ignores the seed
    assert len(run(7, top_p=0.5)) <= 12
    long = list(lm.generate(model.lm, list(range(300)), max_tokens=200, seed=1))
    assert len(long) <= 200  # a prompt beyond the window and a generation that fills it


def test_the_stop_scanner_holds_back_what_may_begin_a_stop():
    scanner = StopScanner(("END", "\n\n"))
    assert scanner.feed("hello E") == ("hello ", False)
    assert scanner.feed("N") == ("", False)
    assert scanner.feed("x more") == ("ENx more", False)
    assert scanner.feed(" then\n") == (" then", False)
    assert scanner.feed("\nafter") == ("", True)
    plain = StopScanner(())
    assert plain.feed("abc") == ("abc", False)


def test_timing_follows_the_published_figures():
    assert timing.TIMINGS["gpt-oss-120b"].tokens_per_second == 737.9
    assert timing.TIMINGS["Mistral-Large-3-675B-Instruct-2512"].tokens_per_second == \
        pytest.approx(178.7, abs=0.1)
    assert timing.dense_tokens_per_second(8) == pytest.approx(1042)
    assert timing.dense_tokens_per_second(70) == pytest.approx(457)
    assert 550 < timing.TIMINGS["gemma-4-31B-it"].tokens_per_second < 700
    dense_70b = timing.ModelTiming(457.0, 70.0, 140e9, "test")
    assert dense_70b.first_token_seconds(700) == pytest.approx(0.29, abs=0.01)
    for t in timing.TIMINGS.values():
        assert t.cold_start_seconds() <= 15.0
        assert t.first_token_seconds(100) <= 0.5
    assert timing.timing_for("other").tokens_per_second == 737.9
    assert timing.timing_for("gpt-oss-120b", {"tokens_per_second": 50}).tokens_per_second == 50
    with pytest.raises(ValueError, match="unknown timing keys"):
        timing.timing_for("gpt-oss-120b", {"ttft": 1})


def test_authentication_words_each_failure_as_the_alcf_gateway():
    records = {"good": TokenRecord("alice", 200.0), "old": TokenRecord("alice", 50.0),
               "gone": TokenRecord("alice", 200.0, revoked=True),
               "bob": TokenRecord("bob", 200.0)}

    def auth(header):
        return state.authenticate(header, records.get, lambda user: user == "alice", 100.0)
    assert auth("Bearer good") == "alice"
    for header, status, text in [
            (None, 401, "Missing"), ("Basic abc", 401, "should be Bearer"),
            ("Bearer", 401, "only allows"), ("Bearer a b", 401, "only allows"),
            ("Bearer nope", 401, "not active"), ("Bearer gone", 401, "not active"),
            ("Bearer old", 401, "expired"), ("Bearer bob", 403, "Permission denied")]:
        with pytest.raises(state.ApiError) as err:
            auth(header)
        assert err.value.status == status and text in err.value.message


def test_admission_limits_rate_and_concurrency_with_retry_after():
    usage = state.Usage()
    for t in (0.0, 1.0):
        assert state.admit(usage, 2, 5, t).allowed
        usage.begin(t)
    refused = state.admit(usage, 2, 5, 10.0)
    assert not refused.allowed and refused.error.status == 429
    assert refused.error.retry_after == 50  # the first of the two leaves the minute at 60
    assert state.admit(usage, 2, 5, 61.0).allowed
    busy = state.Usage()
    busy.begin(0.0)
    assert state.admit(busy, 10, 1, 1.0).error.retry_after == 1
    busy.end()
    assert state.admit(busy, 10, 1, 1.0).allowed


def test_a_cold_model_goes_offline_queued_starting_live():
    def phase(asked, loaded, now):
        return state.model_phase(False, asked, loaded, now, 1.0, 2.0)
    assert phase(None, False, 5.0) == state.OFFLINE
    assert phase(10.0, False, 10.5) == state.QUEUED
    assert phase(10.0, True, 12.0) == state.STARTING
    assert phase(10.0, False, 20.0) == state.STARTING  # its weights are not loaded yet
    assert phase(10.0, True, 13.0) == state.LIVE
    assert state.model_phase(True, None, True, 0.0, 1.0, 2.0) == state.LIVE
    assert state.retry_after_cold(10.0, 10.5, 1.0, 2.0) == 3


def test_the_request_schema_refuses_what_metis_does_not_take():
    good = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    request = schema.parse_chat({**good, "stop": "x", "seed": 3, "max_tokens": 5})
    assert request.stop == ("x",) and request.seed == 3 and not request.stream
    for change, param in [({"messages": []}, "messages"), ({"model": 3}, "model"),
                          ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": True}, "max_tokens"),
                          ({"temperature": 3}, "temperature"), ({"stop": ["a"] * 5}, "stop"),
                          ({"tools": [{"type": "function"}]}, "tools"), ({"n": 2}, "n"),
                          ({"messages": [{"role": "robot", "content": "x"}]},
                           "messages[0].role")]:
        with pytest.raises(state.ApiError) as err:
            schema.parse_chat({**good, **change})
        assert err.value.status == 400 and err.value.param == param
    with pytest.raises(state.ApiError, match="maximum context length is 100"):
        schema.check_lengths(schema.parse_chat({**good, "max_tokens": 50}), 60, 100, 80, 10)
    assert schema.check_lengths(schema.parse_chat(good), 95, 100, 80, 10) == 5


def test_the_configuration_is_checked_in_one_line(tmp_path):
    default = config.from_dict({"weights": "w"}, tmp_path)
    assert [m.name for m in default.models] == [n for n, _, _ in config.DOCS_MODELS]
    for data, text in [({"models": [{"name": "a", "template": "x"}], "weights": "w"}, "template"),
                       ({"limits": {"concurrent": 0}, "weights": "w"}, "concurrent"),
                       ({"models": []}, "non-empty"), ({"colour": 1}, "unknown keys"),
                       ({}, "weights"),
                       ({"models": [{"name": "a", "upstream": {"url": "ftp://x"}}]}, "http")]:
        with pytest.raises(config.ConfigError, match=text):
            config.from_dict(data, tmp_path)


def test_the_trainer_writes_weights_tokenizer_and_a_description(tmp_path, capsys):
    corpus = tmp_path / "corpus.md"
    corpus.write_text(CORPUS * 2)
    assert train.main(["--corpus", str(corpus), "--out", str(tmp_path / "out"),
                       "--steps", "3", "--size", "tiny"]) == 0
    info = json.loads((tmp_path / "out" / "model.json").read_text())
    assert info["licence"] == "trained by aitestbed on its own documentation"
    assert info["parameters"] > 10_000 and info["context_length"] == 128
    assert info["corpus"] == ["corpus.md"]
    assert lm.load(tmp_path / "out").tokenizer.vocab_size == info["config"]["vocab_size"]
    (tmp_path / "empty.md").write_text("")
    assert train.main(["--corpus", str(tmp_path / "empty.md"), "--out",
                       str(tmp_path / "o2"), "--size", "tiny"]) == 2
    assert "the corpus is empty" in capsys.readouterr().err
    with pytest.raises(lm.ModelError, match="no trained model"):
        lm.load(tmp_path / "nothing")
