"""The wsjob scheduler's loop: list the jobs, decide (scheduler.decide), write the decisions.

Level-triggered: every pass starts from the jobs as the API returns them, and a
watch only wakes the loop early. Killed and restarted at any point, it finds
the same jobs and takes the same decisions; status writes carry the job's
resourceVersion, so a job changed meanwhile (say, cancelled) is decided again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from aitestbed.cerebras import config, wsjob
from aitestbed.cerebras.kubeapi import ApiError, KubeApi, Unreachable
from aitestbed.cerebras.scheduler import Decisions, Limits, decide

RESYNC_SECONDS = 2


def log(message: str) -> None:
    print(f"{wsjob.now()} wsjob-controller: {message}", flush=True)


def apply(api: KubeApi, jobs: dict[str, dict], decisions: Decisions) -> None:
    def status(name: str, fields: dict, terminal: bool = False) -> None:
        if terminal:
            fields["completionTime"] = wsjob.now()
        try:
            api.patch_status(name, fields,
                             resource_version=jobs[name]["metadata"]["resourceVersion"])
        except ApiError as err:
            if err.status not in (404, 409):  # gone, or changed: the next pass decides again
                raise

    for name, (systems, node) in decisions.schedule.items():
        log(f"{name}: scheduled on {', '.join(systems) or node}")
        status(name, {"phase": wsjob.SCHEDULED, "systems": systems, "node": node,
                      "message": "job is scheduled.", "scheduledTime": wsjob.now()})
    for name, reason in decisions.fail.items():
        log(f"{name}: failed: {reason}")
        status(name, {"phase": wsjob.FAILED, "message": reason}, terminal=True)
    for name, reason in decisions.cancel.items():
        log(f"{name}: cancelled before it started: {reason}")
        status(name, {"phase": wsjob.CANCELLED, "message": reason}, terminal=True)
    for name, message in decisions.messages.items():
        status(name, {"message": message})
    for name, reason in decisions.request_cancel.items():
        log(f"{name}: asking its agent to stop it: {reason}")
        try:
            api.patch_job(name, {"spec": {"cancelRequested": True, "cancelReason": reason}})
        except ApiError as err:
            if err.status != 404:
                raise


def run(api: KubeApi, limits: Limits) -> None:
    log(f"scheduling onto {', '.join(limits.systems)}; compiles on {limits.compile_node}")
    while True:
        try:
            listing = api.list_jobs()
            jobs = {j["metadata"]["name"]: j for j in listing.get("items", [])}
            apply(api, jobs, decide(list(jobs.values()), limits,
                                    datetime.datetime.now(datetime.timezone.utc)))
            for _event in api.watch_jobs(listing["metadata"]["resourceVersion"],
                                         timeout_seconds=RESYNC_SECONDS):
                break  # anything changed: decide again from a fresh list
        except (Unreachable, ApiError) as err:
            log(f"API: {err}; retrying")
            time.sleep(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="wsjob-controller",
                                     description="Schedule wsjobs onto the CS-2 systems.")
    parser.add_argument("--config", type=Path, default=Path("/etc/cerebras/controller.json"),
                        help="systems, management node and limits (JSON)")
    parser.add_argument("--credentials", type=Path, default=Path("/etc/kubernetes/controller"),
                        help="directory with server, ca.crt, client.crt, client.key")
    parser.add_argument("--in-cluster", action="store_true",
                        help="authenticate as the pod's service account instead")
    args = parser.parse_args(argv)
    settings = json.loads(args.config.read_text())
    limits = Limits(systems=tuple(settings["systems"]),
                    management_node=settings["management_node"],
                    max_compile=settings.get("max_compile", 1),
                    max_execute=settings.get("max_execute", 1),
                    heartbeat_timeout=settings.get("heartbeat_timeout", 30.0))
    try:
        credentials = (config.in_cluster_credentials() if args.in_cluster
                       else config.service_credentials(args.credentials))
    except (config.ConfigError, OSError) as err:
        sys.exit(f"wsjob-controller: {err}")
    try:
        run(KubeApi(credentials), limits)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
