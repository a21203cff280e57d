"""An appliance node's wsjob agent: runs the workloads the scheduler assigns to this node.

The management node's agent runs compile jobs, each CS-2 host's agent the
execute jobs on that system (status.node). A workload is cerebras_pytorch's
appliance worker, started in a session of its own as the appliance's service
user, in the job's work dir on /n1, with its ingress (the TCP port the client
streams from) written to the job's status.

The agent runs as root and the workload runs users' code, so the work dir is
derived from the job's name (never spec.workdir, which users write) and handled
without following links (aitestbed.cerebras.jobdir). An ended job's logs go to a
ConfigMap that only its owner may read: a Role and RoleBinding per job grant it.

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
from aitestbed.cerebras.jobdir import JobDir, UnsafeWorkdir, open_dir
from aitestbed.cerebras.kubeapi import NAMESPACE, ApiError, Credentials, KubeApi, Unreachable
from aitestbed.node.processes import process_alive, process_start_ticks

TICK_SECONDS = 0.5  # how often the agent looks at its own workloads (ended ones reported)
# How often it lists the jobs without news from its watch (which wakes it at once on any
# change): a look that catches what a broken watch missed. Listing every tick, three
# agents kept kube-apiserver busy (6 LISTs a second, a quarter of a core).
RESYNC_SECONDS = 5.0
KILL_GRACE_SECONDS = 1.0
LOG_FILES = ("workload.log", "request.json", "result.json")
LOG_EXPORT_LIMIT = 700 * 1024  # a ConfigMap holds at most 1 MiB
RESULT_LIMIT = 1024 * 1024
NO_RESULT = "the workload ended without a result (see the job's logs)"


def log(message: str) -> None:
    print(f"{wsjob.now()} wsjob-agent: {message}", flush=True)


class WorkloadUserError(Exception):
    """The job's user cannot run workloads here (no account, or a system account)."""


def workload_user(job: dict, service: pwd.struct_passwd,
                  lookup=pwd.getpwnam) -> pwd.struct_passwd:
    """The account a job's workloads run as: the service user's, or for release 2.10 the
    job's user's, looked up by the name the API server checked (never spec.user.uid)."""
    if not wsjob.runs_as_its_user(job):
        return service
    name = wsjob.owner(job)
    try:
        account = lookup(name)
    except KeyError:
        raise WorkloadUserError(f"user {name} has no account on the appliance") from None
    if account.pw_uid < wsjob.MIN_USER_UID:
        raise WorkloadUserError(f"user {name} is a system account (uid {account.pw_uid})")
    return account


def user_compile_dir(root: str, account: pwd.struct_passwd) -> str:
    """<root>/<user>, made by root and given to the user, never through a link: root and
    its parents must be root's (jobdir.open_dir), the entry a directory that is the
    user's (or root's, just made)."""
    parent = open_dir(root)
    try:
        try:
            os.mkdir(account.pw_name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
        fd = os.open(account.pw_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent)
    except OSError as err:
        raise UnsafeWorkdir(f"{root}/{account.pw_name}: {err.strerror} (a link, or not a "
                            "directory)") from None
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if info.st_uid not in (0, account.pw_uid):
            raise UnsafeWorkdir(f"{root}/{account.pw_name} belongs to uid {info.st_uid}")
        os.fchown(fd, account.pw_uid, account.pw_gid)
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return os.path.join(root, account.pw_name)


@dataclass
class Workload:
    name: str
    pid: int
    start_ticks: int
    workdir: JobDir
    owner: str = ""
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
            data = json.loads(self.workdir.read("result.json", RESULT_LIMIT) or b"")
            return bool(data.get("ok")), str(data.get("message", ""))
        except UnsafeWorkdir as err:
            log(f"{self.name}: result not read: {err}")
            return False, NO_RESULT
        except (OSError, ValueError, AttributeError):
            return False, NO_RESULT


def logs_archive(name: str, workdir: JobDir, limit: int = LOG_EXPORT_LIMIT) -> bytes:
    """A .tar.gz of the job's logs for csctl log-export; a huge log keeps its end.

    Only the files the agent made are read, never through a link (jobdir.JobDir)."""
    keep = limit
    while True:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for file in LOG_FILES:
                try:
                    found = workdir.tail(file, keep)
                    if found is None:
                        continue
                    mtime = workdir.mtime(file)
                except (UnsafeWorkdir, OSError) as err:
                    found, mtime = (f"[not exported: {err}]\n".encode(), 0), 0
                data, size = found
                if size > len(data):
                    data = b"[... earlier output cut ...]\n" + data
                info = tarfile.TarInfo(f"{name}/{file}")
                info.size, info.mtime, info.mode = len(data), mtime, 0o644
                archive.addfile(info, io.BytesIO(data))
        if len(buffer.getvalue()) <= limit:
            return buffer.getvalue()
        keep //= 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Agent:
    system_model = "CS-2"  # the cluster's systems (cluster.json); CS-3 on the 2026 profile

    def __init__(self, credentials: Credentials, node: str, settings: dict):
        self.credentials, self.node = credentials, node
        self.api = KubeApi(credentials)
        self.service_user = pwd.getpwnam(settings.get("service_user", "wsjob"))
        self.workdir_root = settings.get("workdir_root", wsjob.WORKDIR_ROOT)
        self.pythons: dict[str, str] = settings["appliance_python"]  # release -> interpreter
        self.system_model = settings.get("system_model", "CS-2")  # the cluster's systems
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
                                workload.workdir, wsjob.owner(job))
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
            self.finish(name, wsjob.SUCCEEDED if ok else wsjob.FAILED, message,
                        workload.workdir, workload.owner)

    # transitions --------------------------------------------------------------
    def jobdir(self, name: str, runner: pwd.struct_passwd | None = None) -> JobDir:
        """The job's work dir: WORKDIR_ROOT/<namespace>/<name>; spec.workdir is not read.
        Its result and work/ belong to the account the workload runs as."""
        runner = runner or self.service_user
        return JobDir(self.workdir_root, NAMESPACE, name, runner.pw_uid, runner.pw_gid)

    def runner(self, job: dict) -> pwd.struct_passwd:
        """Who the job's workloads run as (workload_user), or WorkloadUserError."""
        return workload_user(job, self.service_user)

    def supplementary_groups(self, runner: pwd.struct_passwd) -> list[int]:
        """None for the service user; a user's own groups (their projects' data in
        /projects) for a job that runs as its user."""
        if runner.pw_uid == self.service_user.pw_uid:
            return []
        return [g for g in os.getgrouplist(runner.pw_name, runner.pw_gid) if g != runner.pw_gid]

    def compile_root(self, job: dict, runner: pwd.struct_passwd) -> str:
        """The service user's compile root, or (release 2.10) the job's user's own."""
        if runner.pw_uid == self.service_user.pw_uid:
            return wsjob.COMPILE_ROOT
        return user_compile_dir(wsjob.USER_COMPILE_ROOT, runner)

    def start(self, job: dict) -> None:
        name, spec = job["metadata"]["name"], job["spec"]
        python = self.pythons.get(spec.get("release", ""))
        if python is None or not Path(python).exists():
            self.finish(name, wsjob.FAILED, f"release {spec.get('release')!r} is not "
                        "installed on the appliance")
            return
        token_hash = str(spec.get(wsjob.TOKEN_FIELD) or "")
        if not wsjob.TOKEN_HASH.match(token_hash):
            self.finish(name, wsjob.FAILED, f"the job has no {wsjob.TOKEN_FIELD} (the hash "
                        "of the secret its client streams with): submit it with the "
                        "cluster's cerebras_pytorch")
            return
        workdir = None
        try:
            runner = self.runner(job)
            compile_root = self.compile_root(job, runner)
        except (WorkloadUserError, UnsafeWorkdir, OSError) as err:
            self.finish(name, wsjob.FAILED, f"the appliance cannot run the job: {err}")
            return
        try:
            workdir = self.jobdir(name, runner)
            workdir.create()
            workdir.write("request.json", spec["request"])
            workdir.write("result.json", "", for_service=True)
            out = workdir.open_write("workload.log")  # a new job: nothing of a namesake
        except (UnsafeWorkdir, OSError) as err:
            if workdir is not None:
                workdir.close()
            self.finish(name, wsjob.FAILED, f"the appliance cannot prepare the job's work "
                        f"dir: {err}")
            return
        port = free_port()
        systems = (job.get("status") or {}).get("systems") or []
        argv = [python, "-m", "cerebras_pytorch.appliance.worker",
                "--job-type", spec["jobType"], "--request", str(workdir.path / "request.json"),
                "--port", str(port), "--compile-root", compile_root,
                "--result", str(workdir.path / "result.json"),
                "--client-token-sha256", token_hash]
        if systems:
            argv += ["--systems", ",".join(systems)]
        argv += ["--system-model", self.system_model]
        work = workdir.path / "work"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8",
               "USER": runner.pw_name,
               "AITESTBED_TIME_SCALE": str(spec.get("timeScale", "0"))}
        groups = ",".join(map(str, self.supplementary_groups(runner))) or "-"
        # Under a shepherd of root's: the worker runs as the job's runner, and whatever it
        # leaves behind (a setsid daemon) dies with the job (D02).
        shepherd = [sys.executable, "-m", "aitestbed.cerebras.shepherd", str(runner.pw_uid),
                    str(runner.pw_gid), groups, "--"]
        try:
            process = subprocess.Popen([*shepherd, *argv], cwd=work, env=env,
                                       stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            os.close(out)
        ticks = process_start_ticks(process.pid) or 0
        workdir.write("workload.pid", f"{process.pid} {ticks}\n")
        self.workloads[name] = Workload(name, process.pid, ticks, workdir, wsjob.owner(job),
                                        process)
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
        try:
            workdir = self.jobdir(name, self.runner(job))
            pid, ticks = (int(x) for x in (workdir.read("workload.pid", 100) or b"").split())
        except (UnsafeWorkdir, WorkloadUserError, OSError, ValueError):
            self.finish(name, wsjob.FAILED, "the appliance lost the workload")
            return None
        workload = Workload(name, pid, ticks, workdir, wsjob.owner(job))
        self.workloads[name] = workload
        log(f"{name}: adopted workload pid {pid}")
        return workload

    def finish(self, name: str, phase: str, message: str, workdir: JobDir | None = None,
               owner: str = "") -> None:
        log(f"{name}: {phase} {message}".rstrip())
        if workdir is not None:
            try:
                self.keep_logs(name, owner, logs_archive(name, workdir))
            except ApiError as err:
                log(f"{name}: could not keep the logs for log-export: {err}")
            finally:
                workdir.close()
        try:
            self.api.patch_status(name, {"phase": phase, "message": message,
                                         "completionTime": wsjob.now()})
        except ApiError as err:
            if err.status != 404:
                raise

    def keep_logs(self, name: str, owner: str, archive: bytes) -> None:
        """The logs' ConfigMap, readable by the job's owner only (and the appliance)."""
        config_map = wsjob.logs_config_map(name)
        self.api.put_config_map(config_map, {
            f"{name}.tar.gz": base64.b64encode(archive).decode()}, {"wsjob": name})
        if owner:
            self.api.grant_read(config_map, owner, {"wsjob": name})

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
        listed = None
        while True:
            now = time.monotonic()
            try:
                if self.wake.is_set() or listed is None or now - listed >= RESYNC_SECONDS:
                    self.wake.clear()  # a change from here on wakes the next turn
                    listed = now
                    self.reconcile()
                else:
                    self.settle()
            except (Unreachable, ApiError) as err:
                log(f"API: {err}; retrying")
            self.wake.wait(TICK_SECONDS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="wsjob-agent",
                                     description="Run the wsjobs scheduled on this node.")
    parser.add_argument("--config", type=Path, default=Path("/etc/cerebras/agent.json"))
    parser.add_argument("--credentials", type=Path, default=Path("/etc/kubernetes/agent"))
    parser.add_argument("--node", default=socket.gethostname())
    args = parser.parse_args(argv)
    settings = json.loads(args.config.read_text())
    settings.setdefault("system_model", config.cluster_settings().get("system_model", "CS-2"))
    agent = Agent(config.service_credentials(args.credentials), args.node, settings)
    try:
        agent.run()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
