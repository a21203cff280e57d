"""cerebras_pytorch's default job runner: one wsjob per compile or execute on the cluster.

The facade's side of the appliance: it talks to the API server through the Cerebras
room (aitestbed.cerebras: config, kubeapi, wsjob), which never imports the facade.

It submits the WSJob as the user, reports its way through the queue with the
appliance's "Poll ingress status" lines, keeps it alive with a heartbeat
(the scheduler cancels jobs whose client went away), then streams the
workload's messages from its ingress until the final one. Ctrl-C cancels the
job it was waiting for.

The stream is the submitter's: the client makes a secret for each job, sends only
its hash in the spec and presents the secret at the ingress (see channel). While
the cluster server is briefly unreachable (cer-mgmt-01 restarting) the client
retries for up to API_RETRY_SECONDS, then reports it as an ApplianceError.
"""

from __future__ import annotations

import logging
import os
import pwd
import threading
import time
from collections.abc import Callable

from aitestbed.cerebras import config, csctl, wsjob
from aitestbed.cerebras.kubeapi import ApiError, KubeApi, Unreachable

from .._version import __version__
from . import channel, errors

HEARTBEAT_SECONDS = 5
POLL_SECONDS = 0.25
INGRESS_TIMEOUT = 60
API_RETRY_SECONDS = 60.0
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
        self.workflow = wsjob.new_workflow_id()  # this run's compile and execute jobs

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
        token = wsjob.new_token()  # never leaves this process but to the job's ingress
        job = wsjob.build(job_type, request, user.pw_name, user.pw_uid, user.pw_gid,
                          self.namespace, os.environ.get("AITESTBED_TIME_SCALE", "0"), token,
                          workflow=self.workflow)
        deadline = time.monotonic() + API_RETRY_SECONDS
        while True:
            try:
                name = self.api.create_job(job, self.namespace)["metadata"]["name"]
                break
            except ApiError as err:
                # refused before it was made: asked again while the server is not ready
                if (err.status in (401, 403) and not self.api.ready()
                        and time.monotonic() < deadline):
                    time.sleep(1)
                    continue
                raise self.errors.ApplianceClientError(
                    f"the cluster server refused the {job_type} job: {err}") from None
            except Unreachable as err:
                raise self.errors.ApplianceClientError(
                    f"the cluster server refused the {job_type} job: {err}") from None
        if wsjob.release_tuple(__version__) >= (2, 10):  # that release's log line
            logger.info(f"Job id: {name}, workflow id: {self.workflow}, namespace: "
                        f"{self.namespace}, remote log path: {job['spec']['workdir']}")
        else:
            logger.info(f"{job_type} job id: {name}, remote log path: {job['spec']['workdir']}")
        heartbeat = Heartbeat(self.credentials, name, self.namespace)
        try:
            host, port = self._wait_for_ingress(name)
            return self._relay(name, host, port, token, on_message)
        except KeyboardInterrupt:
            self._cancel(name, "the client was interrupted")
            raise
        finally:
            heartbeat.stop()

    def _transient(self, err: Exception) -> bool:
        """An answer to try again: no answer, 5xx or 429, or a refusal (401, 403) from a
        server that is not ready (just restarted: its RBAC not loaded yet)."""
        if isinstance(err, Unreachable):
            return True
        if err.status >= 500 or err.status == 429:
            return True
        return err.status in (401, 403) and not self.api.ready()

    def _get_job(self, name: str) -> dict:
        """The job; an unreachable or not yet ready server is retried for
        API_RETRY_SECONDS, then reported."""
        deadline = time.monotonic() + API_RETRY_SECONDS
        while True:
            try:
                return self.api.get_job(name, self.namespace)
            except (Unreachable, ApiError) as err:
                if not self._transient(err):
                    raise self.errors.ApplianceUnknownError(
                        f"Job {name}: the cluster server answered: {err}") from None
                if time.monotonic() >= deadline:
                    raise self.errors.ApplianceUnknownError(
                        f"Job {name}: lost contact with the cluster server for "
                        f"{API_RETRY_SECONDS:.0f} s ({err}); see `csctl get jobs {name}` "
                        "once it is back") from None
                time.sleep(1)

    def _wait_for_ingress(self, name: str) -> tuple[str, int]:
        said = None
        while True:
            job = self._get_job(name)
            phase, status = wsjob.phase(job), job.get("status") or {}
            if phase in wsjob.FINISHED:
                self._failed(name, status.get("message") or phase.lower())
            if phase == wsjob.RUNNING and status.get("ingress"):
                logger.info("Poll ingress status: Waiting for job service readiness.")
                logger.info("Poll ingress status: Waiting for job ingress readiness.")
                if wsjob.release_tuple(__version__) >= (2, 10):  # that release's lines
                    url = csctl.dashboard(job, csctl.EDITION_2026)
                    logger.info(f"Poll ingress status: Job ingress ready, dashboard: {url}")
                    logger.info(f"Poll ingress success: Job ingress ready, dashboard: {url}")
                host, _, port = status["ingress"].rpartition(":")
                return host, int(port)
            line = (f"Poll ingress status: Waiting for job running, current job status: "
                    f"{phase.capitalize()}, msg: {status.get('message') or 'job is queueing.'}")
            if line != said:
                logger.info(line)
                said = line
            time.sleep(POLL_SECONDS)

    def _relay(self, name: str, host: str, port: int, token: str, on_message) -> dict:
        def ended() -> bool:
            return wsjob.phase(self._get_job(name)) in wsjob.FINISHED

        announced = False
        messages = channel.connect(host, port, INGRESS_TIMEOUT, token, give_up=ended)
        try:
            for message in messages:
                if not announced:
                    logger.info("Ingress is ready: Job ingress ready, poll ingress success.")
                    announced = True
                kind = message.get("type")
                if kind == "done":
                    messages.close()  # hang up: the workload ends once its client has left
                    try:  # so that `csctl get jobs` right after agrees
                        self._final_status(name)
                    except self.errors.ApplianceError:
                        pass  # the result is here: only the job's listing may lag
                    return message
                if kind == "error":
                    self._report_failure(name)
                    error = self.errors.from_message(message)
                    logger.error(f"Job {name} failed due to: {error}")
                    raise error
                on_message(message)
        except channel.Refused as err:
            self._failed(name, str(err))
        except OSError:  # refused or reset: the workload was stopped or died
            pass
        # The stream ended without a result: the job was cancelled, its workload died,
        # or the connection broke.
        job = self._final_job(name)
        phase, message = wsjob.phase(job), (job.get("status") or {}).get("message")
        if phase == wsjob.SUCCEEDED:
            self._failed(name, "the connection to the job's ingress broke before its "
                         "result arrived (the job itself ended SUCCEEDED, but its output "
                         "did not reach this client)")
        if phase not in wsjob.FINISHED:
            self._failed(name, "the connection to the job's ingress broke while the job "
                         f"was still {phase}")
        self._failed(name, message or "the workload ended without a result")

    def _final_job(self, name: str) -> dict:
        """The job once it has ended, or as it is 10 s after the server first answers
        (after a restart of cer-mgmt-01 its agent needs a moment to settle the job)."""
        job = self._get_job(name)
        deadline = time.monotonic() + 10
        while wsjob.phase(job) not in wsjob.FINISHED and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            job = self._get_job(name)
        return job

    def _final_status(self, name: str) -> dict:
        return self._final_job(name).get("status") or {}

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
