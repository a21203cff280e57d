"""Talk to the V-IPU server (IPUOF_VIPU_API_HOST / IPUOF_VIPU_API_PORT).

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
# On the controller: the server's state directory (roles/vipu_server) and its token.
ADMIN_TOKEN = "/var/lib/vipu/admin.token"


class VipuError(RuntimeError):
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class VipuClient:
    def __init__(self, host: str | None = None, port: int | None = None, timeout: float = 10,
                 token: str | None = None, credential: Callable[[], str] | None = None):
        self.host = host or os.environ.get("IPUOF_VIPU_API_HOST", "vipu")
        self.port = int(port or os.environ.get("IPUOF_VIPU_API_PORT", DEFAULT_PORT))
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
        request = urllib.request.Request(
            f"http://{self.host}:{self.port}/api/v1{path}", data=data, method=method,
            headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
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
