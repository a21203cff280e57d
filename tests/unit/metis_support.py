"""What the Metis tests share: one tiny model trained per session, a gateway on a port.

The corpus is a few paragraphs of our own text; the "tiny" size trains in seconds and
really generates (badly: it is tiny). `start` runs a Gateway on 127.0.0.1:0 in a thread.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

from aitestbed.metis import config, train
from aitestbed.metis.client import MetisClient
from aitestbed.metis.gateway import Gateway
from aitestbed.metis.server import serve
from aitestbed.metis.tokens import JsonTokenStore

CORPUS = """# The Metis gateway

The gateway answers chat completions at the paths of the ALCF Inference Service. A user
sends a bearer token, a model name and messages, and the model answers token by token.

## Models and their states

A model is Live when it is loaded and ready. A model that is Offline starts when it is
first asked: it is Queued while it waits for a node, then Starting while its weights
load, then Live. The status page and the jobs route show each model's state.

## Limits

Each user may send a number of requests a minute and hold a number of requests at once.
Beyond them the gateway answers 429 with Retry-After, and the user waits and tries again.

## Streaming

With stream set to true, the answer arrives as server-sent events: one chunk for each
piece of text, a last chunk with the reason the answer ended, and then the word DONE.
"""
_TRAINED: dict[str, Path] = {}


def trained(tmp_path_factory) -> Path:
    """The directory of the session's tiny model (trained on the first call)."""
    if "dir" not in _TRAINED:
        out = tmp_path_factory.mktemp("metis-lm")
        train.train([CORPUS * 3], out, steps=30, size="tiny", log=None)
        _TRAINED["dir"] = out
    return _TRAINED["dir"]


def gateway_config(weights: Path, tokens: Path, **settings) -> config.GatewayConfig:
    data = {"weights": str(weights), "tokens": str(tokens), **settings}
    data.setdefault("models", [
        {"name": "gpt-oss-120b", "template": "harmony", "context_length": 2048,
         "max_tokens_limit": 512},
        {"name": "Mistral-Large-3-675B-Instruct-2512", "template": "mistral"},
        {"name": "gemma-4-31B-it", "template": "gemma"}])
    return config.from_dict(data)


@contextmanager
def start(weights: Path, tmp_path: Path, *, scale: float = 0.0, **settings):
    """(gateway, server, a client with alice's token, the token store)."""
    store = JsonTokenStore(tmp_path / "tokens.json")
    store.add_user("alice")
    token = store.issue("alice")
    gateway = Gateway(gateway_config(weights, store.path, **settings), store, scale=scale)
    server = serve(gateway, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield gateway, server, MetisClient(server.url, token, timeout=30), store
    finally:
        server.shutdown()
        server.server_close()
