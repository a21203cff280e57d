"""Where an answer comes from: the room's own model on the CPU, or a forwarded server.

Both backends turn a checked request into events: `Piece` (text to send) and, last,
`Finished` (why it ended and the token counts). Closing the iterator (a client gone)
stops the work.
- `LocalBackend`: the chat template, aitestbed.metis.lm's generation, the stop
  sequences (`StopScanner`), and the pace of the timing model on a VirtualClock
  (AITESTBED_TIME_SCALE: 0 as fast as the CPU, 1 at SN40L's published pace).
- `UpstreamBackend`: the same request, under the upstream's model name, to an
  OpenAI-compatible server (Ollama, llama.cpp, vLLM), its answer or its stream read back.
"""

from __future__ import annotations

import codecs
import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from aitestbed.devices.clock import VirtualClock
from aitestbed.metis import lm
from aitestbed.metis.chat import Template
from aitestbed.metis.config import Upstream
from aitestbed.metis.schema import ChatRequest, sse_events
from aitestbed.metis.state import ApiError
from aitestbed.metis.timing import ModelTiming


@dataclass(frozen=True)
class Piece:
    text: str


@dataclass(frozen=True)
class Finished:
    reason: str  # "stop" or "length"
    prompt_tokens: int
    completion_tokens: int


class StopScanner:
    """Text as it is generated, cut at the first stop sequence; what could still be the
    start of one is held back until it is known not to be."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """(text that may be sent now, whether a stop sequence was reached)."""
        self.pending += text
        if not self.stops:
            out, self.pending = self.pending, ""
            return out, False
        hits = [i for i in (self.pending.find(s) for s in self.stops) if i >= 0]
        if hits:
            out, self.pending = self.pending[:min(hits)], ""
            return out, True
        hold = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(self.pending)), 0, -1):
                if self.pending.endswith(stop[:size]):
                    hold = max(hold, size)
                    break
        out = self.pending[:len(self.pending) - hold]
        self.pending = self.pending[len(self.pending) - hold:]
        return out, False

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


class LocalBackend:
    def __init__(self, model: lm.LoadedModel, template: Template, timing: ModelTiming,
                 scale: float):
        self.model, self.template, self.timing, self.scale = model, template, timing, scale
        self.end_ids = template.end_ids(model.tokenizer)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return self.template.render(self.model.tokenizer, messages)

    def run(self, request: ChatRequest, max_tokens: int, prompt: list[int]
            ) -> Iterator[Piece | Finished]:
        clock = VirtualClock(self.scale)
        tokenizer = self.model.tokenizer
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        scanner = StopScanner(request.stop)
        tokens = lm.generate(self.model.lm, prompt, max_tokens=max_tokens,
                             temperature=request.temperature, top_p=request.top_p,
                             seed=request.seed, end_ids=self.end_ids)
        count, stopped = 0, False
        try:
            for token in tokens:
                count += 1
                clock.advance(self.timing.first_token_seconds(len(prompt)) if count == 1
                              else self.timing.token_seconds())
                out, stopped = scanner.feed(decoder.decode(tokenizer.token_bytes(token)))
                if out:
                    yield Piece(out)
                if stopped:
                    break
        finally:
            tokens.close()
        if count == 0:
            clock.advance(self.timing.first_token_seconds(len(prompt)))
        if not stopped:
            out, stopped = scanner.feed(decoder.decode(b"", final=True))
            out += "" if stopped else scanner.flush()
            if out:
                yield Piece(out)
        reason = "length" if count >= max_tokens and not stopped else "stop"
        yield Finished(reason, len(prompt), count)


class UpstreamBackend:
    """Forwards to `upstream`; its errors are the gateway's 502/504 (one line)."""

    def __init__(self, upstream: Upstream):
        self.upstream = upstream
        parts = urlsplit(upstream.url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.path = parts.path.rstrip("/") + "/chat/completions"

    def _body(self, request: ChatRequest, max_tokens: int) -> bytes:
        body = {k: v for k, v in request.raw.items() if k != "stream_options"}
        body.update(model=self.upstream.model, max_tokens=max_tokens, stream=request.stream)
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        return json.dumps(body).encode()

    def _open(self, request: ChatRequest, max_tokens: int) -> tuple:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = kind(self.host, self.port, timeout=self.upstream.timeout)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.upstream.api_key:
            headers["Authorization"] = f"Bearer {self.upstream.api_key}"
        where = f"{self.upstream.url} ({self.upstream.model})"
        try:
            conn.request("POST", self.path, self._body(request, max_tokens), headers)
            response = conn.getresponse()
        except TimeoutError:
            conn.close()
            raise ApiError(504, f"the upstream server {where} did not answer in time",
                           "upstream_timeout") from None
        except OSError as err:
            conn.close()
            raise ApiError(502, f"the upstream server {where} does not answer: "
                                f"{err.strerror or err}", "upstream_unavailable") from None
        if response.status != 200:
            text = response.read(2000).decode("utf-8", "replace")
            conn.close()
            try:
                text = json.loads(text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                text = text.strip().splitlines()[0] if text.strip() else response.reason
            raise ApiError(502, f"the upstream server {where} answered {response.status}: "
                                f"{text}", "upstream_error")
        return conn, response

    def run(self, request: ChatRequest, max_tokens: int, prompt: list[int] | None = None
            ) -> Iterator[Piece | Finished]:
        conn, response = self._open(request, max_tokens)
        try:
            if not request.stream:
                data = json.loads(response.read())
                choice = data["choices"][0]
                use = data.get("usage") or {}
                text = choice["message"].get("content") or ""
                if text:
                    yield Piece(text)
                yield Finished(choice.get("finish_reason") or "stop",
                               int(use.get("prompt_tokens", 0)),
                               int(use.get("completion_tokens", 0)))
                return
            reason, use = "stop", {}
            for event in sse_events(response):
                use = event.get("usage") or use
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield Piece(text)
                    reason = choice.get("finish_reason") or reason
            yield Finished(reason, int(use.get("prompt_tokens", 0)),
                           int(use.get("completion_tokens", 0)))
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise ApiError(502, f"the upstream server {self.upstream.url} answered what is "
                                f"not an OpenAI chat completion: {err}", "upstream_error"
                           ) from None
        except OSError as err:
            raise ApiError(502, f"the upstream server {self.upstream.url} broke off: {err}",
                           "upstream_error") from None
        finally:
            conn.close()
