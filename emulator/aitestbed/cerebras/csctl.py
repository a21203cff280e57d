"""csctl: the Cerebras cluster command-line tool, on the appliance's Kubernetes API.

Every user sees every job; cancel and label reach the API server as the user
(their client certificate), where RBAC and the ownership policy decide.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aitestbed.cerebras import config, wsjob
from aitestbed.cerebras.kubeapi import ApiError, KubeApi, Unreachable

RECENT_SECONDS = 3600  # `get jobs` without -a also lists jobs that ended this recently
LOGS_GRANT_SECONDS = 5.0
USAGE_2023 = """Cerebras cluster command line tool.

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
USAGE_2026 = """Cerebras cluster command line tool.

Usage:
  csctl [command]

Available Commands:
  cancel             Cancel job
  check-volumes      Check volume validity on this usernode
  clear-worker-cache Clear the worker cache
  cluster            Manage cluster resources and information
  config             View csctl config files
  debug-artifact     Manage debug artifacts.
  get                Get resources
  job                Job management commands
  label              Label resources
  log-export         Gather and download logs.
  session            Session management commands
  system-maintenance System maintenance commands
  types              Display resource types

Flags:
      --csconfig string    config file /opt/cerebras/config_v2 (default "/opt/cerebras/config_v2")
  -d, --debug int          higher debug values will display more fields in output objects
  -h, --help               help for csctl
  -n, --namespace string   configure csctl to talk to different user namespaces
      --version            version for csctl

Use "csctl [command] --help" for more information about a command.
"""


@dataclass(frozen=True)
class Edition:
    """What csctl looks like in one release of the cluster software: the 2023 guide's
    (R 2.1.1 on the CS-2 cluster) or the current docs' (R 2.10.0 on the CS-3 cluster)."""

    version: str
    usage: str
    dashboard_host: str
    types: tuple[str, ...]
    columns_2026: bool  # SESSION, TYPE, PRIORITY and WORKFLOW; get cluster; -a/--all-states


EDITION_2023 = Edition("2.1.1", USAGE_2023, "grafana.cerebras1.lab.alcf.anl.gov", ("jobs",),
                       columns_2026=False)
EDITION_2026 = Edition("2.10.0", USAGE_2026, "grafana.anl0.cerebras.internal",
                       ("jobs", "cluster", "system", "node", "nodegroup", "version"),
                       columns_2026=True)
# The help's commands that the emulated cluster does not offer (cluster operations).
NOT_EMULATED = ("cluster", "debug-artifact", "job", "session", "system-maintenance")
VOLUMES = ("/home", "/projects", "/software")
DASHBOARD = ("https://{host}/d/WebHNShVz/wsjob-dashboard"
             "?orgId=1&var-wsjob={name}&from={start}&to={end}")


def edition_for(release: str | None) -> Edition:
    """The edition of the cluster's release (/etc/cerebras/cluster.json): 2.10 and later
    print the current docs' columns."""
    return EDITION_2026 if wsjob.release_tuple(release) >= (2, 10) else EDITION_2023


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


def dashboard(job: dict, edition: Edition) -> str:
    """The job's Grafana dashboard, as csctl and the 2.10 client's log lines give it."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    return DASHBOARD.format(host=edition.dashboard_host, name=meta.get("name", ""),
                            start=_ms(wsjob.parse_time(meta.get("creationTimestamp"))),
                            end=_ms(wsjob.parse_time(status.get("completionTime"))))


def row(job: dict, now: datetime.datetime, edition: Edition = EDITION_2023) -> list[str]:
    """NAME AGE DURATION PHASE SYSTEMS USER LABELS DASHBOARD (2026: also SESSION first, TYPE
    and PRIORITY after NAME, WORKFLOW before DASHBOARD)."""
    meta, status = job["metadata"], job.get("status") or {}
    created = wsjob.parse_time(meta.get("creationTimestamp"))
    started = wsjob.parse_time(status.get("startTime"))
    ended = wsjob.parse_time(status.get("completionTime"))
    duration = human_duration(((ended or now) - started).total_seconds()) if started else ""
    labels = ",".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items()))
    cells = [meta["name"], human_duration((now - created).total_seconds()) if created else "",
             duration, wsjob.phase(job), ",".join(status.get("systems") or []),
             wsjob.owner(job), labels,
             dashboard(job, edition)]
    if edition.columns_2026:
        spec = job.get("spec") or {}
        cells[1:1] = [spec.get("jobType", ""),
                      wsjob.priority_label(int(spec.get("priority", wsjob.DEFAULT_PRIORITY)))]
        cells.insert(0, meta.get("namespace", ""))
        cells.insert(-1, spec.get("workflowId", ""))
    return cells


HEADER_2023 = ["NAME", "AGE", "DURATION", "PHASE", "SYSTEMS", "USER", "LABELS", "DASHBOARD"]
HEADER_2026 = ["SESSION", "NAME", "TYPE", "PRIORITY", "AGE", "DURATION", "PHASE", "SYSTEMS",
               "USER", "LABELS", "WORKFLOW", "DASHBOARD"]


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    return "\n".join(lines) + "\n"


def format_jobs(jobs: list[dict], output: str, now: datetime.datetime, debug: int = 0,
                edition: Edition = EDITION_2023) -> str:
    """The table (with -d 1 or more, also each job's type, workload node and message)."""
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}, indent=2) + "\n"
    if output == "yaml":
        import yaml  # only when asked: keeps the common table path fast
        return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": jobs},
                              sort_keys=False)
    if edition.columns_2026:
        rows = [row(j, now, edition) for j in jobs]
        header = list(HEADER_2026)
        if debug > 0:
            header[7:7] = ["NODE"]
            header.append("MESSAGE")
            for cells, job in zip(rows, jobs, strict=True):
                status = job.get("status") or {}
                cells[7:7] = [status.get("node", "")]
                cells.append(status.get("message", ""))
        return table(rows, header)
    header = list(HEADER_2023)
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
JOB_TYPES = ("job", "jobs", "wsjob", "wsjobs")
CLUSTER_TYPES = ("cluster", "system", "systems", "node", "nodes")
ROLES = ("management", "coordinator", "swarmx", "memoryx", "activation", "worker")


def _job_type(value: str) -> str:
    if value not in JOB_TYPES:
        raise CsctlError(f'unknown resource type "{value}": run `csctl types` for the types')
    return "jobs"


def _check_type(value: str, edition: Edition) -> None:
    known = {*JOB_TYPES, *(CLUSTER_TYPES + ("nodegroup", "nodegroups", "version")
                          if edition.columns_2026 else ())}
    if value not in known:
        raise CsctlError(f'unknown resource type "{value}": run `csctl types` for the types')


def sort_jobs(jobs: list[dict], by: str, order: str) -> list[dict]:
    """By scheduling priority (priority value, then age) or age; desc lists the most
    urgent (or oldest) first, as csctl does."""
    def age_key(job):
        return (job["metadata"].get("creationTimestamp", ""), job["metadata"]["name"])

    if by == "priority":
        ordered = sorted(jobs, key=lambda j: (
            int((j.get("spec") or {}).get("priority", wsjob.DEFAULT_PRIORITY)), *age_key(j)))
    else:
        ordered = sorted(jobs, key=age_key)
    return ordered if order == "desc" else ordered[::-1]


# the cluster --------------------------------------------------------------------
SUPPORT_PREFIX = "cer-anl-net001"  # the user nodes' own pattern: cer-anl-net001-us-sr01
SUPPORT_ROLES = (("worker", "wk", "workers"), ("activation", "ax", "activation"),
                 ("swarmx", "sx", "swarmx"))


def cluster_rows(settings: dict, jobs: list[dict]) -> list[dict]:
    """Every system and node of the cluster with its state and the jobs on it.

    Systems and the management node are the cluster's own containers; the servers
    around them (workers, activation, MemoryX groups, SwarmX) are the inventory's
    counts (cerebras_support), each execute job holding one MemoryX group."""
    active = [j for j in jobs if wsjob.phase(j) in wsjob.ACTIVE]
    executes = sorted((j for j in active if j["spec"].get("jobType") == "execute"),
                      key=lambda j: ((j.get("status") or {}).get("startTime") or "",
                                     j["metadata"]["name"]))
    model = settings.get("system_model", "CS-2")
    rows = []
    for system in settings.get("systems", []):
        held = [j["metadata"]["name"] for j in active
                if system in ((j.get("status") or {}).get("systems") or [])]
        rows.append({"name": system, "type": "system", "role": model, "details": "",
                     "state": "in use" if held else "ok", "jobs": held})
    management = settings.get("management_node")
    if management:
        compiles = [j["metadata"]["name"] for j in active
                    if j["spec"].get("jobType") == "compile"]
        rows.append({"name": management, "type": "node", "role": "management",
                     "details": "", "state": "in use" if compiles else "ok", "jobs": compiles})
    support = settings.get("support") or {}
    running = [j["metadata"]["name"] for j in executes]
    for role, short, key in SUPPORT_ROLES:
        for index in range(int(support.get(key, 0))):
            rows.append({"name": f"{SUPPORT_PREFIX}-{short}-sr{index + 1:02d}", "type": "node",
                         "role": role, "details": "", "state": "in use" if running else "ok",
                         "jobs": list(running)})
    number = 0
    for group, (nodes, memory) in enumerate(support.get("memoryx_groups") or []):
        job = running[group:group + 1]
        for _ in range(int(nodes)):
            number += 1
            rows.append({"name": f"{SUPPORT_PREFIX}-mx-sr{number:02d}", "type": "node",
                         "role": "memoryx", "details": f"nodegroup{group} {memory}",
                         "state": "in use" if job else "ok", "jobs": job})
    return rows


def filter_cluster(rows: list[dict], kind: str, args) -> list[dict]:
    if kind in ("system", "systems") or args.system_only:
        rows = [r for r in rows if r["type"] == "system"]
    if kind in ("node", "nodes") or args.node_only:
        rows = [r for r in rows if r["type"] == "node"]
    if args.error_only:
        rows = [r for r in rows if r["state"] not in ("ok", "in use")]
    if args.role:
        if args.role not in ROLES:
            raise CsctlError(f"invalid role: {args.role}, allowed roles: [{', '.join(ROLES)}]")
        rows = [r for r in rows if r["role"] == args.role]
    if args.system:
        rows = [r for r in rows if r["type"] != "system" or r["name"] == args.system]
    return rows


def format_cluster(rows: list[dict], output: str) -> str:
    if output in ("json", "yaml"):
        data = {"kind": "Cluster", "items": rows}
        if output == "json":
            return json.dumps(data, indent=2) + "\n"
        import yaml
        return yaml.safe_dump(data, sort_keys=False)
    return table([[r["name"], r["type"], r["role"], r["details"], r["state"],
                   ",".join(r["jobs"])] for r in rows],
                 ["NAME", "TYPE", "ROLE", "DETAILS", "STATE", "JOBS"])


def format_nodegroups(settings: dict, jobs: list[dict]) -> str:
    rows = cluster_rows(settings, jobs)
    groups = []
    for index, (nodes, memory) in enumerate((settings.get("support") or {})
                                            .get("memoryx_groups") or []):
        members = [r for r in rows if r["details"].startswith(f"nodegroup{index} ")]
        held = members[0]["jobs"] if members else []
        groups.append([f"nodegroup{index}", str(nodes), memory, ",".join(held)])
    return table(groups, ["NAME", "MEMORYX", "MEMORY", "JOB"])


def cmd_get(api: KubeApi, args) -> None:
    edition = args.edition
    _check_type(args.type, edition)
    now = datetime.datetime.now(datetime.timezone.utc)
    if args.type == "version":
        release = args.settings.get("release", edition.version)
        sys.stdout.write(table([["cluster-server", release], ["job-operator", release],
                                ["csctl", edition.version]], ["COMPONENT", "VERSION"]))
        return
    if args.type not in JOB_TYPES:
        listing = api.list_jobs(args.namespace).get("items", [])
        if args.type.startswith("nodegroup"):
            sys.stdout.write(format_nodegroups(args.settings, listing))
            return
        rows = filter_cluster(cluster_rows(args.settings, listing), args.type, args)
        sys.stdout.write(format_cluster(rows, args.output))
        return
    if args.name:
        jobs = [api.get_job(args.name, args.namespace)]
    else:
        listing = api.list_jobs(args.namespace, label_selector=args.selector)
        jobs = [j for j in listing.get("items", []) if visible(j, now, args.all)]
        if args.my_jobs:
            jobs = [j for j in jobs if wsjob.owner(j) == config.current_user()]
        if args.workflow:
            jobs = [j for j in jobs if j["spec"].get("workflowId") == args.workflow]
        if edition.columns_2026:
            jobs = sort_jobs(jobs, args.sort, args.order)
        else:
            jobs.sort(key=lambda j: (j["metadata"].get("creationTimestamp", ""),
                                     j["metadata"]["name"]))
        if args.max_jobs:
            jobs = jobs[:args.max_jobs]
    sys.stdout.write(format_jobs(jobs, args.output, now, args.debug, edition))


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


def cmd_types(_api, args) -> None:
    print("\n".join(args.edition.types))


def cmd_check_volumes(_api, _args) -> None:
    """The cluster volumes this usernode must have for the appliance to read users' files."""
    rows, bad = [], []
    for path in VOLUMES:
        ok = os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)
        rows.append([path, "valid" if ok else "missing or unreadable"])
        if not ok:
            bad.append(path)
    sys.stdout.write(table(rows, ["VOLUME", "STATUS"]))
    if bad:
        raise CsctlError(f"invalid volume(s) on this usernode: {', '.join(bad)}")


def cmd_not_emulated(_api, args) -> None:
    raise CsctlError(f"`csctl {args.command}` manages the cluster itself (an operator's "
                     "command): the emulated cluster (aitestbed) does not offer it")


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
    flags.add_argument("-n", "--namespace", default=default(None),
                       help="configure csctl to talk to different user namespaces")
    flags.add_argument("--csconfig", type=Path, default=default(None),
                       help="the usernode config (default /opt/cerebras/config_v2)")
    return flags


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="csctl", add_help=False, parents=[_global_flags(True)])
    top.add_argument("-h", "--help", action="store_true")
    top.add_argument("-v", "--version", action="store_true")  # 2.10: --version only
    later = _global_flags(False)
    commands = top.add_subparsers(dest="command", metavar="command",
                                  parser_class=lambda **kw: argparse.ArgumentParser(
                                      parents=[later], **kw))

    get = commands.add_parser("get", help="Get resources", description="Get resources.")
    get.add_argument("type", help="resource type (csctl types)")
    get.add_argument("name", nargs="?", help="a job's name")
    get.add_argument("-a", "--all", "--all-states", action="store_true",
                     help="show cluster/job in all states (jobs that ended too)")
    get.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table",
                     help="output format (default table)")
    get.add_argument("-l", "--labels", "--selector", dest="selector",
                     help="label selector, e.g. -l name=bert_pt,k2=v2")
    get.add_argument("-m", "--my-jobs", action="store_true", help="only show my jobs")
    get.add_argument("--workflow", help="filter jobs by specific workflow id")
    get.add_argument("--sort", choices=["priority", "age"], default="priority",
                     help="sort criteria of returned jobs (default priority)")
    get.add_argument("--order", choices=["desc", "asc"], default="desc",
                     help="sort order of returned jobs (default desc, highest/oldest first)")
    get.add_argument("--max-jobs", type=int, default=5000,
                     help="maximum number of results to return (0 means no limit)")
    get.add_argument("--system-only", action="store_true",
                     help="show only systems in cluster status output")
    get.add_argument("--node-only", action="store_true",
                     help="show only nodes in cluster status output")
    get.add_argument("-e", "--error-only", action="store_true",
                     help="show only error nodes/systems in cluster status output")
    get.add_argument("--system", help="filter systems by specific name in output")
    get.add_argument("--role", help="show nodes with this role only: " + "/".join(ROLES))
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

    volumes = commands.add_parser("check-volumes", help="Check volume validity on this usernode",
                                  description="Check volume validity on this usernode.")
    volumes.set_defaults(run=cmd_check_volumes, offline=True)
    for name in NOT_EMULATED:
        extra = commands.add_parser(name, help="not emulated (an operator's command)",
                                    description="Not emulated by aitestbed.")
        extra.add_argument("rest", nargs=argparse.REMAINDER)
        extra.set_defaults(run=cmd_not_emulated, offline=True)
    return top


def main(argv: list[str] | None = None, settings: dict | None = None) -> int:
    """csctl; `settings` (/etc/cerebras/cluster.json by default) choose the edition."""
    settings = config.cluster_settings() if settings is None else settings
    edition = edition_for(settings.get("release"))
    argv = sys.argv[1:] if argv is None else argv
    if edition.columns_2026 and "-v" in argv:  # 2.10 has --version only
        print("Error: unknown shorthand flag: 'v' in -v", file=sys.stderr)
        return 1
    args = parser().parse_args(argv)
    args.edition, args.settings = edition, settings
    if args.version:
        print(f"csctl version {edition.version}")
        return 0
    if args.help or not args.command:
        sys.stdout.write(edition.usage)
        return 0
    if args.command in (*NOT_EMULATED, "check-volumes") and not edition.columns_2026:
        print(f'Error: unknown command "{args.command}" for "csctl"', file=sys.stderr)
        return 1
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
