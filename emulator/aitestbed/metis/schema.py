"""The OpenAI chat-completions wire format: a request checked, and the answers built.

Pure functions: `parse_chat` turns a decoded JSON body into a `ChatRequest` or raises
ApiError 400 naming the parameter; `check_lengths` holds it against a model's context
and max_tokens limit; `completion`, `chunk` and `usage` build what the gateway sends.
What Metis does not offer (tool calling, n > 1) is refused here, as the docs say.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from aitestbed.metis.state import ApiError

MAX_STOPS = 4
CONTENT_ROLES = ("system", "developer", "user", "assistant")
NOT_OFFERED = ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict]  # [{"role", "content": str}]
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    raw: dict = field(default_factory=dict, compare=False)  # the body, for forwarding


def _bad(message: str, param: str | None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code, param)


def _number(body: dict, key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(f"'{key}' must be a number from {low:g} to {high:g}, not {value!r}", key)
    return float(value)


def _content(value, index: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # [{"type": "text", "text": ...}]
        parts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                raise _bad(f"messages[{index}].content: only text parts are supported on "
                           "Metis", f"messages[{index}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise _bad(f"messages[{index}].content must be a string", f"messages[{index}].content")


def parse_chat(body) -> ChatRequest:
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", None, "invalid_request")
    for key in NOT_OFFERED:
        if body.get(key) not in (None, [], "none"):
            raise ApiError(400, "Tool calling is not supported on the Metis cluster.",
                           "unsupported_parameter", key)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: the name of a model (GET /v1/models lists them)",
                   "model", "missing_required_parameter")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad("'messages' is required: a list of {role, content}", "messages",
                   "missing_required_parameter")
    if not messages:
        raise _bad("'messages' must not be empty", "messages", "empty_array")
    parsed = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in CONTENT_ROLES:
            raise _bad(f"messages[{i}].role must be one of {', '.join(CONTENT_ROLES)}",
                       f"messages[{i}].role")
        parsed.append({"role": m["role"], "content": _content(m.get("content"), i)})
    n = body.get("n", 1)
    if n != 1:
        raise _bad("'n' must be 1 on Metis", "n", "unsupported_value")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or max_tokens < 1):
        raise _bad(f"'max_tokens' must be an integer of at least 1, not {max_tokens!r}",
                   "max_tokens")
    stop = body.get("stop")
    stops: tuple[str, ...] = ()
    if isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    elif stop is not None:
        raise _bad("'stop' must be a string or a list of strings", "stop")
    if len(stops) > MAX_STOPS or any(not s for s in stops):
        raise _bad(f"'stop' takes at most {MAX_STOPS} non-empty strings", "stop")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not -(2 ** 63) <= seed < 2 ** 63):
        raise _bad("'seed' must be an integer", "seed")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    return ChatRequest(model=model, messages=parsed, max_tokens=max_tokens,
                       temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
                       top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1e-6, stop=stops,
                       seed=seed, stream=stream,
                       include_usage=bool(options.get("include_usage")), raw=body)


def check_lengths(request: ChatRequest, prompt_tokens: int, context_length: int,
                  max_tokens_limit: int, default_max_tokens: int) -> int:
    """The max_tokens the request runs with, or ApiError 400 when it cannot fit."""
    if request.max_tokens is not None and request.max_tokens > max_tokens_limit:
        raise _bad(f"'max_tokens' is {request.max_tokens}: {request.model} generates at "
                   f"most {max_tokens_limit} tokens", "max_tokens")
    wanted = request.max_tokens or default_max_tokens
    if prompt_tokens + (request.max_tokens or 1) > context_length:
        raise _bad(f"This model's maximum context length is {context_length} tokens. However, "
                   f"you requested {prompt_tokens + (request.max_tokens or 0)} tokens "
                   f"({prompt_tokens} in the messages, {request.max_tokens or 0} in the "
                   "completion). Please reduce the length of the messages or completion.",
                   "messages", "context_length_exceeded")
    return min(wanted, context_length - prompt_tokens)


# --- the answers ------------------------------------------------------------------------------
def new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion(ident: str, model: str, text: str, finish_reason: str, use: dict,
               created: int | None = None) -> dict:
    return {"id": ident, "object": "chat.completion", "created": created or int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": finish_reason}],
            "usage": use}


def chunk(ident: str, model: str, created: int, delta: dict,
          finish_reason: str | None = None) -> dict:
    return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}]}


def usage_chunk(ident: str, model: str, created: int, use: dict) -> dict:
    return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None, "choices": [], "usage": use}


def sse_events(lines: Iterable[bytes]) -> Iterator[dict]:
    """The JSON events of a Server-Sent Events stream of chat chunks (each `data: {...}`),
    until `data: [DONE]`; ValueError if it ends before that or an event is not JSON. The
    client reads the gateway's streams with it, the gateway its upstream's."""
    for raw in lines:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        yield json.loads(payload)
    raise ValueError("the stream ended without data: [DONE]")

