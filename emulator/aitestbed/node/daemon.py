"""What every node daemon shares: the JSON wire, the saved state, the daemon skeleton.

A daemon is state / wire / client (moto's models / responses split): its room holds
the model, the routes and the messages; this module holds the rest.
- The wire: `JsonHandler` reads and answers JSON over HTTP (TCP or a Unix socket);
  `UnixJsonServer` / `UnixJsonHandler` add the Unix socket and the caller's
  credentials (`Peer`), and `call_unix_json` is the other end.
- The state: `save_json` writes the model atomically on every change, so a restart
  of the daemon (or of its node) finds the state a crash cannot have half-written;
  `StateError` and its three kinds (`PlacementError` 409, `ForbiddenError` 403,
  `NotFoundError` 404) are what a model refuses, each with the HTTP status its
  client sees; `ProcessSessions` keeps a model's per-process sessions (`JobSession`)
  and ends those whose process is gone; `NodeDevices` adds the jobs that hold a node's
  devices and the job a session opens in.
- The skeleton: `UnixJsonDaemon` owns the state file, journal and lock, and its
  `DaemonHandler` runs every request the same way (decode, lock, reap what died,
  route to the room's handler, save after a change, a state error to its status);
  `NodeDevicesHandler` answers the routes every device daemon shares (node, jobs,
  closing a session);
  `UnixJsonClient` is the client side (answers other than 200 and a daemon that is
  not running as the room's own error classes, derived from `DaemonError`).
Standard library only: this runs on every node, inside the daemons' own Python.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import pwd
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from aitestbed.node.processes import process_alive

T = TypeVar("T")


def save_json(path: Path, data: Any, *, sort_keys: bool = False) -> None:
    """Write `data` as indented JSON to `path`: a temporary file beside it, then a rename.

    The rename is atomic, so a reader (or the daemon after a crash) sees the old
    file or the new one, never a half-written one, and no temporary file is left.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")
    tmp.replace(path)


def load_json(path: Path) -> Any | None:
    """What `save_json` wrote to `path`, None when there is no such file (a first start)."""
    return json.loads(path.read_text()) if path.is_file() else None


# --- what a daemon's model refuses, and the status its client sees ------------------------
class StateError(RuntimeError):
    """A request the model refuses; `status` is the HTTP status its client is answered."""

    status: int = 409

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class PlacementError(StateError):
    """A session or a reservation that this node cannot satisfy (HTTP 409)."""

    status = 409


class ForbiddenError(StateError):
    """A request about someone else's job or session (HTTP 403)."""

    status = 403


class NotFoundError(StateError):
    """No such job or session (HTTP 404)."""

    status = 404


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads and answers JSON, on a TCP or a Unix socket.

    `read_json()` raises ValueError (json.JSONDecodeError) on a body that is not
    JSON; each daemon turns that into its own 400 reply.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base's name
        pass  # one line per request would drown the service log

    def reply(self, status: int, body: dict | list | None = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply_error(self, err: StateError) -> None:
        """Answer a refusal of the model with its status and `error_text`."""
        self.reply(err.status, {"error": self.error_text(err)})

    def error_text(self, err: StateError) -> str:
        return str(err)

    def read_json(self) -> Any:
        """The request's JSON body; {} when it has none."""
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}


def append_journal(path: Path, event: str, **fields) -> None:
    """One JSON line per event in a root-only journal (created 0600)."""
    entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, **fields}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as journal:
        journal.write(json.dumps(entry, sort_keys=True) + "\n")


class UnixJsonServer(socketserver.ThreadingUnixStreamServer):
    """A daemon's Unix socket, open to every user (mode 0666): who calls is known from the
    socket itself (UnixJsonHandler.peer), never from the request."""

    daemon_threads = True

    def __init__(self, socket_path: str | Path, handler: type[BaseHTTPRequestHandler]):
        self.socket_path = Path(socket_path)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        super().__init__(str(self.socket_path), handler)
        self.socket_path.chmod(0o666)

    def server_close(self) -> None:
        super().server_close()
        self.socket_path.unlink(missing_ok=True)


class Peer(NamedTuple):
    """Who calls a Unix socket, as the kernel says (never as the request says)."""

    pid: int
    uid: int
    user: str

    @property
    def root(self) -> bool:
        return self.uid == 0


class UnixJsonHandler(JsonHandler):
    """JsonHandler on a UnixJsonServer: the caller's credentials and the path's parts."""

    def address_string(self) -> str:
        return "unix"

    def peer(self) -> Peer:
        """The caller's (pid, uid, user name) from the kernel (SO_PEERCRED)."""
        pid, uid, _ = struct.unpack("3i", self.request.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
        return Peer(pid, uid, user)

    def path_parts(self) -> list[str]:
        return [p for p in self.path.split("?")[0].split("/") if p]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def call_unix_json(socket_path: str, method: str, path: str, body: dict | None = None,
                   timeout: float = 10.0) -> tuple[int, Any]:
    """One request to a UnixJsonServer: (HTTP status, decoded JSON reply). Raises
    FileNotFoundError or ConnectionRefusedError when no daemon listens there."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload else {}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


# --- a model's sessions: one per process, ended with it -----------------------------------
class ProcessSession(Protocol):
    id: str
    pid: int
    start_ticks: int  # the process's start time: a reused PID is another process


@dataclass
class JobSession:
    """A process's hold on devices its scheduler job was given (snd's tiles, tspd's cards:
    the room's session adds what it holds)."""

    id: str
    pid: int
    start_ticks: int  # the process's start time: a reused PID is another process
    user: str
    command: str
    job_id: str


S = TypeVar("S", bound=ProcessSession)


class ProcessSessions(Generic[S]):
    """The sessions part of a daemon's model (a dataclass with `sessions: dict[str, S]` and
    `_ids: itertools.count`): ids "PID-N", lookup by owner, and the end of the sessions
    whose process is gone."""

    sessions: dict[str, S]
    _ids: itertools.count

    def new_session_id(self, pid: int) -> str:
        return f"{pid}-{next(self._ids)}"

    def session(self, session_id: str, pid: int | None = None) -> S:
        """The session; NotFoundError when there is none, ForbiddenError when `pid` (None:
        root, who may touch any) is not its process."""
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFoundError(session_id)
        if pid is not None and pid != session.pid:
            raise ForbiddenError(f"session {session_id} belongs to PID {session.pid}")
        return session

    def close_session(self, session_id: str, pid: int | None = None) -> None:
        self.session(session_id, pid)
        del self.sessions[session_id]

    def reap(self, alive: Callable[[int, int], bool]) -> list[str]:
        """End the sessions whose process is gone (a crash, a kill, the scheduler's
        cancel); returns their ids."""
        dead = [s.id for s in self.sessions.values() if not alive(s.pid, s.start_ticks)]
        for sid in dead:
            del self.sessions[sid]
        return dead

    def restore_sessions(self, sessions: Iterable[S]) -> None:
        """Sessions read back from the saved state; new ids continue after theirs."""
        for session in sessions:
            self.sessions[session.id] = session
        self._ids = itertools.count(1 + max((int(s.split("-")[1]) for s in self.sessions),
                                            default=-1))


class NodeDevices(ProcessSessions[S]):
    """A node's devices as its daemon owns them (snd's RDUs, tspd's cards): the sessions
    part, plus `node` (its name) and `jobs` (job id -> {"user", <the devices>}, reserved by
    the scheduler's prologue); a process opens its session inside its job."""

    node: str
    jobs: dict[str, dict]

    def job_for_session(self, job_id: str | None, key: str | None, user: str,
                        caller_is_root: bool, *, unallocated: str, device: str) -> dict:
        """The job a session of `user`'s process opens in: `key` (`job_id` as the daemon
        knows it) must hold `device`s on this node and be the user's (root: anyone's).
        PlacementError `unallocated` for a process in no job."""
        if not job_id:
            raise PlacementError(unallocated)
        job = self.jobs.get(key) if key is not None else None
        if job is None:
            raise PlacementError(f"job {job_id} holds no {device} on {self.node}")
        if job["user"] != user and not caller_is_root:
            raise ForbiddenError(f"job {key} belongs to {job['user']}, not {user}")
        return job


# --- the daemon skeleton --------------------------------------------------------------------
class DaemonModel(Protocol):
    def reap(self, alive: Callable[[int, int], bool]) -> list[str]: ...

    def to_dict(self) -> dict: ...


M = TypeVar("M", bound=DaemonModel)

STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"


class UnixJsonDaemon(UnixJsonServer, Generic[M]):
    """A node daemon on a Unix socket (mode 0666: every user's runtime asks): its model,
    kept in <state_dir>/state.json (sorted keys) and saved after every change, its journal
    (<state_dir>/journal.jsonl, root only) and the lock every request holds.

    `model_from(saved)` makes the model from the saved state (None on a first start);
    it runs before the socket is bound, so a state the model refuses binds nothing."""

    def __init__(self, socket_path: str | Path, state_dir: str | Path,
                 handler: type[DaemonHandler], model_from: Callable[[Any | None], M]):
        self.state_file = Path(state_dir) / STATE_FILE
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.journal_file = Path(state_dir) / JOURNAL_FILE
        self.lock = threading.Lock()
        self.model: M = model_from(load_json(self.state_file))
        super().__init__(socket_path, handler)

    def save(self) -> None:
        save_json(self.state_file, self.model.to_dict(), sort_keys=True)

    def journal(self, event: str, **fields) -> None:
        append_journal(self.journal_file, event, **fields)

    def serve(self) -> None:
        """Answer until stopped, then remove the socket."""
        try:
            self.serve_forever()
        finally:
            self.server_close()


Route = tuple[int, Any, bool]  # (HTTP status, reply, whether the model changed)


class DaemonHandler(UnixJsonHandler):
    """Every request the same way: decode the body (a JSON object), lock, reap the sessions
    whose process died, `route` (the room's), save if the model changed, answer; a bad
    request is 400, a StateError its own status. The room's handler only routes."""

    server: UnixJsonDaemon
    not_found: ClassVar[str] = "no such session or job"  # what a 404's message begins with

    def route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        raise NotImplementedError

    def no_route(self, method: str) -> Route:
        return 404, {"error": f"no such resource: {method} {self.path}"}, False

    @staticmethod
    def require_root(peer: Peer, refusal: str) -> None:
        if not peer.root:
            raise ForbiddenError(refusal)

    def error_text(self, err: StateError) -> str:
        return f"{self.not_found}: {err}" if isinstance(err, NotFoundError) else str(err)

    def handle_request(self, method: str) -> None:
        try:
            body = self.read_json() if method in ("POST", "PUT") else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            peer = self.peer()
            with self.server.lock:
                self.server.model.reap(process_alive)
                status, reply, changed = self.route(method, self.path_parts(), body, peer)
                if changed:
                    self.server.save()
            self.reply(status, reply)
        except (ValueError, KeyError, TypeError) as err:
            self.reply(400, {"error": f"bad request: {err}"})
        except StateError as err:
            self.reply_error(err)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self.handle_request("GET")

    def do_PUT(self) -> None:  # noqa: N802
        self.handle_request("PUT")

    def do_POST(self) -> None:  # noqa: N802
        self.handle_request("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self.handle_request("DELETE")


class NodeDevicesHandler(DaemonHandler):
    """The routes every device daemon answers the same (its model a `NodeDevices`): the
    node, its jobs (root: the scheduler's prologue reserves, its epilogue releases; the
    journal keeps each reservation) and closing a session (the caller's own; root any).
    The room routes the rest (`room_route`)."""

    prologue_only: ClassVar[str]  # the refusal of PUT/DELETE /jobs/ID to anyone but root
    reserve_count: ClassVar[str]  # the body's key of how many devices a job gets

    def route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        model = self.server.model
        match method, path:
            case "GET", ["node"]:
                return 200, model.describe(), False
            case "GET", ["jobs"]:
                return 200, model.jobs, False
            case "PUT", ["jobs", job_id]:
                self.require_root(peer, self.prologue_only)
                known = job_id in model.jobs
                job = model.reserve(job_id, str(body["user"]), int(body[self.reserve_count]))
                if not known:
                    self.server.journal("reserve", job=job_id, **job)
                return 200, job, not known
            case "DELETE", ["jobs", job_id]:
                self.require_root(peer, self.prologue_only)
                model.release(job_id)
                return 200, {}, True
            case "DELETE", ["sessions", session_id]:
                model.close_session(session_id, None if peer.root else peer.pid)
                return 200, {}, True
        return self.room_route(method, path, body, peer)

    def room_route(self, method: str, path: list[str], body: dict, peer: Peer) -> Route:
        raise NotImplementedError


# --- the client side ------------------------------------------------------------------------
class DaemonError(RuntimeError):
    """A daemon's answer other than 200: its message and HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class UnixJsonClient:
    """A daemon's client: the socket from the argument, `socket_env` or `default_socket`;
    each call one request. A daemon that does not listen raises `unavailable` ("<service>
    is not running on this host"), an answer other than 200 `error` with the daemon's
    message and status. The room names these, and its own routes (the node, jobs,
    release and close_session are every device daemon's)."""

    socket_env: ClassVar[str]
    default_socket: ClassVar[str]
    service: ClassVar[str]  # "the SN Devices Service (snd)"
    name: ClassVar[str]  # "snd", in "snd answered 500"
    error: ClassVar[type[DaemonError]]
    unavailable: ClassVar[type[DaemonError]]

    def __init__(self, socket_path: str | None = None, timeout: float = 10.0):
        self.socket_path = socket_path or os.environ.get(self.socket_env) or self.default_socket
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        try:
            status, data = call_unix_json(self.socket_path, method, path, body, self.timeout)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise self.unavailable(f"{self.service} is not running on this host "
                                   f"({self.socket_path}: {err.strerror})") from None
        if status != 200:
            message = data.get("error") if isinstance(data, dict) else None
            raise self.error(message or f"{self.name} answered {status}", status)
        return data

    def node(self) -> dict:
        return self._call("GET", "/node")

    def jobs(self) -> dict:
        return self._call("GET", "/jobs")

    def release(self, job_id: str) -> None:
        self._call("DELETE", f"/jobs/{job_id}")

    def close_session(self, session_id: str) -> None:
        self._call("DELETE", f"/sessions/{session_id}")

    @classmethod
    def when_up(cls, call: Callable[[Any], T], wait_s: float) -> T:
        """`call(client)`, tried again while the daemon is not running (it may be
        (re)starting with its node) for `wait_s` seconds at most."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return call(cls())
            except cls.unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    @classmethod
    def reserve_for_job(cls, reserve: Callable[[Any], T], release_stale: Callable[[Any], Any],
                        wait_s: float) -> T:
        """A job's prologue: `reserve(client)`; when the daemon answers 409 (too few
        free), `release_stale(client)` (the jobs the scheduler no longer has: an epilogue
        that never ran) and once more."""
        try:
            return cls.when_up(reserve, wait_s)
        except cls.error as err:
            if err.status != 409:
                raise
        cls.when_up(release_stale, wait_s)
        return cls.when_up(reserve, wait_s)
