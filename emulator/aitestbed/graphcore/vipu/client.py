"""Talk to the V-IPU server (IPUOF_VIPU_API_HOST / IPUOF_VIPU_API_PORT).

The POD's server is `vipu` on the cluster network. ALCF's guide gives its address as
10.1.3.101 (`export IPUOF_VIPU_API_HOST=10.1.3.101`; poprun's "V-IPU server address
picked up from 'vipu': 10.1.3.101:8090"), so that address, on port 8090, is an alias
of the POD's own server: `server_host` decides where a client connects, and nothing
is ever sent to 10.1.3.101 (the testbed sends no traffic off its own network; at ALCF
nothing but the V-IPU server listens there, so another port gets no answer, without
trying). Requests never go through an HTTP proxy from the environment either: the
server is on the cluster's own network.

A user's reads carry a MUNGE credential of the calling process (aitestbed.node.munge),
made afresh for each request, so the server shows a user the partitions of their own
jobs; Slurm's hooks use the administrator's token instead.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable

from aitestbed.node import munge

DEFAULT_PORT = 8090
POD_SERVER = "vipu"  # the POD's V-IPU server on the cluster network (its DNS alias)
DOCUMENTED_ADDRESS = "10.1.3.101"  # the same server, as ALCF's guide names it
# On the controller: the server's state directory (roles/vipu_server) and its token.
ADMIN_TOKEN = "/var/lib/vipu/admin.token"


class VipuError(RuntimeError):
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


def server_host(host: str, port: int) -> str | None:
    """Where a client given this V-IPU address connects: the guide's 10.1.3.101 on port 8090
    is the POD's own server (`vipu`); on another port nothing answers there (None); any
    other address is itself."""
    if host.strip() != DOCUMENTED_ADDRESS:
        return host
    return POD_SERVER if port == DEFAULT_PORT else None


def shown_address(host: str, resolved: str) -> str:
    """The POD's server as a tool prints it (poprun's "picked up from 'vipu'" line): its
    documented address, 10.1.3.101; any other server by the address it resolved to."""
    return DOCUMENTED_ADDRESS if server_host(host, DEFAULT_PORT) == POD_SERVER else resolved


# No HTTP proxy: a user's http_proxy must not carry V-IPU requests off the cluster network.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class VipuClient:
    def __init__(self, host: str | None = None, port: int | None = None, timeout: float = 10,
                 token: str | None = None, credential: Callable[[], str] | None = None):
        self.host = host or os.environ.get("IPUOF_VIPU_API_HOST") or POD_SERVER
        self.port = int(port or os.environ.get("IPUOF_VIPU_API_PORT") or DEFAULT_PORT)
        self.connect_to = server_host(self.host, self.port)
        self.timeout = timeout
        self.token = token  # the administrator's: only Slurm's hooks change partitions
        # A user's: who reads (default `munge -n`; MungeError when none can be made).
        self.credential = credential

    @classmethod
    def admin(cls, host: str, token_file: str = ADMIN_TOKEN) -> VipuClient:
        """The controller's client (Slurm's prolog and epilog), with the server's token."""
        with open(token_file) as source:
            return cls(host=host, token=source.read().strip())

    def _call(self, method: str, path: str, body: dict | None = None,
              authenticate: bool = True) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        no_credential = ""
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        elif authenticate:
            try:
                headers["Authorization"] = f"MUNGE {(self.credential or munge.encode)()}"
            except munge.MungeError as err:  # the server says what it needs
                no_credential = f" (munge -n: {err})"
        if self.connect_to is None:
            raise VipuError(f"V-IPU server {self.host}:{self.port} does not answer: the POD's "
                            f"V-IPU server ({DOCUMENTED_ADDRESS} in ALCF's guide) listens on "
                            f"port {DEFAULT_PORT} only")
        request = urllib.request.Request(
            f"http://{self.connect_to}:{self.port}/api/v1{path}", data=data, method=method,
            headers=headers)
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            try:
                message = json.loads(err.read()).get("error", str(err))
            except ValueError:
                message = str(err)
            if err.code == 401:
                message += no_credential
            raise VipuError(message, err.code) from None
        except (urllib.error.URLError, OSError) as err:
            raise VipuError(f"V-IPU server {self.host}:{self.port} does not answer: "
                            f"{getattr(err, 'reason', err)}") from None

    def ping(self) -> dict:
        return self._call("GET", "/ping", authenticate=False)

    def pod(self) -> dict:
        return self._call("GET", "/pod", authenticate=False)

    def partitions(self) -> list[dict]:
        """The partitions this user's jobs own (every one for the administrator)."""
        return self._call("GET", "/partitions")["partitions"]

    def partition(self, name: str) -> dict:
        return self._call("GET", f"/partitions/{name}")

    def create_partition(self, name: str, hosts: dict[str, int], job_id: str = "",
                         user: str = "") -> dict:
        return self._call("PUT", f"/partitions/{name}",
                          {"hosts": hosts, "job_id": job_id, "user": user})

    def remove_partition(self, name: str) -> None:
        self._call("DELETE", f"/partitions/{name}")


if __name__ == "__main__":
    # `python -m aitestbed.graphcore.vipu.client ping`: the service's health check.
    if sys.argv[1:] != ["ping"]:
        sys.exit("usage: python -m aitestbed.graphcore.vipu.client ping")
    try:
        print(json.dumps(VipuClient(host=os.environ.get("IPUOF_VIPU_API_HOST", "localhost"))
                         .ping()))
    except VipuError as err:
        print(err, file=sys.stderr)
        sys.exit(1)
