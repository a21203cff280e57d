"""The instructor's page (`aitestbed classroom serve`): one self-refreshing page (Flask).

The page is rendered on the server from the Watcher's last snapshot (watcher.py) and
reloads itself with `<meta http-equiv="refresh">`: no JavaScript at all, CSS inline.
/api/room.json is the same snapshot as JSON, for scripts and tests.
"""

from __future__ import annotations

import errno
import ipaddress
import math
import socket
import sys
import threading
import time

from flask import Flask, jsonify, render_template, request
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from aitestbed.classroom.page import (
    FAILED,
    NOT_STARTED,
    PASSED,
    STARTED,
    STATUSES,
    Page,
)
from aitestbed.classroom.watcher import Watcher
from aitestbed.host.errors import AitestbedError
from aitestbed.host.naming import LABEL_CLUSTER

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700
DEFAULT_INTERVAL = 5.0
CLASSES = {PASSED: "passed", FAILED: "failed", STARTED: "started", NOT_STARTED: "todo"}
SHORT = {PASSED: "passed", FAILED: "failed", STARTED: "started", NOT_STARTED: "–"}


def clock(epoch: float | None) -> str:
    """HH:MM:SS of an epoch, in this machine's time zone."""
    return time.strftime("%H:%M:%S", time.localtime(epoch)) if epoch else ""


def ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


Networks = list[ipaddress.IPv4Network | ipaddress.IPv6Network]
REFUSED = "the instructor's page is not served to the testbed's own nodes and jobs\n"


def cluster_networks() -> Networks:
    """The subnets of every testbed cluster's Docker networks on this engine (their nodes'
    and jobs' addresses): [] when the engine cannot be asked."""
    from aitestbed.host.engine import connect  # noqa: PLC0415 - only for a page served wide

    try:
        found = connect().networks.list(filters={"label": LABEL_CLUSTER})
    except Exception:  # noqa: BLE001 - no engine to ask: no cluster network to refuse
        return []
    subnets = []
    for network in found:
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []:
            try:
                subnets.append(ipaddress.ip_network(config.get("Subnet", ""), strict=False))
            except ValueError:
                continue
    return subnets


def make_app(watcher: Watcher, now=time.time, refused: Networks | None = None) -> Flask:
    """The page's app: `/` renders the watcher's last snapshot, `/api/room.json` gives it.
    A request from an address in `refused` (the clusters' own networks) gets 403."""
    app = Flask(__name__)
    refused = list(refused or [])

    @app.before_request
    def not_to_the_cluster():
        try:
            address = ipaddress.ip_address(request.remote_addr or "")
        except ValueError:
            return None
        if any(address in network for network in refused):
            return REFUSED, 403, {"Content-Type": "text/plain; charset=utf-8"}
        return None

    app.jinja_env.globals.update(clock=clock, ago=ago, classes=CLASSES, short=SHORT,
                                 statuses=STATUSES)

    @app.get("/")
    def page():
        snapshot: Page = watcher.page
        age = now() - snapshot.taken if snapshot.taken else 0.0
        refresh = max(1, math.ceil(snapshot.interval))
        stale = bool(snapshot.taken) and age > 3 * snapshot.interval + 10
        body = render_template("page.html", page=snapshot, age=age, refresh=refresh,
                               stale=stale, since=clock(snapshot.since))
        return body, 200, {"Cache-Control": "no-store"}

    @app.get("/api/room.json")
    def room():
        snapshot: Page = watcher.page
        data = snapshot.to_json()
        data["age"] = round(now() - snapshot.taken, 3) if snapshot.taken else None
        response = jsonify(data)
        response.headers["Cache-Control"] = "no-store"
        return response

    return app


class _QuietHandler(WSGIRequestHandler):
    """No line per request (the page reloads itself every few seconds); errors still."""

    def log_request(self, code="-", size="-"):
        if str(code).startswith(("4", "5")) and str(code) != "404":
            super().log_request(code, size)


class PageServer:
    """The page served from a thread of its own (serve() runs one in the foreground)."""

    def __init__(self, watcher: Watcher, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 refused: Networks | None = None):
        self.watcher = watcher
        self.server: BaseWSGIServer = bind(make_app(watcher, refused=refused), host, port)
        self.host, self.port = host, self.server.port
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> PageServer:
        self.watcher.start()
        self._thread = threading.Thread(target=self.server.serve_forever, name="classroom-web",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.watcher.stop()


def bind(app: Flask, host: str, port: int) -> BaseWSGIServer:
    """A threaded server bound to host:port, or an AitestbedError saying why not.

    The socket is bound here, then handed to Werkzeug (which would print and exit on a
    port in use)."""
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise AitestbedError(f"--port {port} is not a port number (0-65535)")
    sock = listen(host, port)
    try:
        return make_server(host, port, app, threaded=True, request_handler=_QuietHandler,
                           fd=sock.fileno())
    except OSError as err:
        raise AitestbedError(f"cannot listen on {host}:{port}: {err.strerror or err}"
                             ) from None
    finally:
        sock.close()  # the server holds a duplicate of it


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (the family Werkzeug will expect)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4]
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise AitestbedError(f"cannot listen on {host}:{port}: {reason}: choose another "
                             "--host") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise AitestbedError(f"port {host}:{port} is in use: choose another with --port"
                                 ) from None
        if err.errno == errno.EACCES:
            raise AitestbedError(f"port {host}:{port} needs privileges: choose a port above "
                                 "1023 with --port") from None
        raise AitestbedError(f"cannot listen on {host}:{port}: {err.strerror or err}: choose "
                             "another --host or --port") from None
    return sock


def serve(cluster: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          interval: float = DEFAULT_INTERVAL) -> None:
    """Serve cluster's instructor page until interrupted (^C: KeyboardInterrupt goes on
    to the caller once the server and the watcher are stopped). The port is bound before
    anything else starts: one in use is an AitestbedError, nothing is left running."""
    if not (isinstance(interval, int | float) and math.isfinite(interval) and interval > 0):
        raise AitestbedError(f"--interval {interval} is not a number of seconds above 0")
    local = host in ("127.0.0.1", "localhost", "::1")
    # Served wider than this machine, the testbed's own nodes (and every job on them)
    # would reach it through their networks' gateways: those addresses are refused.
    server = PageServer(Watcher.for_cluster(cluster, interval), host, port,
                        refused=None if local else cluster_networks())
    if not local:
        print(f"note: the page is open to every machine that reaches {host}:{server.port}, "
              "but not to the testbed's own nodes and jobs (refused); it shows user names "
              "and jobs", file=sys.stderr)
    print(f"the instructor's page of cluster {cluster!r}: {server.url} (a new snapshot every "
          f"{interval:g} s; ^C stops)", flush=True)
    try:
        server.watcher.start()
        server.server.serve_forever()
    finally:
        server.server.server_close()
        server.watcher.stop()
