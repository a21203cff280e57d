"""LocalJobRunner: appliance jobs as worker subprocesses on this machine.

For unit tests and for anyone without a cluster: select it with
CEREBRAS_APPLIANCE_RUNNER=cerebras_pytorch.appliance.local:LocalJobRunner (and
AITESTBED_CEREBRAS_SYSTEM=CS-3 for the current CS-3 systems instead of CS-2s). Each
runner keeps its compile root in a temporary directory for its lifetime, so an
execute job finds what the compile job of the same run wrote.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import aitestbed
from aitestbed.cerebras import wsjob

from .channel import connect
from .errors import ApplianceClientError, ApplianceUnknownError, from_message
from .runner import JOB_TYPES

CONNECT_TIMEOUT_SECONDS = 60.0
EXIT_TIMEOUT_SECONDS = 90.0
LOG_TAIL_LINES = 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _package_roots() -> list[str]:
    return list(dict.fromkeys(str(Path(module.__file__).resolve().parents[1])
                              for module in (sys.modules["cerebras_pytorch"], aitestbed)))


SYSTEM_MODEL_ENV = "AITESTBED_CEREBRAS_SYSTEM"


class LocalJobRunner:
    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="cerebras-appliance-")
        self.root = Path(self._tmp.name)
        self.compile_root = self.root / "compile"
        self.compile_root.mkdir()

    def run(self, job_type: str, request: dict, on_message: Callable[[dict], None]) -> dict:
        if job_type not in JOB_TYPES:
            raise ApplianceClientError(f"Unknown job type {job_type!r}")
        workdir = Path(tempfile.mkdtemp(prefix=f"{job_type}-", dir=self.root))
        (workdir / "request.json").write_text(json.dumps(request))
        port, token = _free_port(), wsjob.new_token()
        model = os.environ.get(SYSTEM_MODEL_ENV, "CS-2")  # CS-3: the current cluster
        kind = "cs3" if model == "CS-3" else "cs2"
        systems = [f"cer-{kind}-{i:02d}" for i in range(1, int(request.get("num_csx") or 1) + 1)]
        command = [sys.executable, "-m", "cerebras_pytorch.appliance.worker",
                   "--job-type", job_type, "--request", str(workdir / "request.json"),
                   "--port", str(port), "--compile-root", str(self.compile_root),
                   "--result", str(workdir / "result.json"), "--systems", ",".join(systems),
                   "--client-token-sha256", wsjob.token_hash(token), "--system-model", model]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(_package_roots())}
        final = None
        with open(workdir / "worker.log", "wb") as output:
            process = subprocess.Popen(command, cwd=workdir, env=env, stdout=output,
                                       stderr=subprocess.STDOUT)
            try:
                for message in connect("127.0.0.1", port, CONNECT_TIMEOUT_SECONDS, token,
                                       give_up=lambda: process.poll() is not None):
                    if message.get("type") in ("done", "error"):
                        final = message
                    else:
                        on_message(message)
                process.wait(timeout=EXIT_TIMEOUT_SECONDS)
            except ConnectionError:
                process.wait(timeout=EXIT_TIMEOUT_SECONDS)
            except BaseException:
                process.kill()
                process.wait()
                raise
        if final is None:
            raise ApplianceUnknownError(self._no_result(job_type, workdir, process.returncode))
        if final["type"] == "error":
            raise from_message(final)
        return final

    @staticmethod
    def _no_result(job_type: str, workdir: Path, returncode: int | None) -> str:
        result = workdir / "result.json"
        if result.is_file():
            return json.loads(result.read_text()).get("message", "")
        tail = (workdir / "worker.log").read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        return (f"The {job_type} job's worker exited with status {returncode} without a "
                "result:\n" + "\n".join(tail))
