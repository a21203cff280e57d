"""csctl: the Cerebras cluster command-line tool, on the appliance's Kubernetes API.

Every user sees every job; cancel and label reach the API server as the user
(their client certificate), where RBAC and the ownership policy decide.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import re
import sys
import time
from pathlib import Path

from aitestbed.cerebras import config, wsjob
from aitestbed.cerebras.kubeapi import ApiError, KubeApi, Unreachable

VERSION = "2.1.1"
DASHBOARD = ("https://grafana.cerebras1.lab.alcf.anl.gov/d/WebHNShVz/wsjob-dashboard"
             "?orgId=1&var-wsjob={name}&from={start}&to={end}")
RECENT_SECONDS = 3600  # `get jobs` without -a also lists jobs that ended this recently
LOGS_GRANT_SECONDS = 5.0
TYPES = ["jobs"]
USAGE = """Cerebras cluster command line tool.

Usage:
  csctl [command]

Available Commands:
  cancel             Cancel job
  clear-worker-cache Clear the worker cache
  config             View csctl config files
  get                Get resources
  label              Label resources
  log-export         Gather and download logs.
  types              Display resource types

Flags:
  -d, --debug int          higher debug values will display more fields in output objects
  -h, --help               help for csctl
      --namespace string   configure csctl to talk to different user namespaces
  -v, --version            version for csctl

Use "csctl [command] --help" for more information about a command.
"""
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class CsctlError(Exception):
    pass


# formatting ----------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """kubectl's short durations: 13s, 2m5s, 19m, 3h4m, 2d."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _ms(stamp: datetime.datetime | None) -> str:
    return str(int(stamp.timestamp() * 1000)) if stamp else "now"


def row(job: dict, now: datetime.datetime) -> list[str]:
    meta, status = job["metadata"], job.get("status") or {}
    created = wsjob.parse_time(meta.get("creationTimestamp"))
    started = wsjob.parse_time(status.get("startTime"))
    ended = wsjob.parse_time(status.get("completionTime"))
    duration = human_duration(((ended or now) - started).total_seconds()) if started else ""
    labels = ",".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items()))
    return [meta["name"], human_duration((now - created).total_seconds()) if created else "",
            duration, wsjob.phase(job), ",".join(status.get("systems") or []),
            wsjob.owner(job), labels,
            DASHBOARD.format(name=meta["name"], start=_ms(created), end=_ms(ended))]


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    return "\n".join(lines) + "\n"


def format_jobs(jobs: list[dict], output: str, now: datetime.datetime, debug: int = 0) -> str:
    """The table (with -d 1 or more, also each job's type, workload node and message)."""
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}, indent=2) + "\n"
    if output == "yaml":
        import yaml  # only when asked: keeps the common table path fast
        return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": jobs},
                              sort_keys=False)
    header = ["NAME", "AGE", "DURATION", "PHASE", "SYSTEMS", "USER", "LABELS", "DASHBOARD"]
    rows = [row(j, now) for j in jobs]
    if debug > 0:
        header[4:4] = ["TYPE", "NODE"]
        header.append("MESSAGE")
        for cells, job in zip(rows, jobs, strict=True):
            status = job.get("status") or {}
            cells[4:4] = [job["spec"].get("jobType", ""), status.get("node", "")]
            cells.append(status.get("message", ""))
    return table(rows, header)


def visible(job: dict, now: datetime.datetime, show_all: bool) -> bool:
    if show_all or wsjob.phase(job) not in wsjob.FINISHED:
        return True
    ended = wsjob.parse_time((job.get("status") or {}).get("completionTime"))
    return ended is None or (now - ended).total_seconds() < RECENT_SECONDS


def parse_label_changes(specs: list[str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for spec in specs:
        if spec.endswith("-") and "=" not in spec:
            key, value = spec[:-1], None
        elif "=" in spec:
            key, value = spec.split("=", 1)
            if not LABEL_VALUE.match(value):
                raise CsctlError(f"invalid label value: {spec!r}: a valid label value must be "
                                 "63 characters or less, beginning and ending with an "
                                 "alphanumeric character, with '-', '_' or '.' between")
        else:
            raise CsctlError(f"invalid label spec: {spec!r}: use key=value to set a label "
                             "or key- to remove it")
        if not LABEL_KEY.match(key):
            raise CsctlError(f"invalid label key: {key!r}")
        changes[key] = value
    return changes


# commands --------------------------------------------------------------------
def _job_type(value: str) -> str:
    if value not in ("job", "jobs", "wsjob", "wsjobs"):
        raise CsctlError(f'unknown resource type "{value}": run `csctl types` for the types')
    return "jobs"


def cmd_get(api: KubeApi, args) -> None:
    _job_type(args.type)
    now = datetime.datetime.now(datetime.UTC)
    if args.name:
        jobs = [api.get_job(args.name, args.namespace)]
    else:
        listing = api.list_jobs(args.namespace, label_selector=args.selector)
        jobs = [j for j in listing.get("items", []) if visible(j, now, args.all)]
        jobs.sort(key=lambda j: (j["metadata"].get("creationTimestamp", ""),
                                 j["metadata"]["name"]))
    sys.stdout.write(format_jobs(jobs, args.output, now, args.debug))


def cmd_cancel(api: KubeApi, args) -> None:
    _job_type(args.type)
    job = api.get_job(args.name, args.namespace)
    if wsjob.phase(job) in wsjob.FINISHED:
        raise CsctlError(f"job {args.name} has already ended ({wsjob.phase(job)})")
    api.patch_job(args.name, {"spec": {"cancelRequested": True,
                                       "cancelReason": f"canceled by {config.current_user()}"}},
                  args.namespace)
    print("Job canceled successfully")


def cmd_label(api: KubeApi, args) -> None:
    _job_type(args.type)
    changes = parse_label_changes(args.labels)
    api.patch_job(args.name, {"metadata": {"labels": changes}}, args.namespace)
    print(f"job/{args.name} was patched")


def cmd_types(_api, _args) -> None:
    print("\n".join(TYPES))


def cmd_config(_api, args) -> None:
    sys.stdout.write(json.dumps(config.load_usernode_config(args.csconfig), indent=2) + "\n")


def cmd_clear_worker_cache(api: KubeApi, args) -> None:
    api.list_jobs(args.namespace)  # the user may use this namespace
    print("Worker cache cleared successfully")


def _logs_of(api: KubeApi, name: str, namespace: str) -> dict:
    """The job's logs ConfigMap; its owner's permission to read it (a RoleBinding the
    agent made as the job ended) may take a moment to reach the API server's cache."""
    deadline = time.monotonic() + LOGS_GRANT_SECONDS
    while True:
        try:
            return api.get_config_map(wsjob.logs_config_map(name), namespace)["binaryData"]
        except ApiError as err:
            if err.status == 403 and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            raise CsctlError(f"the cluster kept no logs for job {name}") from None
        except KeyError:
            raise CsctlError(f"the cluster kept no logs for job {name}") from None


def cmd_log_export(api: KubeApi, args) -> None:
    job = api.get_job(args.name, args.namespace)
    user = config.current_user()
    if wsjob.owner(job) != user:
        raise CsctlError(f"job {args.name} belongs to {wsjob.owner(job)}: only its owner may "
                         "export its logs")
    if wsjob.phase(job) not in wsjob.FINISHED:
        raise CsctlError(f"job {args.name} is {wsjob.phase(job)}: its logs can be exported "
                         "once it has ended (they stream to the client meanwhile)")
    data = _logs_of(api, args.name, args.namespace)
    print(f"Gathering log data within cluster for {args.name}...")
    target = Path(args.path) / f"{args.name}.tar.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(base64.b64decode(data[f"{args.name}.tar.gz"]))
    print(f"Produced log export at {target}")


def _global_flags(defaults: bool) -> argparse.ArgumentParser:
    """csctl's global flags; like cobra's, they may also follow the command."""
    flags = argparse.ArgumentParser(add_help=False)
    default = (lambda value: value) if defaults else (lambda _value: argparse.SUPPRESS)
    flags.add_argument("-d", "--debug", type=int, default=default(0),
                       help="higher debug values will display more fields in output objects")
    flags.add_argument("--namespace", default=default(None),
                       help="configure csctl to talk to different user namespaces")
    flags.add_argument("--csconfig", type=Path, default=default(None),
                       help="the usernode config (default /opt/cerebras/config_v2)")
    return flags


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="csctl", add_help=False, parents=[_global_flags(True)])
    top.add_argument("-h", "--help", action="store_true")
    top.add_argument("-v", "--version", action="store_true")
    later = _global_flags(False)
    commands = top.add_subparsers(dest="command", metavar="command",
                                  parser_class=lambda **kw: argparse.ArgumentParser(
                                      parents=[later], **kw))

    get = commands.add_parser("get", help="Get resources", description="Get resources.")
    get.add_argument("type", help="resource type (jobs)")
    get.add_argument("name", nargs="?", help="a job's name")
    get.add_argument("-a", "--all", action="store_true", help="also list jobs that ended")
    get.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table",
                     help="output format (default table)")
    get.add_argument("-l", "--selector", help="label selector, e.g. -l name=bert_pt,k2=v2")
    get.set_defaults(run=cmd_get)

    cancel = commands.add_parser("cancel", help="Cancel job", description="Cancel a job.")
    cancel.add_argument("type", help="job")
    cancel.add_argument("name", help="the job's name (wsjob-...)")
    cancel.set_defaults(run=cmd_cancel)

    label = commands.add_parser("label", help="Label resources",
                                description="Add (key=value) or remove (key-) labels of a job.")
    label.add_argument("type", help="job")
    label.add_argument("name", help="the job's name (wsjob-...)")
    label.add_argument("labels", nargs="+", metavar="key=value|key-")
    label.set_defaults(run=cmd_label)

    types = commands.add_parser("types", help="Display resource types",
                                description="Display resource types.")
    types.set_defaults(run=cmd_types, offline=True)

    cfg = commands.add_parser("config", help="View csctl config files",
                              description="View the csctl config file (--csconfig).")
    cfg.add_argument("view", nargs="?", choices=["view"], help="show the config (default)")
    cfg.set_defaults(run=cmd_config, offline=True)

    cache = commands.add_parser("clear-worker-cache", help="Clear the worker cache",
                                description="Clear the worker cache.")
    cache.set_defaults(run=cmd_clear_worker_cache)

    export = commands.add_parser("log-export", help="Gather and download logs.",
                                 description="Gather and download a job's logs.")
    export.add_argument("name", help="the job's name (wsjob-...)")
    export.add_argument("-b", "--binaries", action="store_true")
    export.add_argument("-c", "--compile-only", action="store_true")
    export.add_argument("-p", "--path", default=".")
    export.set_defaults(run=cmd_log_export)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.version:
        print(f"csctl version {VERSION}")
        return 0
    if args.help or not args.command:
        sys.stdout.write(USAGE)
        return 0
    try:
        if getattr(args, "offline", False):
            args.run(None, args)
            return 0
        usernode = config.load_usernode_config(args.csconfig)
        args.namespace = args.namespace or config.default_namespace(usernode)
        api = KubeApi(config.user_credentials(usernode))
        args.run(api, args)
    except ApiError as err:
        if err.status == 404 and getattr(args, "name", None):
            print(f"Error: job {args.name} not found in namespace {args.namespace}",
                  file=sys.stderr)
        elif err.status == 403:
            print(f"Error: {_forbidden(err.message, args.namespace)}", file=sys.stderr)
        else:
            print(f"Error: {err.message}", file=sys.stderr)
        return 1
    except (CsctlError, config.ConfigError, Unreachable) as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    return 0


def _forbidden(message: str, namespace: str) -> str:
    if "denied request: " in message:
        return message.split("denied request: ", 1)[1]
    if "cannot" in message and "namespace" in message:
        return f"you may not use namespace {namespace!r} (permission denied)"
    return message


if __name__ == "__main__":
    sys.exit(main())
