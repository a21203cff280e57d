"""This host's part of the GroqRack's PBS complex (OpenPBS), set up at every start.

The cluster's state directory holds the complex (pbs/pbs.json, a pbs_complex.Complex:
the server, the execution hosts (GroqNodes), the login nodes). From it and node.json:

  init      (node-init hook) /etc/pbs.conf for this host's part: the server runs
            pbs_server, pbs_sched and pbs_comm; a GroqNode runs pbs_mom; a login node
            only the commands. A mom gets its config ($clienthost, $usecp for the shared
            trees) and the prologue/epilogue that hand the job its GroqCards (tspd).
  hosts     the PBS hosts' addresses in /etc/hosts (see below)
  converge  on the server, idempotently: the GroqCard resource `groq_accelerator`
            (8 per node, host-level consumable, a default chunk takes a whole node's),
            the execution hosts, the scheduler's resources line, and the ALCF policy
            that jobs are submitted from GroqNodes (workq's acl_hosts) while qstat
            works everywhere
  health    the daemons this host runs answer

Why /etc/hosts: PBS names a host by the reverse lookup of its address, and Docker's
resolver answers a reverse lookup with the container's name (`<cluster>-groq-r01-gn-01`),
which is neither the node's name nor resolvable by it. A block of /etc/hosts (the
file Docker mounts into the container, rewritten in place) maps each PBS host's
current address to its name and FQDN, refreshed while PBS runs.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

from aitestbed.groq.card import CARDS_PER_NODE
from aitestbed.groq.pbs_complex import Complex
from aitestbed.node.config import CLUSTER_DIR, NODE_DIR, NodeConfig
from aitestbed.node.init import install_file

PBS_EXEC = Path("/opt/pbs")
PBS_HOME = Path("/var/spool/pbs")
PBS_CONF = Path("/etc/pbs.conf")
COMPLEX = CLUSTER_DIR / "pbs" / "pbs.json"
HOSTS = Path("/etc/hosts")
PYTHON = "/opt/aitestbed/venv/bin/python"
RESOURCE = "groq_accelerator"
QUEUE = "workq"
BEGIN, END = "# BEGIN aitestbed PBS hosts", "# END aitestbed PBS hosts"
# PBS's user commands, also in /usr/local/bin on the complex's hosts: `ssh node qstat`
# and job scripts find them without a login shell's PATH (mpiexec stays PBS's own).
COMMANDS = ("qsub", "qstat", "qdel", "qhold", "qrls", "qalter", "qmove", "qorder", "qrerun",
            "qselect", "qsig", "qmsg", "qmgr", "pbsnodes", "pbsdsh", "tracejob",
            "pbs_rsub", "pbs_rstat", "pbs_rdel", "pbs_ralter", "pbs_release_nodes")
BIN = Path("/usr/local/bin")
# The scheduler's default resources line (src/scheduler/pbs_sched_config).
SCHED_RESOURCES = '"ncpus, mem, arch, host, vnode, aoe, eoe"'


def pbs_conf(role: str, server: str) -> str:
    """/etc/pbs.conf as pbs_postinstall writes it for a server, execution or client host."""
    start = {"server": (1, 1, 1, 0), "mom": (0, 0, 0, 1), "client": (0, 0, 0, 0)}[role]
    names = ("PBS_START_SERVER", "PBS_START_SCHED", "PBS_START_COMM", "PBS_START_MOM")
    lines = [f"PBS_EXEC={PBS_EXEC}", f"PBS_SERVER={server}",
             *(f"{n}={v}" for n, v in zip(names, start, strict=True)),
             f"PBS_HOME={PBS_HOME}", "PBS_CORE_LIMIT=unlimited", "PBS_SCP=/usr/bin/scp"]
    return "\n".join(lines) + "\n"


def mom_config(server: str, shared: list[str]) -> str:
    """mom_priv/config: the server may talk to this mom; output files land in the shared
    trees by a copy (no scp between nodes: /home and /projects are the same everywhere)."""
    lines = [f"$clienthost {server}", "$restrict_user_maxsysid 999"]
    lines += [f"$usecp *:{path}/ {path}/" for path in shared]
    return "\n".join(lines) + "\n"


# The site's shell set-up for jobs: a job's bash is not a login shell, so PBS's job
# environment names the file that defines `conda` (the docs' job scripts run
# `conda activate groqflow`) as BASH_ENV, which a non-interactive bash reads.
JOB_BASH_ENV = Path("/etc/profile.d/conda.sh")


def pbs_environment(current: str, bash_env: Path | None) -> str:
    """PBS_HOME/pbs_environment (the variables every job starts with) with BASH_ENV set."""
    lines = [ln for ln in current.splitlines() if ln and not ln.startswith("BASH_ENV=")]
    if bash_env is not None:
        lines.append(f"BASH_ENV={bash_env}")
    return "\n".join(lines) + "\n"


HOOK = """#!/bin/sh
# PBS runs this as root on the job's first host {when}: the job's GroqCards (tspd).
exec {python} -m aitestbed.groq.pbs_hooks {which} "$@"
"""


def hosts_block(addresses: dict[str, str], domain: str) -> str:
    lines = [BEGIN]
    lines += [f"{ip} {name}.{domain} {name}" for name, ip in addresses.items()]
    return "\n".join([*lines, END]) + "\n"


def with_block(current: str, block: str) -> str:
    """/etc/hosts with our block replaced (or added), everything else kept."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.S)
    kept = pattern.sub("", current)
    if kept and not kept.endswith("\n"):
        kept += "\n"
    return kept + block


def resolve(names: list[str]) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = socket.gethostbyname(name)
        except OSError:
            continue  # not started yet: the next refresh adds it
    return found


def refresh_hosts(complex_: Complex, me: str, path: Path = HOSTS) -> bool:
    addresses = {n: ip for n, ip in resolve(complex_.hosts).items() if n != me}
    current = path.read_text() if path.exists() else ""
    wanted = with_block(current, hosts_block(addresses, complex_.domain))
    if wanted == current:
        return False
    with open(path, "r+") as out:  # in place: Docker bind-mounts /etc/hosts
        out.write(wanted)
        out.truncate()
    return True


def init(node: NodeConfig, complex_: Complex) -> list[str]:
    """Write this host's PBS files; returns what was written (for node-init's log)."""
    role = complex_.role(node.name)
    written = []
    if not (PBS_HOME / ("server_priv" if role == "server" else "mom_priv")).is_dir():
        # PBS's own post-install makes PBS_HOME (a fresh volume on the server).
        subprocess.run([str(PBS_EXEC / "libexec" / "pbs_postinstall"),
                        "server" if role == "server" else "execution"],
                       check=True, stdout=subprocess.DEVNULL, env={"PBS_EXEC": str(PBS_EXEC),
                                                                  "PATH": "/usr/bin:/bin"})
        written.append(str(PBS_HOME))
    install_file(pbs_conf(role, complex_.server), PBS_CONF, 0o644)
    written.append(str(PBS_CONF))
    for command in COMMANDS:
        link, target = BIN / command, PBS_EXEC / "bin" / command
        if target.exists() and not link.exists() and not link.is_symlink():
            link.symlink_to(target)
    if role == "mom":
        shared = [m for m in node.mounts if m in ("/home", "/projects")]
        install_file(mom_config(complex_.server, shared), PBS_HOME / "mom_priv" / "config", 0o644)
        for which, when in (("prologue", "before the job"), ("epilogue", "after the job")):
            install_file(HOOK.format(when=when, python=PYTHON, which=which),
                         PBS_HOME / "mom_priv" / which, 0o700)
        environment = PBS_HOME / "pbs_environment"
        current = environment.read_text() if environment.exists() else "PATH=/bin:/usr/bin\n"
        install_file(pbs_environment(current, JOB_BASH_ENV if JOB_BASH_ENV.exists() else None),
                     environment, 0o644)
        written.append(str(PBS_HOME / "mom_priv"))
    return written


def qmgr(command: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PBS_EXEC / "bin" / "qmgr"), "-c", command],
                          capture_output=True, text=True, check=False)


def server_commands(complex_: Complex, existing_nodes: set[str], has_resource: bool) -> list[str]:
    """The qmgr commands that bring the server to the GroqRack's configuration (pure)."""
    commands = []
    if not has_resource:
        commands.append(f"create resource {RESOURCE} type=long,flag=nh")
    commands += [
        "set server flatuid = True",
        "set server job_history_enable = True",
        "set server scheduler_iteration = 10",
        f"set server default_chunk.{RESOURCE} = {CARDS_PER_NODE}",
        # ALCF: "pbs qsub is not supported from login nodes"; qstat works everywhere.
        f"set queue {QUEUE} acl_host_enable = True",
        f'set queue {QUEUE} acl_hosts = "'
        + ",".join(f"{h},{h}.{complex_.domain}" for h in [*complex_.moms, complex_.server])
        + '"',
    ]
    for mom in complex_.moms:
        if mom not in existing_nodes:
            commands.append(f"create node {mom}")
        commands.append(f"set node {mom} resources_available.{RESOURCE} = {CARDS_PER_NODE}")
    return commands


def sched_config(text: str) -> str:
    """sched_config with groq_accelerator on its resources line (the scheduler considers
    only the resources named there)."""
    if re.search(rf'^resources:.*\b{RESOURCE}\b', text, re.M):
        return text
    return re.sub(r'^resources:\s*"([^"]*)"', rf'resources: "\1, {RESOURCE}"', text,
                  count=1, flags=re.M)


def converge(complex_: Complex, me: str) -> list[str]:
    """Refresh /etc/hosts; on the server, apply what server_commands says is missing."""
    changed = ["/etc/hosts"] if refresh_hosts(complex_, me) else []
    if complex_.role(me) != "server":
        return changed
    listing = qmgr("list node @default")
    nodes = set(re.findall(r"^Node (\S+)", listing.stdout, re.M)) if listing.returncode == 0 \
        else set()
    has_resource = qmgr(f"list resource {RESOURCE}").returncode == 0
    state = PBS_HOME / "server_priv" / "aitestbed-converged"
    wanted = server_commands(complex_, nodes, has_resource)
    if state.exists() and state.read_text() == "\n".join(wanted) and set(complex_.moms) <= nodes:
        return changed
    failed = False
    for command in wanted:
        result = qmgr(command)
        if result.returncode:
            failed = True
            print(f"qmgr -c {command!r}: {(result.stderr or result.stdout).strip()}",
                  file=sys.stderr)
    config = PBS_HOME / "sched_priv" / "sched_config"
    if config.exists():
        text = config.read_text()
        if sched_config(text) != text:
            config.write_text(sched_config(text))
            _hup_scheduler()
    if not failed:  # else the next round tries again
        state.write_text("\n".join(server_commands(complex_, nodes | set(complex_.moms), True)))
    return [*changed, "qmgr"]


def _hup_scheduler() -> None:
    lock = PBS_HOME / "sched_priv" / "sched.lock"
    try:
        pid = int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    subprocess.run(["kill", "-HUP", str(pid)], check=False)


def health(complex_: Complex, me: str) -> int:
    role = complex_.role(me)
    if role == "server":
        result = subprocess.run([str(PBS_EXEC / "bin" / "qstat"), "-B"], capture_output=True,
                                text=True, check=False)
        return 0 if result.returncode == 0 and "Active" in result.stdout else 1
    if role == "mom":
        result = subprocess.run([str(PBS_EXEC / "bin" / "pbsnodes"), me], capture_output=True,
                                text=True, check=False)
        return 0 if re.search(r"state = (free|job-busy|job-exclusive)", result.stdout) else 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("init", "hosts", "converge", "health"):
        print("usage: python -m aitestbed.groq.pbs_setup init|hosts|converge|health",
              file=sys.stderr)
        return 2
    node = NodeConfig.load(NODE_DIR)
    if not COMPLEX.exists():
        return 0  # no PBS complex in this cluster (a login node of another system)
    domain = node.fqdn.split(".", 1)[1] if "." in node.fqdn else "ai.alcf.anl.gov"
    complex_ = Complex.load(COMPLEX, domain)
    if node.name not in complex_.hosts:
        return 0
    if argv[0] == "init":
        for path in init(node, complex_):
            print(f"pbs: wrote {path}")
        refresh_hosts(complex_, node.name)
    elif argv[0] == "hosts":
        refresh_hosts(complex_, node.name)
    elif argv[0] == "converge":
        converge(complex_, node.name)
    else:
        return health(complex_, node.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
