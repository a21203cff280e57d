"""The gateway's state: its models and their states, who calls, and how much.

`Gateway` holds what the wire (aitestbed.metis.server) asks about: the served models
(each with its backend, loaded once: names that share a weights directory share the
loaded model), when a cold model was first asked, the per-user usage, and the views
the docs name (/v1/models, list-endpoints, /jobs, the status page). The decisions are
aitestbed.metis.state's pure functions; this class keeps the facts and the lock.

Sessions start two ways (the emulated Globus Auth): a MUNGE credential from a login node
(`start_session`), or the device-code login (`device_start`, `device_verify`,
`device_token`: aitestbed.metis.device decides, aitestbed.metis.otp checks the passcode).
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from aitestbed.devices.clock import time_scale
from aitestbed.metis import chat, device, lm, otp, state
from aitestbed.metis.config import GatewayConfig, ModelConfig
from aitestbed.metis.engine import LocalBackend, UpstreamBackend
from aitestbed.metis.identity import AccountsFile
from aitestbed.metis.state import ApiError
from aitestbed.metis.tokens import JsonTokenStore, TokenStore, digest

CLUSTER = "metis"
FRAMEWORK = "api"
ENDPOINTS = ["/v1/chat/completions"]
PASSCODE_STATE = "passcodes.json"  # beside the tokens file: the passcodes' steps taken


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
        # the device-code login: its grants (in memory: each lives ten minutes) and the
        # passcodes that complete them
        self.passcodes = otp.Passcodes(
            config.oath_users, config.tokens.parent / PASSCODE_STATE if config.tokens else None)
        self._grants: dict[str, device.Grant] = {}  # user code -> grant
        self._by_device: dict[str, str] = {}  # sha256 of the device code -> user code
        self._device_lock = threading.Lock()
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
        return self._session(state.token_user(uid, self.accounts.name_of, store.user_active))

    def _session(self, user: str) -> dict:
        access, refresh, expires, ends = self._sessions().start_session(user, self.clock())
        self.count("sessions")
        return self._tokens(user, access, expires, ends, refresh)

    # --- the device-code login ---------------------------------------------------------------
    def device_start(self, verification_uri: str) -> dict:
        """A new grant: the device code, the user code, where to enter it."""
        self._sessions()
        now, code = self.clock(), device.new_device_code()
        with self._device_lock:
            device.forget_old(self._grants, now)
            self._by_device = {d: c for d, c in self._by_device.items() if c in self._grants}
            if len(self._grants) >= device.MAX_PENDING:
                raise ApiError(429, "Too many logins are under way: try again in a minute.",
                               "too_many_requests", retry_after=60)
            user_code = device.new_user_code()
            while user_code in self._grants:
                user_code = device.new_user_code()
            grant = device.new_grant(user_code, digest(code), now)
            self._grants[user_code] = grant
            self._by_device[grant.device_digest] = user_code
        self.count("device_codes")
        return device.offer(grant, verification_uri, code, now)

    def device_verify(self, user_code, username, passcode) -> dict:
        """The user completes a grant with their username and passcode (ApiError: not
        completed; MAX_TRIES wrong passcodes deny the grant)."""
        self._sessions()
        code, now = device.user_code_of(user_code), self.clock()
        with self._device_lock:  # one passcode at a time: a code is taken once
            grant = self._grants.get(code) if code else None
            refusal = device.may_verify(grant, now)
            if refusal is not None:
                raise refusal
            verdict = self._passcode(username, passcode, now)
            grant, refusal = device.after_passcode(grant, username, verdict)
            self._grants[code] = grant
        if refusal is not None:
            self.count("passcodes_refused")
            raise refusal
        return {"status": "approved", "user": username, "user_code": code}

    def _passcode(self, username, passcode, now: float) -> str:
        """otp's verdict on a passcode; an account that may not log in is refused before
        its passcode is looked at (and nothing of it is taken)."""
        if not (isinstance(username, str) and otp.USER_NAME.match(username)
                and isinstance(passcode, str) and len(passcode) <= 64):
            return otp.WRONG
        if device.login_refusal(username, self.accounts.uid_of(username),
                                self.accounts.active(username)) is not None:
            return otp.WRONG
        try:
            return self.passcodes.verify(username, passcode, now).reason
        except OSError as err:
            raise ApiError(503, f"Passcodes cannot be checked now: {err}",
                           "service_unavailable") from None

    def device_token(self, device_code: str) -> dict:
        """The helper's poll: the session's tokens once the user completed the grant
        (once), else device.OAuthError (authorization_pending, slow_down, ...)."""
        self._sessions()
        now = self.clock()
        with self._device_lock:
            code = self._by_device.get(digest(device_code))
            grant, refusal = device.poll(self._grants.get(code) if code else None, now)
            if grant is not None:
                self._grants[grant.user_code] = grant
        if refusal is not None:
            raise refusal
        why = device.login_refusal(grant.user, self.accounts.uid_of(grant.user),
                                   self.accounts.active(grant.user))
        if why is not None:  # offboarded since the passcode
            raise device.OAuthError(400, f"{grant.user} may not use the ALCF inference "
                                         f"service ({why}).", "access_denied")
        return self._session(grant.user)

    def introspect(self, token: str) -> dict:
        """What the gateway knows of an access token (RFC 7662's shape): the helper asks
        it, so a token aged or revoked here is refreshed or reported there. Its holder
        learns its expiry; an unknown token is only {"active": false}."""
        record, now = self.store.lookup(token), self.clock()
        if record is None or record.revoked:
            return {"active": False}
        active = now < record.expires_at and self.store.user_active(record.user)
        answer = {"active": active, "exp": int(record.expires_at)}
        if active:
            answer.update(token_type="Bearer", username=record.user)
            if record.session_ends is not None:
                answer["session_ends_at_seconds"] = int(record.session_ends)
        return answer

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
