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
import json
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
_ALPHABET = string.ascii_lowercase + string.digits


def new_name() -> str:
    return "wsjob-" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def workdir(name: str, namespace: str = NAMESPACE) -> str:
    return f"{WORKDIR_ROOT}/{namespace}/{name}"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(stamp: str | None) -> datetime.datetime | None:
    if not stamp:
        return None
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC)


def build(job_type: str, request: dict, user: str, uid: int, gid: int,
          namespace: str = NAMESPACE, time_scale: str = "0") -> dict:
    """The WSJob a client submits for cerebras_pytorch's request (see its runner)."""
    name = new_name()
    labels = {str(k): str(v) for k, v in (request.get("job_labels") or {}).items()}
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
    }
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
