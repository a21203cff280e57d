"""The V-IPU server: an HTTP/JSON service owning one POD's IPUs and partitions.

  GET    /api/v1/ping                    {"status": "ok"}
  GET    /api/v1/pod                     hosts and their IPU ids
  GET    /api/v1/partitions              the partitions the caller may read
  GET    /api/v1/partitions/NAME         one partition (404 when absent, 403 when not yours)
  PUT    /api/v1/partitions/NAME         {"hosts": {host: count}, "job_id", "user"}
  DELETE /api/v1/partitions/NAME
Partitions are saved to the state directory on every change, so a restart of
the server (or of its host) keeps the partitions of running jobs (the atomic save
and the refusals' statuses are every node daemon's: aitestbed.node.daemon).

Only Slurm's PrologSlurmctld and EpilogSlurmctld change partitions, as at ALCF:
PUT and DELETE need the administrator's token (`Authorization: Bearer ...`), which
the server keeps in its state directory readable by root and SlurmUser only
(admin.token, made at its first start).

Users' tools only read, and only their own jobs' partitions: a request carries a
MUNGE credential (`Authorization: MUNGE <credential>`, made by `munge -n` on any node
of the cluster, as Slurm's own commands prove who runs them), and a partition is
read by the user whose job it belongs to. The administrator's token, root's
credential, and requests from the server's own host (the controller, where users do
not log in) read every partition.
"""

from __future__ import annotations

import argparse
import grp
import hmac
import ipaddress
import os
import pwd
import secrets
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

from aitestbed.graphcore.vipu.pod import Partition, Pod, PodError
from aitestbed.node import munge
from aitestbed.node.daemon import JsonHandler, load_json, save_json

API = "/api/v1"
TOKEN_FILE = "admin.token"
FORBIDDEN = "only Slurm's prolog and epilog (the controller's SlurmUser) may change partitions"
NO_CREDENTIAL = ("the V-IPU server answers only the cluster's users: this request carries no "
                 "MUNGE credential (the Poplar SDK's tools send one; run them on a node of the "
                 "Graphcore cluster)")
NOT_YOURS = ("partition {name} belongs to another user's job: a V-IPU partition is read by "
             "the owner of its job only")


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a user munge vouches for, or the administrator."""

    user: str | None = None
    admin: bool = False


def may_read(caller: Caller, partition: Partition) -> bool:
    """The administrator reads every partition; a user those of their own jobs."""
    return caller.admin or bool(caller.user and caller.user == partition.user)


def user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def admin_token(state_dir: Path, group: str = "slurm") -> str:
    """The administrator's token: made once, readable by root and `group` only."""
    path = state_dir / TOKEN_FILE
    if not path.is_file():
        staged = path.with_suffix(".new")
        with os.fdopen(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        if os.geteuid() == 0:
            try:
                os.chown(staged, 0, grp.getgrnam(group).gr_gid)
            except KeyError:  # no such group here: root only
                pass
        os.chmod(staged, 0o640)
        os.replace(staged, path)
    return path.read_text().strip()


class VipuServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], pod: Pod, state_dir: Path, *,
                 identify: Callable[[str], int] = munge.decode, local_reads_all: bool = True):
        super().__init__(address, _Handler)
        self.pod = pod
        self.token = admin_token(state_dir)
        self.identify = identify  # a MUNGE credential -> the uid that made it (MungeError)
        self.local_reads_all = local_reads_all
        self.lock = threading.Lock()
        self.state_file = state_dir / "partitions.json"
        saved = load_json(self.state_file)
        if saved is not None:
            self.pod.load_partitions(saved)

    def save(self) -> None:
        save_json(self.state_file, self.pod.to_dict())


class _Handler(JsonHandler):
    server: VipuServer

    def _partition_name(self) -> str | None:
        prefix = f"{API}/partitions/"
        return self.path[len(prefix):] if self.path.startswith(prefix) else None

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        pod = self.server.pod
        if self.path == f"{API}/ping":
            return self.reply(200, {"status": "ok"})
        if self.path == f"{API}/pod":
            with self.server.lock:
                return self.reply(200, {"hosts": pod.hosts, "size": pod.size})
        name = self._partition_name()
        if self.path != f"{API}/partitions" and not name:
            return self.reply(404, {"error": f"not found: {self.path}"})
        caller = self._caller()
        if caller is None:
            return None
        with self.server.lock:
            if not name:
                return self.reply(200, {"partitions": [
                    asdict(p) for p in pod.partitions.values() if may_read(caller, p)]})
            partition = pod.partitions.get(name)
            if partition is None:
                return self.reply(404, {"error": f"not found: {self.path}"})
            if not may_read(caller, partition):
                return self.reply(403, {"error": NOT_YOURS.format(name=name)})
            return self.reply(200, asdict(partition))

    def _is_admin_token(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.server.token.encode())

    def _caller(self) -> Caller | None:
        """Who asks (a reader), or None once refused with 401."""
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        if scheme == "Bearer":
            if self._is_admin_token(value):
                return Caller(admin=True)
            self.reply(401, {"error": "the token given is not the V-IPU server's"})
            return None
        if scheme.upper() == "MUNGE":
            try:
                uid = self.server.identify(value)
            except munge.MungeError as err:
                self.reply(401, {"error": f"the MUNGE credential was refused: {err}"})
                return None
            return Caller(admin=True) if uid == 0 else Caller(user=user_name(uid))
        if self.server.local_reads_all and _is_loopback(self.client_address[0]):
            return Caller(admin=True)  # the controller itself: root and Slurm's daemons
        self.reply(401, {"error": NO_CREDENTIAL})
        return None

    def _authorized(self) -> bool:
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        if scheme == "Bearer" and self._is_admin_token(token):
            return True
        self.reply(403, {"error": FORBIDDEN})
        return False

    def do_PUT(self) -> None:  # noqa: N802
        name = self._partition_name()
        if not self._authorized():
            return None
        try:
            body = self.read_json()
            counts = {str(h): int(c) for h, c in body["hosts"].items()}
        except (ValueError, KeyError, AttributeError, TypeError):
            return self.reply(400, {"error": "expected {\"hosts\": {host: count}}"})
        if not name:
            return self.reply(404, {"error": f"not found: {self.path}"})
        with self.server.lock:
            try:
                partition = self.server.pod.create(name, counts, str(body.get("job_id", "")),
                                                   str(body.get("user", "")))
            except PodError as err:
                return self.reply_error(err)
            self.server.save()
        self.reply(201, asdict(partition))

    def do_DELETE(self) -> None:  # noqa: N802
        name = self._partition_name()
        if not self._authorized():
            return None
        with self.server.lock:
            try:
                self.server.pod.remove(name or "")
            except PodError as err:
                return self.reply_error(err)
            self.server.save()
        self.reply(200, {"removed": name})


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="vipu-server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--bind", default="0.0.0.0")  # noqa: S104 - the cluster network only
    parser.add_argument("--state", type=Path, required=True, help="where partitions are saved")
    parser.add_argument("--gres-conf", type=Path, required=True,
                        help="Slurm's gres.conf: its ipu lines are the POD's IPUs")
    args = parser.parse_args(argv)
    args.state.mkdir(parents=True, exist_ok=True)
    server = VipuServer((args.bind, args.port), Pod.from_files(args.gres_conf), args.state)
    print(f"vipu-server: {server.pod.size} IPUs on {len(server.pod.hosts)} hosts, "
          f"{len(server.pod.partitions)} partitions, port {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
