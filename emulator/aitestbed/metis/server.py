"""The Metis inference gateway on HTTP: the ALCF Inference Service's routes for Metis.

    python -m aitestbed.metis.server --config FILE [--host H] [--port P]
        [--certfile CRT --keyfile KEY] [--user NAME]

  POST /auth/token                                      a session's tokens (below)
  POST /resource_server/metis/api/v1/chat/completions   OpenAI chat (stream: SSE)
  GET  /resource_server/metis/api/v1/models             the served names
  GET  /resource_server/list-endpoints                  {"clusters": {"metis": ...}}
  GET  /resource_server/metis/jobs                      each model Live/Starting/Queued/Offline
  GET  /status                                          the status page (JSON if asked)
  GET  /, /chat/<model>                                 the web UI (aitestbed.metis.webui)
Every /resource_server route needs `Authorization: Bearer <access token>`. What Metis
does not offer (batches, other OpenAI routes, tool calling) is a 400 JSON error, as
the ALCF gateway answers it; every refusal is JSON with its status, never a traceback.

POST /auth/token is the emulated Globus Auth the token helper (aitestbed.metis.auth)
talks to: {"grant_type": "munge"} with `Authorization: MUNGE <credential>` starts a
session for the testbed account munged vouches for (aitestbed.metis.identity);
{"grant_type": "refresh_token", "refresh_token": ...} gives a new access token of it;
{"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": ...}
collects the session of a device-code login (RFC 8628, aitestbed.metis.device):
  POST /auth/device                                     a device code and a user code
  GET  /auth/device/verify[?user_code=...]              the page where a user enters it
  POST /auth/device/verify                              {user_code, username, passcode}
                                                        (JSON, or the page's form)
  POST /auth/introspect                                 {token}: is it active, its expiry
The auth routes take JSON or a form (application/x-www-form-urlencoded).

TLS: with --certfile and --keyfile every connection is TLS (1.2 or later); its handshake
happens in the connection's own thread, under the socket timeout, so a client that
never finishes one holds only itself. --user: the process binds its port and reads
its key as root, then runs as that user.

The wire only: the state and decisions are aitestbed.metis.gateway's and .state's.
Each connection has its own thread (ThreadingHTTPServer) and a socket timeout, so a
slow client holds only its own; a body larger than max_body_bytes is refused from its
Content-Length before it is read; a client that goes away mid-stream stops its
generation and frees its slot.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from aitestbed.devices.clock import TimeScaleError
from aitestbed.metis import config as config_module
from aitestbed.metis import device, identity, lm, schema, webui
from aitestbed.metis.engine import Finished, LocalBackend, Piece
from aitestbed.metis.gateway import Gateway
from aitestbed.metis.state import ApiError
from aitestbed.node.munge import MungeError

ROOT = "/resource_server"
API = f"{ROOT}/metis/api/v1"
AUTH = "/auth/token"
DEVICE = "/auth/device"
VERIFY = "/auth/device/verify"
INTROSPECT = "/auth/introspect"
JSON, FORM = "application/json", "application/x-www-form-urlencoded"
PUBLIC_HOST = "inference-api.alcf.anl.gov"  # the verification URL's host without a Host header
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$")
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """The server's TLS context (ssl.SSLError or OSError when the files do not make one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile, keyfile)
    return context


class GatewayServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], gateway: Gateway,
                 tls: ssl.SSLContext | None = None,
                 identify: identity.Verifier | None = None):
        self.gateway = gateway
        self.tls = tls
        # a MUNGE credential -> the uid that made it (MungeError)
        self.identify = identify or identity.munge_verifier(gateway.config.munge_socket)
        super().__init__(address, Handler)

    def get_request(self):
        sock, address = super().get_request()
        if self.tls is not None:  # the handshake: in the connection's thread (Handler.setup)
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address) -> None:
        """One line, never a traceback (a failed TLS handshake, a client gone)."""
        err = sys.exc_info()[1]
        if isinstance(err, ssl.SSLError | OSError):
            return  # the client's problem; the others are served
        print(f"metis gateway: connection from {client_address[0]}: "
              f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GatewayServer
    server_version = "metis-gateway"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.gateway.config.socket_timeout
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(self.timeout)
            self.request.do_handshake()  # ssl.SSLError, TimeoutError: handle_error, quietly
        super().setup()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base's name
        pass

    # --- answers ----------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data, headers: dict | None = None) -> None:
        self._send(status, json.dumps(data).encode(), "application/json", headers)

    def _error(self, err: ApiError) -> None:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after else {}
        if err.status == 405:
            headers["Allow"] = err.allow or "POST"
        self._json(err.status, err.body(), headers)

    # --- dispatch ---------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        self.body_read = method not in ("POST", "PUT", "PATCH")
        self.streaming = False  # once a stream's headers are sent, no other answer can be
        try:
            self._route(method, path)
        except Exception as err:  # noqa: BLE001 - the service answers, never a traceback
            if self.streaming or isinstance(err, GONE):
                self.close_connection = True
            elif isinstance(err, ApiError):
                if not self.body_read:
                    self.close_connection = True  # its body was not read: the connection ends
                self._safely(self._error, err)
            elif isinstance(err, TimeoutError):  # socket.timeout: a client too slow
                self.close_connection = True
                self._safely(self._error, ApiError(408, "the request was not received in "
                                                        "time", "request_timeout"))
            else:
                print(f"metis gateway: {method} {path}: {type(err).__name__}: {err}",
                      file=sys.stderr, flush=True)
                self.close_connection = True
                self._safely(self._json, 500, {"error": {
                    "message": "Internal Server Error", "type": "server_error", "param": None,
                    "code": "internal_error"}})

    def _safely(self, answer, *args) -> None:
        try:
            answer(*args)
        except (OSError, ValueError):
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def _route(self, method: str, path: str) -> None:
        gateway = self.server.gateway
        if path in (AUTH, DEVICE, VERIFY, INTROSPECT):
            return self._auth(method, path)
        if webui.is_page(path):  # the pages need no token (the API they call does)
            if method != "GET":
                raise ApiError(405, f"{method} is not allowed on {path}: use GET",
                               "method_not_allowed", allow="GET")
            status, page = webui.render(path, urlsplit(self.path).query, gateway.jobs())
            return self._send(status, page.encode(), "text/html; charset=utf-8", webui.HEADERS)
        if path == "/status" and method == "GET":
            if "json" in self.headers.get("Accept", ""):
                return self._json(200, gateway.status())
            return self._send(200, gateway.status_html().encode(), "text/html; charset=utf-8")
        if path != ROOT and not path.startswith(ROOT + "/"):
            raise ApiError(404, f"No such resource: {method} {path}", "not_found")
        user = gateway.authenticate(self.headers.get("Authorization"))
        routes = {f"{ROOT}/list-endpoints": gateway.list_endpoints,
                  f"{ROOT}/metis/jobs": gateway.jobs, f"{API}/models": gateway.models_list}
        if path in routes:
            if method != "GET":
                raise ApiError(405, f"{method} is not allowed on {path}", "method_not_allowed",
                               allow="GET")
            return self._json(200, routes[path]())
        if path == f"{API}/chat/completions":
            if method != "POST":
                raise ApiError(405, f"{method} is not allowed on {path}: use POST",
                               "method_not_allowed")
            return self._chat(user)
        if path.startswith(API + "/"):
            route = path[len(API):]
            if route.startswith("/batches"):
                raise ApiError(400, "Batch processing is not supported on the Metis cluster.",
                               "batch_unavailable")
            raise ApiError(400, f"'{route}' not available on cluster 'metis': Metis offers "
                                "/chat/completions only.", "unsupported_endpoint")
        parts = path[len(ROOT):].strip("/").split("/")
        if parts[0] not in ("metis", "list-endpoints"):
            raise ApiError(404, f"Cluster '{parts[0]}' is not served here: this is Metis "
                                "(base URL /resource_server/metis/api/v1).", "cluster_not_found")
        raise ApiError(404, f"No such resource: {method} {path}", "not_found")

    # --- sessions (the emulated Globus Auth) -----------------------------------------------
    def _auth(self, method: str, path: str) -> None:
        gateway = self.server.gateway
        if path == VERIFY and method == "GET":
            query = parse_qs(urlsplit(self.path).query, max_num_fields=10)
            typed = query.get("user_code", [""])[0][:32]
            return self._page(200, device.page(device.user_code_of(typed) or typed))
        if method != "POST":
            raise ApiError(405, f"{method} is not allowed on {path}: use POST",
                           "method_not_allowed")
        if path == AUTH:
            return self._token()
        if path == DEVICE:
            self._auth_body()  # what a client says of itself (client_id, scope): not used
            return self._json(200, gateway.device_start(self._verification_uri()),
                              {"Cache-Control": "no-store"})
        if path == INTROSPECT:
            token = self._auth_body()[0].get("token")
            if not isinstance(token, str) or not token or len(token) > 4096:
                raise ApiError(400, "token must be an access token", "invalid_request", "token")
            return self._json(200, gateway.introspect(token), {"Cache-Control": "no-store"})
        return self._verify()

    def _verify(self) -> None:
        """The user completes a device-code login: JSON in and out, or the page's form."""
        fields, form = self._auth_body()
        user_code, username = fields.get("user_code"), fields.get("username")
        try:
            for name in ("user_code", "username", "passcode"):
                if not isinstance(fields.get(name), str) or not fields[name].strip():
                    raise ApiError(400, f"{name} is missing", "invalid_request", name)
            answer = self.server.gateway.device_verify(user_code.strip(), username.strip(),
                                                       fields["passcode"].strip())
        except ApiError as err:
            if not form:
                raise
            return self._page(err.status, device.page(
                user_code[:32] if isinstance(user_code, str) else "",
                username[:32] if isinstance(username, str) else "", err.message))
        if form:
            return self._page(200, device.page(
                message=f"Logged in as {answer['user']}. You may close this page: the helper "
                        "collects the tokens.", ok=True))
        return self._json(200, answer, {"Cache-Control": "no-store"})

    def _page(self, status: int, text: str) -> None:
        self._send(status, text.encode(), "text/html; charset=utf-8", device.PAGE_HEADERS)

    def _verification_uri(self) -> str:
        """Where the user enters the code: this gateway, by the name the client used."""
        host = self.headers.get("Host", "")
        if not _HOST.match(host):
            host = PUBLIC_HOST
        return f"{'https' if self.server.tls else 'http'}://{host}{VERIFY}"

    def _auth_body(self) -> tuple[dict, bool]:
        """An auth route's fields (a JSON object or a form) and whether it was a form."""
        if self.headers.get("Content-Length", "").strip() == "0" \
                and "Transfer-Encoding" not in self.headers:
            self.body_read = True
            return {}, False
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != FORM:
            return self._json_body(), False
        raw = self._read_body((FORM,))
        try:
            fields = parse_qs(raw.decode(), keep_blank_values=True, max_num_fields=20)
        except (ValueError, UnicodeDecodeError) as err:
            raise ApiError(400, f"the form is not valid: {err}", "invalid_request") from None
        return {key: values[0] for key, values in fields.items()}, True

    def _token(self) -> None:
        gateway = self.server.gateway
        body = self._auth_body()[0]
        grant = body.get("grant_type")
        if grant == "munge":
            scheme, _, credential = self.headers.get("Authorization", "").partition(" ")
            if scheme.upper() != "MUNGE" or not credential.strip():
                raise ApiError(401, "A session starts with a MUNGE credential of the user "
                                    "(`Authorization: MUNGE <credential>`, made by `munge -n` "
                                    "on a login node): run `python inference_auth_token.py "
                                    "authenticate` there.", "unauthorized")
            try:
                uid = self.server.identify(credential.strip())
            except MungeError as err:
                raise ApiError(401, f"The MUNGE credential was refused: {err}",
                               "unauthorized") from None
            return self._json(200, gateway.start_session(uid))
        if grant == "refresh_token":
            token = body.get("refresh_token")
            if not isinstance(token, str) or not token or len(token) > 4096:
                raise ApiError(400, "refresh_token must be the session's refresh token",
                               "invalid_request", "refresh_token")
            return self._json(200, gateway.refresh(token))
        if grant == device.GRANT_TYPE:
            code = body.get("device_code")
            if not isinstance(code, str) or not code or len(code) > 256:
                raise device.OAuthError(400, "device_code must be the code POST /auth/device "
                                             "gave", "invalid_request")
            return self._json(200, gateway.device_token(code), {"Cache-Control": "no-store"})
        raise ApiError(400, f"grant_type must be munge, refresh_token or {device.GRANT_TYPE}, "
                            f"not {grant!r}", "unsupported_grant_type", "grant_type")

    def _json_body(self) -> dict:
        try:
            body = json.loads(self._read_body())
        except (ValueError, UnicodeDecodeError) as err:
            raise ApiError(400, f"the body is not valid JSON: {err}", "invalid_json") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object", "invalid_request")
        return body

    # --- chat completions -------------------------------------------------------------------
    def _read_body(self, kinds: tuple[str, ...] = (JSON,)) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ApiError(411, "a chunked body is not accepted: send Content-Length",
                           "length_required")
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise ApiError(411, "the request has no Content-Length", "length_required")
        try:
            length = int(raw)
        except ValueError:
            raise ApiError(400, f"Content-Length {raw!r} is not a number",
                           "invalid_request") from None
        limit = self.server.gateway.config.max_body_bytes
        if length > limit or length < 0:
            raise ApiError(413, f"the request body ({length} bytes) is larger than the "
                                f"{limit} bytes the service accepts", "request_too_large")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind not in kinds:
            raise ApiError(415, f"Content-Type must be {' or '.join(kinds)}, not "
                                f"{kind or 'none'!r}", "unsupported_media_type")
        body = self.rfile.read(length)
        self.body_read = len(body) == length
        if not self.body_read:
            raise ApiError(400, "the request body ended early", "invalid_request")
        return body

    def _chat(self, user: str) -> None:
        gateway = self.server.gateway
        try:
            body = json.loads(self._read_body())
        except (ValueError, UnicodeDecodeError) as err:
            raise ApiError(400, f"the body is not valid JSON: {err}", "invalid_json") from None
        request = schema.parse_chat(body)
        served = gateway.served(request.model)
        release = gateway.begin(user)
        try:
            gateway.ensure_live(served)
            config, backend = served.config, served.backend
            prompt = (backend.prompt_ids(request.messages)
                      if isinstance(backend, LocalBackend) else [])
            max_tokens = schema.check_lengths(request, len(prompt), config.context_length,
                                              config.max_tokens_limit, config.default_max_tokens)
            events = backend.run(request, max_tokens, prompt)
            try:
                if request.stream:
                    self._stream(request, events)
                else:
                    self._complete(request, events)
            finally:
                events.close()
        finally:
            release()

    def _complete(self, request: schema.ChatRequest, events) -> None:
        texts, finished = [], None
        for event in events:
            if isinstance(event, Piece):
                texts.append(event.text)
            elif isinstance(event, Finished):
                finished = event
        use = schema.usage(finished.prompt_tokens, finished.completion_tokens)
        self._json(200, schema.completion(schema.new_id(), request.model, "".join(texts),
                                          finished.reason, use))
        self.server.gateway.count("completed")

    def _event(self, data) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(f"data: {payload}\n\n".encode())
        self.wfile.flush()

    def _stream(self, request: schema.ChatRequest, events) -> None:
        gateway = self.server.gateway
        ident, created, model = schema.new_id(), int(time.time()), request.model
        first = next(events)  # an upstream's refusal is still a JSON error, before the stream
        self.close_connection = self.streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self._event(schema.chunk(ident, model, created, {"role": "assistant", "content": ""}))
            event = first
            while True:
                if isinstance(event, Piece):
                    self._event(schema.chunk(ident, model, created, {"content": event.text}))
                elif isinstance(event, Finished):
                    self._event(schema.chunk(ident, model, created, {}, event.reason))
                    if request.include_usage:
                        self._event(schema.usage_chunk(ident, model, created, schema.usage(
                            event.prompt_tokens, event.completion_tokens)))
                    break
                event = next(events)
            self._event("[DONE]")
            gateway.count("completed")
        except (*GONE, TimeoutError):  # the client went away or stopped reading
            gateway.count("cancelled")
        except ApiError as err:  # the upstream broke off: tell the client in the stream
            self._safely(self._event, err.body())
            gateway.count("failed")


def serve(gateway: Gateway, host: str, port: int, tls: ssl.SSLContext | None = None,
          identify: identity.Verifier | None = None) -> GatewayServer:
    """The server, bound (port 0: any free port); the caller runs serve_forever."""
    return GatewayServer((host, port), gateway, tls, identify)


def drop_privileges(user: str) -> None:
    """Run as `user` from now on (its uid, gid and no other groups)."""
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aitestbed.metis.server",
        description="The SambaNova Metis (SN40L) inference gateway: OpenAI-compatible chat "
                    "completions from small models trained by aitestbed, at the ALCF "
                    "Inference Service's paths.")
    parser.add_argument("--config", required=True, help="the gateway's YAML configuration "
                        "(see aitestbed.metis.config)")
    parser.add_argument("--host", help="address to listen on (default: the config's)")
    parser.add_argument("--port", type=int, help="port to listen on (default: the config's)")
    parser.add_argument("--certfile", help="serve TLS with this certificate (PEM; its chain "
                        "after it)")
    parser.add_argument("--keyfile", help="the certificate's private key (PEM)")
    parser.add_argument("--user", help="run as this user once the port is bound and the key "
                        "read (started as root)")
    args = parser.parse_args(argv)
    if bool(args.certfile) != bool(args.keyfile):
        parser.error("--certfile and --keyfile go together")
    try:
        tls = tls_context(args.certfile, args.keyfile) if args.certfile else None
    except (OSError, ssl.SSLError) as err:
        print(f"metis gateway: cannot use the certificate {args.certfile} and key "
              f"{args.keyfile}: {getattr(err, 'strerror', None) or err}", file=sys.stderr)
        return 2
    if args.user:
        try:
            pwd.getpwnam(args.user)
        except KeyError:
            print(f"metis gateway: no user {args.user!r} here", file=sys.stderr)
            return 2
    try:
        import torch

        torch.set_num_threads(1)  # many small streams: one thread each is faster
        config = config_module.load(args.config)
        gateway = Gateway(config)
        server = serve(gateway, args.host or config.host,
                       config.port if args.port is None else args.port, tls)
    except (config_module.ConfigError, lm.ModelError, TimeScaleError) as err:
        print(f"metis gateway: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"metis gateway: cannot listen on {args.host or config.host}:"
              f"{config.port if args.port is None else args.port}: {err.strerror or err}",
              file=sys.stderr)
        return 2
    if args.user:
        try:
            drop_privileges(args.user)
        except OSError as err:
            print(f"metis gateway: cannot run as {args.user}: {err.strerror or err}",
                  file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    states = ", ".join(f"{name} ({phase})" for name, phase in gateway.states().items())
    print(f"metis gateway: {server.url}{API} serving {states}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
