"""cerebras_pytorch's default job runner: one wsjob per compile or execute on the cluster.

The facade's side of the appliance: it talks to the API server through the Cerebras
room (aitestbed.cerebras: config, kubeapi, wsjob), which never imports the facade.

It submits the WSJob as the user, reports its way through the queue with the
appliance's "Poll ingress status" lines, keeps it alive with a heartbeat
(the scheduler cancels jobs whose client went away), then streams the
workload's messages from its ingress until the final one. Ctrl-C cancels the
job it was waiting for.
"""

from __future__ import annotations

import logging
import os
import pwd
import threading
import time
from collections.abc import Callable

from aitestbed.cerebras import config, wsjob
from aitestbed.cerebras.kubeapi import ApiError, KubeApi, Unreachable

from . import channel, errors

HEARTBEAT_SECONDS = 5
POLL_SECONDS = 0.25
INGRESS_TIMEOUT = 60
logger = logging.getLogger("cerebras.appliance")


class Heartbeat:
    """Patch the job's heartbeat annotation until stopped."""

    def __init__(self, credentials, name: str, namespace: str):
        self.api = KubeApi(credentials)  # its own connection: it runs in its own thread
        self.name, self.namespace = name, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self.api.patch_job(self.name, {"metadata": {"annotations": {
                    wsjob.HEARTBEAT_ANNOTATION: wsjob.now()}}}, self.namespace)
            except (ApiError, Unreachable):
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT_SECONDS + 1)
        logger.info(f"Heartbeat thread stopped for {self.name}.")


class KubernetesJobRunner:
    def __init__(self):
        self.errors = errors
        try:
            usernode = config.load_usernode_config()
            self.namespace = config.default_namespace(usernode)
            self.credentials = config.user_credentials(usernode)
        except config.ConfigError as err:
            raise errors.ApplianceClientError(str(err)) from None
        self.api = KubeApi(self.credentials)
        self._announced = False

    def _announce(self) -> None:
        if self._announced:
            return
        self._announced = True
        logger.info(f"Defaulted to use the {self.namespace} namespace as the usernode config "
                    f"{config.USERNODE_CONFIG} only has access to that namespace.")
        logger.info("Initiating a new image build job against the cluster server.")
        logger.info("Custom worker image build is disabled from server.")

    def run(self, job_type: str, request: dict, on_message: Callable[[dict], None]) -> dict:
        self._announce()
        logger.info(f"Initiating a new {job_type} wsjob against the cluster server.")
        user = pwd.getpwuid(os.geteuid())
        job = wsjob.build(job_type, request, user.pw_name, user.pw_uid, user.pw_gid,
                          self.namespace, os.environ.get("AITESTBED_TIME_SCALE", "0"))
        try:
            name = self.api.create_job(job, self.namespace)["metadata"]["name"]
        except (ApiError, Unreachable) as err:
            raise self.errors.ApplianceClientError(
                f"the cluster server refused the {job_type} job: {err}") from None
        logger.info(f"{job_type} job id: {name}, remote log path: {job['spec']['workdir']}")
        heartbeat = Heartbeat(self.credentials, name, self.namespace)
        try:
            host, port = self._wait_for_ingress(name)
            return self._relay(name, host, port, on_message)
        except KeyboardInterrupt:
            self._cancel(name, "the client was interrupted")
            raise
        finally:
            heartbeat.stop()

    def _wait_for_ingress(self, name: str) -> tuple[str, int]:
        said = None
        while True:
            try:
                job = self.api.get_job(name, self.namespace)
            except Unreachable:
                time.sleep(1)
                continue
            phase, status = wsjob.phase(job), job.get("status") or {}
            if phase in wsjob.FINISHED:
                self._failed(name, status.get("message") or phase.lower())
            if phase == wsjob.RUNNING and status.get("ingress"):
                logger.info("Poll ingress status: Waiting for job service readiness.")
                logger.info("Poll ingress status: Waiting for job ingress readiness.")
                host, _, port = status["ingress"].rpartition(":")
                return host, int(port)
            line = (f"Poll ingress status: Waiting for job running, current job status: "
                    f"{phase.capitalize()}, msg: {status.get('message') or 'job is queueing.'}")
            if line != said:
                logger.info(line)
                said = line
            time.sleep(POLL_SECONDS)

    def _relay(self, name: str, host: str, port: int, on_message) -> dict:
        def ended() -> bool:
            return wsjob.phase(self.api.get_job(name, self.namespace)) in wsjob.FINISHED

        announced = False
        messages = channel.connect(host, port, INGRESS_TIMEOUT, give_up=ended)
        try:
            for message in messages:
                if not announced:
                    logger.info("Ingress is ready: Job ingress ready, poll ingress success.")
                    announced = True
                kind = message.get("type")
                if kind == "done":
                    messages.close()  # hang up: the workload ends once its client has left
                    self._final_status(name)  # so that `csctl get jobs` right after agrees
                    return message
                if kind == "error":
                    self._report_failure(name)
                    error = self.errors.from_message(message)
                    logger.error(f"Job {name} failed due to: {error}")
                    raise error
                on_message(message)
        except OSError:  # refused or reset: the workload was stopped or died
            pass
        # The stream ended without a result: the job was cancelled or its workload died.
        status = self._final_status(name)
        self._failed(name, status.get("message") or "the workload ended without a result")

    def _final_status(self, name: str) -> dict:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            job = self.api.get_job(name, self.namespace)
            if wsjob.phase(job) in wsjob.FINISHED:
                break
            time.sleep(POLL_SECONDS)
        return job.get("status") or {}

    def _report_failure(self, name: str) -> None:
        logger.info(f"Trying to fetch failure info from the cluster for job {name}. "
                    "This may take up to 60 seconds.")

    def _failed(self, name: str, reason: str):
        self._report_failure(name)
        logger.error(f"Job {name} failed due to: {reason}")
        raise self.errors.ApplianceUnknownError(f"Job {name} failed due to: {reason}")

    def _cancel(self, name: str, reason: str) -> None:
        try:
            self.api.patch_job(name, {"spec": {"cancelRequested": True, "cancelReason": reason}},
                               self.namespace)
        except (ApiError, Unreachable):
            pass
