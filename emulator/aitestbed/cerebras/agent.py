"""An appliance node's wsjob agent: runs the workloads the scheduler assigns to this node.

The management node's agent runs compile jobs, each CS-2 host's agent the
execute jobs on that system (status.node). A workload is cerebras_pytorch's
appliance worker, started in a session of its own as the appliance's service
user, in the job's work dir on /n1, with its ingress (the TCP port the client
streams from) written to the job's status.

Level-triggered and restartable: the worker's PID (with its start time) and
result are files in the work dir, so a restarted agent adopts the workloads
still running and settles the ones that ended while it was away; nothing is
left RUNNING with a system held. A cancel request stops the workload within
a second (SIGTERM to its session, then SIGKILL).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aitestbed.cerebras import config, wsjob
from aitestbed.cerebras.kubeapi import ApiError, Credentials, KubeApi, Unreachable
from aitestbed.node.processes import process_alive, process_start_ticks

TICK_SECONDS = 0.5
KILL_GRACE_SECONDS = 1.0
LOG_FILES = ("workload.log", "request.json", "result.json")
LOG_EXPORT_LIMIT = 700 * 1024  # a ConfigMap holds at most 1 MiB


def log(message: str) -> None:
    print(f"{wsjob.now()} wsjob-agent: {message}", flush=True)


@dataclass
class Workload:
    name: str
    pid: int
    start_ticks: int
    workdir: Path
    process: subprocess.Popen | None = None  # None when adopted after a restart

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return process_alive(self.pid, self.start_ticks)

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.alive():
                time.sleep(0.05)
            if not self.alive():
                return

    def result(self) -> tuple[bool, str]:
        try:
            data = json.loads((self.workdir / "result.json").read_text())
            return bool(data.get("ok")), str(data.get("message", ""))
        except (OSError, ValueError):
            return False, "the workload ended without a result (see the job's logs)"


def logs_archive(name: str, workdir: Path, limit: int = LOG_EXPORT_LIMIT) -> bytes:
    """A .tar.gz of the job's logs for csctl log-export; a huge log keeps its end."""
    keep = None
    while True:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for file in LOG_FILES:
                path = workdir / file
                if not path.is_file():
                    continue
                data = path.read_bytes()
                if keep is not None and len(data) > keep:
                    data = b"[... earlier output cut ...]\n" + data[-keep:]
                info = tarfile.TarInfo(f"{name}/{file}")
                info.size, info.mtime, info.mode = len(data), int(path.stat().st_mtime), 0o644
                archive.addfile(info, io.BytesIO(data))
        if len(buffer.getvalue()) <= limit:
            return buffer.getvalue()
        keep = limit if keep is None else keep // 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Agent:
    def __init__(self, credentials: Credentials, node: str, settings: dict):
        self.credentials, self.node = credentials, node
        self.api = KubeApi(credentials)
        self.service_user = pwd.getpwnam(settings.get("service_user", "wsjob"))
        self.pythons: dict[str, str] = settings["appliance_python"]  # release -> interpreter
        self.workloads: dict[str, Workload] = {}
        self.wake = threading.Event()

    # one pass ---------------------------------------------------------------
    def reconcile(self) -> None:
        jobs = [j for j in self.api.list_jobs().get("items", [])
                if (j.get("status") or {}).get("node") == self.node]
        for job in jobs:
            name, phase = job["metadata"]["name"], wsjob.phase(job)
            cancel = bool(job["spec"].get("cancelRequested"))
            if phase == wsjob.SCHEDULED and name not in self.workloads:
                if cancel:
                    self.finish(name, wsjob.CANCELLED, job["spec"].get("cancelReason", ""))
                else:
                    self.start(job)
            elif phase == wsjob.RUNNING:
                workload = self.workloads.get(name) or self.adopt(job)
                if workload is None:
                    continue
                if cancel and workload.alive():
                    log(f"{name}: cancel requested ({job['spec'].get('cancelReason', '')})")
                    workload.stop()
                    self.workloads.pop(name, None)
                    self.finish(name, wsjob.CANCELLED,
                                job["spec"].get("cancelReason") or "canceled by user",
                                workload.workdir)
        self.settle()

    def settle(self) -> None:
        """Report the workloads that ended."""
        for name, workload in list(self.workloads.items()):
            if workload.alive():
                continue
            if workload.process is not None:
                workload.process.wait()
            ok, message = workload.result()
            self.workloads.pop(name)
            self.finish(name, wsjob.SUCCEEDED if ok else wsjob.FAILED, message, workload.workdir)

    # transitions --------------------------------------------------------------
    def start(self, job: dict) -> None:
        name, spec = job["metadata"]["name"], job["spec"]
        python = self.pythons.get(spec.get("release", ""))
        if python is None or not Path(python).exists():
            self.finish(name, wsjob.FAILED, f"release {spec.get('release')!r} is not "
                        "installed on the appliance")
            return
        workdir = Path(spec["workdir"])
        workdir.mkdir(parents=True, exist_ok=True)
        os.chown(workdir, self.service_user.pw_uid, self.service_user.pw_gid)
        request = workdir / "request.json"
        request.write_text(spec["request"])
        port = free_port()
        systems = (job.get("status") or {}).get("systems") or []
        argv = [python, "-m", "cerebras_pytorch.appliance.worker",
                "--job-type", spec["jobType"], "--request", str(request),
                "--port", str(port), "--compile-root", wsjob.COMPILE_ROOT,
                "--result", str(workdir / "result.json")]
        if systems:
            argv += ["--systems", ",".join(systems)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8",
               "USER": self.service_user.pw_name,
               "AITESTBED_TIME_SCALE": str(spec.get("timeScale", "0"))}
        with open(workdir / "workload.log", "ab") as out:
            process = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                       stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, user=self.service_user.pw_uid,
                                       group=self.service_user.pw_gid, extra_groups=[])
        ticks = process_start_ticks(process.pid) or 0
        (workdir / "workload.pid").write_text(f"{process.pid} {ticks}\n")
        self.workloads[name] = Workload(name, process.pid, ticks, workdir, process)
        log(f"{name}: started {spec['jobType']} workload, pid {process.pid}, port {port}")
        try:
            self.api.patch_status(name, {"phase": wsjob.RUNNING, "startTime": wsjob.now(),
                                         "ingress": f"{self.node}:{port}",
                                         "message": "job is running."})
        except ApiError:
            self.workloads.pop(name).stop()
            raise

    def adopt(self, job: dict) -> Workload | None:
        """A RUNNING job of this node the agent does not know: it restarted meanwhile."""
        name = job["metadata"]["name"]
        workdir = Path(job["spec"]["workdir"])
        try:
            pid, ticks = (int(x) for x in (workdir / "workload.pid").read_text().split())
        except (OSError, ValueError):
            self.finish(name, wsjob.FAILED, "the appliance lost the workload")
            return None
        workload = Workload(name, pid, ticks, workdir)
        self.workloads[name] = workload
        log(f"{name}: adopted workload pid {pid}")
        return workload

    def finish(self, name: str, phase: str, message: str, workdir: Path | None = None) -> None:
        log(f"{name}: {phase} {message}".rstrip())
        if workdir is not None:
            try:
                self.api.put_config_map(f"{name}-logs", {
                    f"{name}.tar.gz": base64.b64encode(logs_archive(name, workdir)).decode()},
                    {"wsjob": name})
            except ApiError as err:
                log(f"{name}: could not keep the logs for log-export: {err}")
        try:
            self.api.patch_status(name, {"phase": phase, "message": message,
                                         "completionTime": wsjob.now()})
        except ApiError as err:
            if err.status != 404:
                raise

    # loop ---------------------------------------------------------------------
    def watch(self) -> None:
        """Wake the loop on any change to the jobs (cancel within a second)."""
        api = KubeApi(self.credentials)  # connections are not shared between threads
        while True:
            try:
                listing = api.list_jobs()
                for _event in api.watch_jobs(listing["metadata"]["resourceVersion"],
                                                  timeout_seconds=30):
                    self.wake.set()
            except (Unreachable, ApiError):
                time.sleep(1)

    def run(self) -> None:
        log(f"running the wsjobs scheduled on {self.node}")
        threading.Thread(target=self.watch, daemon=True).start()
        while True:
            try:
                self.reconcile()
            except (Unreachable, ApiError) as err:
                log(f"API: {err}; retrying")
            self.wake.wait(TICK_SECONDS)
            self.wake.clear()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="wsjob-agent",
                                     description="Run the wsjobs scheduled on this node.")
    parser.add_argument("--config", type=Path, default=Path("/etc/cerebras/agent.json"))
    parser.add_argument("--credentials", type=Path, default=Path("/etc/kubernetes/agent"))
    parser.add_argument("--node", default=socket.gethostname())
    args = parser.parse_args(argv)
    settings = json.loads(args.config.read_text())
    agent = Agent(config.service_credentials(args.credentials), args.node, settings)
    try:
        agent.run()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
