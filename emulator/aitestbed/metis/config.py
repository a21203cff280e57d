"""The gateway's configuration: where it listens, its models, tokens and limits.

A YAML (or JSON) file; every key has a default, so `{}` serves the docs' three models
from one trained directory:

    listen: {host: 127.0.0.1, port: 8080}
    weights: /var/lib/metis/lm          # a directory aitestbed.metis.train wrote
    tokens: /var/lib/metis/tokens.json  # the token store (aitestbed.metis.tokens)
    accounts: /etc/aitestbed/cluster/accounts.json  # who may have tokens (the cluster's
                                        # accounts: aitestbed.metis.identity); without
                                        # it, POST /auth/token issues nothing
    munge_socket: /run/munge-metis/munge.socket.2   # the munged that decodes credentials
    oath_users: /etc/oath/users         # the users' pam_oath files (<user>.oath): the
                                        # device-code login's passcodes (aitestbed.metis.otp;
                                        # the codes taken: passcodes.json beside `tokens`)
    limits: {requests_per_minute: 60, concurrent: 4}
    max_body_bytes: 1048576
    socket_timeout: 30                  # seconds a client may take to send its request
    cold_wait_seconds: 120              # how long a request waits for a cold model
    models:
      - name: gpt-oss-120b
        template: harmony               # harmony | mistral | gemma
        hot: true                       # Live from the start; false: Offline until asked
        context_length: 131072          # what the service accepts (prompt + max_tokens)
        max_tokens_limit: 16384         # the largest max_tokens a request may ask
        default_max_tokens: 256         # when a request gives none
        weights: ...                    # this model's own directory (default: weights)
        timing: {tokens_per_second: 500}
        upstream: {url: http://127.0.0.1:11434/v1, model: llama3.2:1b, api_key: ...}

With `upstream`, the model's requests go to that OpenAI-compatible server (Ollama,
llama.cpp, vLLM) while the gateway keeps the name, tokens, limits and states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from aitestbed.metis import chat, timing

DOCS_MODELS = (  # the docs' Metis models (all "H": always hot), and their families' formats
    ("gpt-oss-120b", "harmony", 131072),
    ("Mistral-Large-3-675B-Instruct-2512", "mistral", 262144),
    ("gemma-4-31B-it", "gemma", 131072),
)


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Upstream:
    url: str  # the server's OpenAI base, e.g. http://127.0.0.1:11434/v1
    model: str
    api_key: str = ""
    timeout: float = 300.0


@dataclass(frozen=True)
class ModelConfig:
    name: str
    template: str = "harmony"
    hot: bool = True
    context_length: int = 131072
    max_tokens_limit: int = 16384
    default_max_tokens: int = 256
    weights: Path | None = None
    timing: timing.ModelTiming = field(default_factory=lambda: timing.TIMINGS["gpt-oss-120b"])
    upstream: Upstream | None = None
    description: str = ""


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int = 60
    concurrent: int = 4


@dataclass(frozen=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    weights: Path | None = None
    tokens: Path | None = None
    accounts: Path | None = None
    munge_socket: str = "/run/munge-metis/munge.socket.2"
    oath_users: Path = Path("/etc/oath/users")
    limits: Limits = Limits()
    max_body_bytes: int = 1 << 20
    socket_timeout: float = 30.0
    cold_wait_seconds: float = 120.0
    models: tuple[ModelConfig, ...] = ()

    def model(self, name: str) -> ModelConfig | None:
        return next((m for m in self.models if m.name == name), None)


def _int(value, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{what} must be an integer of at least {low}, not {value!r}")
    return value


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{what} must be a positive number, not {value!r}")
    return float(value)


def _mapping(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a mapping, not {type(value).__name__}")
    return value


def _check_keys(data: dict, allowed: set[str], what: str) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise ConfigError(f"unknown keys in {what}: {', '.join(sorted(map(str, unknown)))}")


def _upstream(data, what: str) -> Upstream:
    data = _mapping(data, what)
    _check_keys(data, {"url", "model", "api_key", "timeout"}, what)
    url, model = data.get("url"), data.get("model")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") \
            or not urlsplit(url).hostname:
        raise ConfigError(f"{what}.url must be an http(s) URL, not {url!r}")
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{what}.model must name the upstream server's model")
    return Upstream(url.rstrip("/"), model, str(data.get("api_key") or ""),
                    _number(data.get("timeout", 300.0), f"{what}.timeout"))


def _model(data, index: int, base: Path) -> ModelConfig:
    data = _mapping(data, f"models[{index}]")
    _check_keys(data, {"name", "template", "hot", "context_length", "max_tokens_limit",
                       "default_max_tokens", "weights", "timing", "upstream", "description"},
                f"models[{index}]")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"models[{index}].name must be a model name, not {name!r}")
    what = f"model {name}"
    template = data.get("template", "harmony")
    if template not in chat.TEMPLATES:
        raise ConfigError(f"{what}: template {template!r} is not one of "
                          f"{', '.join(chat.TEMPLATES)}")
    if not isinstance(data.get("hot", True), bool):
        raise ConfigError(f"{what}: hot must be true or false")
    context = _int(data.get("context_length", 131072), f"{what}: context_length", 16)
    limit = _int(data.get("max_tokens_limit", min(16384, context)), f"{what}: max_tokens_limit")
    default = _int(data.get("default_max_tokens", min(256, limit)), f"{what}: default_max_tokens")
    if limit > context or default > limit:
        raise ConfigError(f"{what}: default_max_tokens <= max_tokens_limit <= context_length")
    try:
        model_timing = timing.timing_for(name, _mapping(data.get("timing") or {},
                                                        f"{what}: timing"))
    except ValueError as err:
        raise ConfigError(f"{what}: {err}") from None
    weights = data.get("weights")
    return ModelConfig(
        name=name, template=template, hot=data.get("hot", True), context_length=context,
        max_tokens_limit=limit, default_max_tokens=default,
        weights=(base / str(weights)) if weights else None, timing=model_timing,
        upstream=_upstream(data["upstream"], f"{what}: upstream") if data.get("upstream")
        else None, description=str(data.get("description", "")))


def from_dict(data, base: Path = Path(".")) -> GatewayConfig:
    """The configuration from its parsed file (`base`: where relative paths start)."""
    data = _mapping(data if data is not None else {}, "the configuration")
    _check_keys(data, {"listen", "weights", "tokens", "accounts", "munge_socket", "oath_users",
                       "limits", "max_body_bytes", "socket_timeout", "cold_wait_seconds",
                       "models"}, "the configuration")
    listen = _mapping(data.get("listen") or {}, "listen")
    _check_keys(listen, {"host", "port"}, "listen")
    limits = _mapping(data.get("limits") or {}, "limits")
    _check_keys(limits, {"requests_per_minute", "concurrent"}, "limits")
    models_data = data.get("models")
    if models_data is None:
        models_data = [{"name": n, "template": t, "context_length": c} for n, t, c in DOCS_MODELS]
    if not isinstance(models_data, list) or not models_data:
        raise ConfigError("models must be a non-empty list")
    models = tuple(_model(m, i, base) for i, m in enumerate(models_data))
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ConfigError(f"a model name is given twice: {names}")
    weights = data.get("weights")
    if weights is None and any(m.weights is None and m.upstream is None for m in models):
        raise ConfigError("weights: the directory of the trained model is not given "
                          "(python -m aitestbed.metis.train --out DIR)")
    tokens, accounts = data.get("tokens"), data.get("accounts")
    socket = data.get("munge_socket", GatewayConfig.munge_socket)
    if not isinstance(socket, str) or not socket.startswith("/"):
        raise ConfigError(f"munge_socket must be an absolute path, not {socket!r}")
    oath = data.get("oath_users", str(GatewayConfig.oath_users))
    if not isinstance(oath, str) or not oath:
        raise ConfigError(f"oath_users must be a directory, not {oath!r}")
    host = listen.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise ConfigError(f"listen.host must be an address, not {host!r}")
    return GatewayConfig(
        host=host, port=_int(listen.get("port", 8080), "listen.port", 0),
        weights=base / str(weights) if weights else None,
        tokens=base / str(tokens) if tokens else None,
        accounts=base / str(accounts) if accounts else None, munge_socket=socket,
        oath_users=base / oath,
        limits=Limits(_int(limits.get("requests_per_minute", 60), "limits.requests_per_minute"),
                      _int(limits.get("concurrent", 4), "limits.concurrent")),
        max_body_bytes=_int(data.get("max_body_bytes", 1 << 20), "max_body_bytes", 64),
        socket_timeout=_number(data.get("socket_timeout", 30.0), "socket_timeout"),
        cold_wait_seconds=_number(data.get("cold_wait_seconds", 120.0), "cold_wait_seconds"),
        models=models)


def load(path: Path) -> GatewayConfig:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not YAML: {str(err).splitlines()[0]}") from None
    try:
        return from_dict(data, Path(path).resolve().parent)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
