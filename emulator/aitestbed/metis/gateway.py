"""The gateway's state: its models and their states, who calls, and how much.

`Gateway` holds what the wire (aitestbed.metis.server) asks about: the served models
(each with its backend, loaded once: names that share a weights directory share the
loaded model), when a cold model was first asked, the per-user usage, and the views
the docs name (/v1/models, list-endpoints, /jobs, the status page). The decisions are
aitestbed.metis.state's pure functions; this class keeps the facts and the lock.
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from aitestbed.devices.clock import time_scale
from aitestbed.metis import chat, lm, state
from aitestbed.metis.config import GatewayConfig, ModelConfig
from aitestbed.metis.engine import LocalBackend, UpstreamBackend
from aitestbed.metis.identity import AccountsFile
from aitestbed.metis.state import ApiError
from aitestbed.metis.tokens import JsonTokenStore, TokenStore

CLUSTER = "metis"
FRAMEWORK = "api"
ENDPOINTS = ["/v1/chat/completions"]


class Served:
    """One served name: its configuration, backend and where it is in its cold start."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self.backend: LocalBackend | UpstreamBackend | None = None
        self.asked_at: float | None = None  # when a cold start began
        self.live = threading.Event()
        self.failure: str | None = None
        self.created = int(time.time())


class Gateway:
    def __init__(self, config: GatewayConfig, store: TokenStore | None = None, *,
                 scale: float | None = None, monotonic: Callable[[], float] = time.monotonic,
                 accounts: AccountsFile | None = None, clock: Callable[[], float] = time.time):
        self.config = config
        self.scale = time_scale() if scale is None else scale
        self.now = monotonic
        self.clock = clock  # wall time: tokens' expiries
        # who may have tokens and use them: the cluster's accounts (None: no sessions)
        self.accounts = accounts or (AccountsFile(config.accounts) if config.accounts else None)
        self.store = store or JsonTokenStore(
            config.tokens or Path("/nonexistent/tokens.json"),
            self.accounts.active if self.accounts else None)
        self.lock = threading.Lock()
        self.models = {m.name: Served(m) for m in config.models}
        self.usage: dict[str, state.Usage] = {}
        self.stats: Counter[str] = Counter()
        self._loaded: dict[Path, lm.LoadedModel] = {}
        self._load_lock = threading.Lock()
        for served in self.models.values():
            if served.config.hot:
                self._load(served)  # ModelError: the gateway does not start
                served.live.set()

    # --- models -----------------------------------------------------------------------------
    def _load(self, served: Served) -> None:
        config = served.config
        if config.upstream is not None:
            served.backend = UpstreamBackend(config.upstream)
            return
        path = (config.weights or self.config.weights).resolve()
        with self._load_lock:
            if path not in self._loaded:
                self._loaded[path] = lm.load(path)
        served.backend = LocalBackend(self._loaded[path], chat.template(config.template),
                                      config.timing, self.scale)

    def phase(self, served: Served) -> str:
        t = served.config.timing
        return state.model_phase(served.config.hot, served.asked_at, served.live.is_set(),
                                 self.now(), t.queued_seconds() * self.scale,
                                 t.starting_seconds() * self.scale)

    def served(self, name: str) -> Served:
        served = self.models.get(name)
        if served is None:
            raise ApiError(404, f"The model '{name}' does not exist or is not served on Metis "
                                "(GET /v1/models lists them).", "model_not_found", "model")
        return served

    def _cold_start(self, served: Served) -> None:
        t = served.config.timing
        queued, starting = t.queued_seconds() * self.scale, t.starting_seconds() * self.scale
        time.sleep(queued)
        try:
            self._load(served)
        except lm.ModelError as err:
            with self.lock:
                served.failure, served.asked_at = str(err), None
            return
        remaining = (served.asked_at or 0) + queued + starting - self.now()
        if remaining > 0:
            time.sleep(remaining)
        served.live.set()

    def ensure_live(self, served: Served) -> None:
        """Return once the model is Live: a cold one starts now (Queued, Starting) and the
        request waits, up to cold_wait_seconds (then 503 with Retry-After)."""
        if served.live.is_set():
            return
        with self.lock:
            if served.asked_at is None and not served.live.is_set():
                served.asked_at, served.failure = self.now(), None
                threading.Thread(target=self._cold_start, args=(served,), daemon=True,
                                 name=f"cold-start {served.config.name}").start()
            asked_at = served.asked_at
        deadline = self.now() + self.config.cold_wait_seconds
        while not served.live.wait(0.05) and not served.failure and self.now() < deadline:
            pass
        if not served.live.is_set() and not served.failure:
            t = served.config.timing
            raise ApiError(503, f"'{served.config.name}' is not currently live on Metis "
                                f"({self.phase(served)}); try again later.", "model_not_live",
                           retry_after=state.retry_after_cold(
                               asked_at, self.now(), t.queued_seconds() * self.scale,
                               t.starting_seconds() * self.scale))
        if served.failure:
            raise ApiError(503, f"'{served.config.name}' failed to start: {served.failure}",
                           "model_not_live")

    # --- callers ---------------------------------------------------------------------------
    def authenticate(self, header: str | None) -> str:
        return state.authenticate(header, self.store.lookup, self.store.user_active,
                                  self.clock())

    # --- sessions (the token helper: POST /auth/token) ---------------------------------------
    def _sessions(self) -> JsonTokenStore:
        if self.accounts is None or not isinstance(self.store, JsonTokenStore):
            raise ApiError(404, "This gateway issues no tokens (its configuration names no "
                                "accounts).", "not_found")
        return self.store

    def start_session(self, uid: int) -> dict:
        """A new session for the testbed account `uid` is (munged vouched for the uid)."""
        store = self._sessions()
        user = state.token_user(uid, self.accounts.name_of, store.user_active)
        access, refresh, expires, ends = store.start_session(user, self.clock())
        self.count("sessions")
        return self._tokens(user, access, expires, ends, refresh)

    def refresh(self, refresh_token: str) -> dict:
        store = self._sessions()
        record = store.lookup_refresh(refresh_token)
        user = state.may_refresh(record, store.user_active, self.clock())
        access, expires = store.refresh_access(record, self.clock())
        return self._tokens(user, access, expires, record.session_ends or record.expires_at)

    def _tokens(self, user: str, access: str, expires: float, ends: float,
                refresh: str | None = None) -> dict:
        answer = {"access_token": access, "token_type": "Bearer", "user": user,
                  "expires_in": max(0, int(expires - self.clock())),
                  "expires_at_seconds": int(expires), "session_ends_at_seconds": int(ends)}
        if refresh:
            answer["refresh_token"] = refresh
        return answer

    def begin(self, user: str) -> Callable[[], None]:
        """Admit one request of `user` (ApiError 429 otherwise); returns its release."""
        limits = self.config.limits
        with self.lock:
            usage = self.usage.setdefault(user, state.Usage())
            now = self.now()
            state.forget_old(usage, now)
            decision = state.admit(usage, limits.requests_per_minute, limits.concurrent, now)
            if not decision.allowed:
                self.stats["refused_429"] += 1
                raise decision.error
            usage.begin(now)
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                with self.lock:
                    usage.end()
        return release

    def active(self, user: str) -> int:
        with self.lock:
            return self.usage[user].active if user in self.usage else 0

    def count(self, what: str) -> None:
        with self.lock:
            self.stats[what] += 1

    # --- the views the docs name -----------------------------------------------------------
    def states(self) -> dict[str, str]:
        return {name: self.phase(s) for name, s in self.models.items()}

    def models_list(self) -> dict:
        return {"object": "list", "data": [
            {"id": name, "object": "model", "created": s.created, "owned_by": "SambaNova"}
            for name, s in self.models.items()]}

    def list_endpoints(self) -> dict:
        """As the ALCF gateway's /resource_server/list-endpoints shapes it."""
        return {"clusters": {CLUSTER: {
            "base_url": f"/resource_server/{CLUSTER}",
            "frameworks": {FRAMEWORK: {"models": sorted(self.models), "endpoints": ENDPOINTS}}}}}

    def jobs(self) -> dict:
        """As the ALCF gateway's /resource_server/metis/jobs shapes Metis' status."""
        out: dict = {"running": [], "queued": [], "stopped": [], "others": [],
                     "private_batch_running": [], "private_batch_queued": []}
        states = self.states()
        for name, phase in states.items():
            entry = {"Models": name, "Framework": FRAMEWORK, "Cluster": CLUSTER,
                     "Model Status": "running" if phase == state.LIVE else phase.lower(),
                     "Description": f"{name} - {self.models[name].config.description}"
                     .rstrip(" -"), "Model Version": ""}
            out["running" if phase == state.LIVE else "queued"].append(entry)
        out["cluster_status"] = {"cluster": CLUSTER, "total_models": len(states),
                                 "live_models": len(out["running"]), "stopped_models": 0}
        return out

    def status(self) -> dict:
        """The Metis status page's data: model -> {model, status, description}."""
        return {name: {"model": name, "status": phase,
                       "description": self.models[name].config.description,
                       "model_version": ""} for name, phase in self.states().items()}

    def status_html(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td class=\"{phase.lower()}\">{phase}</td></tr>"
            for name, phase in self.states().items())
        return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>Metis status"
                "</title><style>body{font-family:sans-serif}td{padding:2px 12px}"
                ".live{color:green}.offline{color:gray}</style></head><body>"
                "<h1>SambaNova Metis (SN40L): model status</h1><table><tr><th>Model</th>"
                f"<th>Status</th></tr>{rows}</table></body></html>\n")
