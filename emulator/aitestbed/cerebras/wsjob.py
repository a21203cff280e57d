"""The WSJob resource: names, phases and who writes what.

  client (user)   creates the job (spec), patches labels, the heartbeat
                  annotation and spec.cancelRequested
  scheduler       QUEUEING -> SCHEDULED (status.systems, status.node), and
                  CANCELLED for jobs that never started
  agent           SCHEDULED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
Which systems are held is derived from the jobs in SCHEDULED or RUNNING, so
no allocation table can drift from the jobs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import secrets
import string

from aitestbed.cerebras.kubeapi import GROUP, KIND, NAMESPACE, VERSION

QUEUEING, SCHEDULED, RUNNING = "QUEUEING", "SCHEDULED", "RUNNING"
SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
ACTIVE = (SCHEDULED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
HEARTBEAT_ANNOTATION = f"{GROUP}/heartbeat"
WORKDIR_ROOT = "/n1/wsjob/workdir"
COMPILE_ROOT = "/n1/wsjob/compile_root"
# Release 2.10's jobs run as their user: each user's compiles in a directory of theirs.
USER_COMPILE_ROOT = "/n1/wsjob/users"
MIN_USER_UID = 1000  # a job never runs as a system account
_ALPHABET = string.ascii_lowercase + string.digits
# The client keeps a random secret for the job's stream and puts only its hash in
# the spec (every user may read specs): the worker streams to whoever presents it.
TOKEN_FIELD = "ingressTokenSha256"
TOKEN_HASH = re.compile(r"^[0-9a-f]{64}$")
USER_LABEL = "user"  # the appliance labels each job with its user


# `--job_priority p1|p2|p3` (default p2; p1 is the highest), as the values csctl shows
# ("P2 (299)" in the docs' sample). Queued jobs start in priority order, then by age.
PRIORITIES = {"p1": 199, "p2": 299, "p3": 399}
DEFAULT_PRIORITY = PRIORITIES["p2"]


def new_name() -> str:
    return "wsjob-" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def new_workflow_id() -> str:
    """wflow-...: the compile and execute jobs of one run share it (csctl's WORKFLOW)."""
    return "wflow-" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def priority_label(value: int) -> str:
    """csctl's PRIORITY cell: the bucket and the value, "P2 (299)"."""
    return f"P{min(3, max(0, value // 100))} ({value})"


def release_tuple(version: str | None) -> tuple[int, ...]:
    """A Cerebras release's major and minor numbers: "2.10.0" -> (2, 10); () if none."""
    return tuple(int(part) for part in str(version or "").split(".")[:2] if part.isdigit())


def release_of(job: dict) -> tuple[int, ...]:
    return release_tuple(job["spec"].get("release"))


def runs_as_its_user(job: dict) -> bool:
    """Every release's workloads run as the job's user (so they read the user's files where
    the user can), as Release 2.10's appliance does. One service user for all users' jobs
    let one user's workload kill, read and forge another's (D02, D03)."""
    return True


def priority(job: dict) -> int:
    return int(job["spec"].get("priority", DEFAULT_PRIORITY))


def workdir(name: str, namespace: str = NAMESPACE) -> str:
    """The job's work dir on /n1 (the agent derives it the same way; spec.workdir only
    tells the user)."""
    return f"{WORKDIR_ROOT}/{namespace}/{name}"


def new_token() -> str:
    return secrets.token_hex(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def logs_config_map(name: str) -> str:
    """The ConfigMap (and the Role and RoleBinding letting its owner read it) of a job's logs."""
    return f"{name}-logs"


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(stamp: str | None) -> datetime.datetime | None:
    if not stamp:
        return None
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)


def build(job_type: str, request: dict, user: str, uid: int, gid: int,
          namespace: str = NAMESPACE, time_scale: str = "0", token: str | None = None,
          workflow: str | None = None) -> dict:
    """The WSJob a client submits for cerebras_pytorch's request (see its runner); `token`
    is the secret the client will present at the job's ingress (only its hash is sent).
    Its labels are the request's `--job_labels` and, as the appliance adds to every job,
    `user=<name>` (`csctl get jobs` shows `name=pt_smoketest,user=username`)."""
    name = new_name()
    labels = {str(k): str(v) for k, v in (request.get("job_labels") or {}).items()}
    labels[USER_LABEL] = user
    spec = {
        "user": {"username": user, "uid": uid, "gid": gid},
        "jobType": job_type,
        "numWafers": int(request.get("num_csx") or 1),
        "release": str(request.get("release", "")),
        "pythonPaths": list(request.get("python_paths") or []),
        "mountDirs": list(request.get("mount_dirs") or []),
        "compileDir": str(request.get("compile_dir") or ""),
        "workdir": workdir(name, namespace),
        "request": json.dumps(request, sort_keys=True),
        "timeScale": time_scale,  # the client's AITESTBED_TIME_SCALE, for the workload
        "priority": PRIORITIES.get(str(request.get("job_priority") or "p2").lower(),
                                   DEFAULT_PRIORITY),
    }
    if workflow:
        spec["workflowId"] = workflow
    if token:
        spec[TOKEN_FIELD] = token_hash(token)
    if request.get("job_time_sec"):
        spec["jobTimeSec"] = int(request["job_time_sec"])
    if request.get("compile_hash"):
        spec["compileHash"] = str(request["compile_hash"])
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {HEARTBEAT_ANNOTATION: now()}},
        "spec": spec,
    }


def phase(job: dict) -> str:
    return (job.get("status") or {}).get("phase") or QUEUEING


def owner(job: dict) -> str:
    return job["spec"]["user"]["username"]
