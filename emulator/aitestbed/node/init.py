"""Container entrypoint: apply this cluster's per-host settings, then run services.

Everything per class is in the image (roles applied at build). What differs per
cluster or host is read from the state directory the CLI mounts read-only
(aitestbed.node.config: NODE_DIR holds this host's node.json, keys and rendered
sshd files, CLUSTER_DIR the accounts, known hosts, munge key and rendered Slurm
configuration). It runs at every container start and is idempotent. The files it
writes are the same ones the roles write under `site.yml` (roles/sshd,
roles/accounts, roles/munge, roles/slurm_client); those the roles template were
rendered from the roles' own templates at `up`, so a converging `site.yml` run
finds nothing to change.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

from aitestbed.node import homes
from aitestbed.node.config import (
    ACCESS_CONF,
    ACCOUNTS,
    CLUSTER_DIR,
    NODE_DIR,
    OATH_USERS,
    NodeConfig,
)

READY = Path("/run/aitestbed/initialized")
HOOKS = Path("/etc/aitestbed/init.d")
SERVICES = "/usr/local/sbin/aitestbed-services"
ACCESS_DROPIN = Path("/etc/ssh/sshd_config.d/50-aitestbed-access.conf")
OATH_DIR = Path("/etc/oath/users")
TMPFILES_DIRS = (Path("/usr/lib/tmpfiles.d"), Path("/etc/tmpfiles.d"))


def install_file(src: Path | str, dest: Path, mode: int, uid: int = 0, gid: int = 0) -> None:
    """Write dest atomically when its content or mode differs.

    The temporary file gets a unique name: on the shared /home every node runs
    this at once, and each is PID 1 of its own container.
    """
    data = src.encode() if isinstance(src, str) else Path(src).read_bytes()
    if dest.is_file() and dest.read_bytes() == data and (dest.stat().st_mode & 0o7777) == mode:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    with os.fdopen(fd, "wb") as tmp:
        tmp.write(data)
    os.chown(name, uid, gid)
    os.chmod(name, mode)
    os.replace(name, dest)


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def ensure_groups(groups: list[dict]) -> None:
    for group in groups:
        if subprocess.run(["getent", "group", group["name"]], capture_output=True).returncode:
            run("groupadd", "-g", str(group["gid"]), group["name"])


def ensure_user(user: dict) -> None:
    name, uid, gid = user["name"], user["uid"], user["gid"]
    if subprocess.run(["getent", "group", name], capture_output=True).returncode:
        run("groupadd", "-g", str(gid), name)
    groups = ",".join(user["groups"])
    try:
        current = pwd.getpwnam(name)
    except KeyError:
        run("useradd", "-u", str(uid), "-g", str(gid), "-G", groups, "-M",
            "-d", f"/home/{name}", "-s", user["shell"], name)
    else:
        if current.pw_uid != uid:
            raise SystemExit(f"aitestbed-node-init: user {name} exists with uid {current.pw_uid}, "
                             f"the inventory says {uid}")
        run("usermod", "-G", groups, "-s", user["shell"], name)
    # An offboarded account stays (its files keep their owner) but is expired, so
    # PAM's account check refuses every login, key or passcode.
    run("usermod", "-e", "" if user.get("active", True) else "1", name)


def ensure_project_dir(project: dict) -> None:
    """/projects/<name>: the project's group shares it; new files keep the group (setgid)."""
    path = Path("/projects") / project["name"]
    if project.get("purged"):
        return
    path.mkdir(exist_ok=True)
    try:
        owner = pwd.getpwnam(project["pi"]).pw_uid
    except KeyError:
        owner = 0
    os.chown(path, owner, project["gid"])
    path.chmod(0o2770)


def ensure_home(user: dict) -> None:
    """The user's home with the cluster's hop key: created by root when missing, and
    everything inside it done as the user (aitestbed.node.homes)."""
    homes.ensure_home(user, homes.cluster_keys(CLUSTER_DIR / "users" / user["name"]))


MFA_DROPIN = Path("/etc/ssh/sshd_config.d/40-aitestbed-mfa.conf")  # roles/sshd/tasks/mfa.yml


def configure_sshd(node: NodeConfig) -> None:
    """Who may log in here and, on login nodes, the users' passcode enrolments.

    Both were rendered at `up` from roles/sshd's own templates (aitestbed.host.sshdconf).
    """
    install_file(NODE_DIR / ACCESS_CONF, ACCESS_DROPIN, 0o644)
    if node.ssh_mfa:
        enrol_passcodes(NODE_DIR / OATH_USERS)
    else:
        # a node of the login image that is not a login node (the CS-3 cluster's user
        # nodes): reached from a login node with the cluster's hop key, as the role
        # configures a host without sshd_mfa
        MFA_DROPIN.unlink(missing_ok=True)


def enrol_passcodes(source: Path) -> None:
    """One pam_oath file per user with a token (source/<user>.oath); offboarded users' files go.

    A file whose user, PIN and secret are unchanged is kept as it is: pam_oath
    records the last code used there, which is what refuses a replay.
    """
    enrolments = {path.name: path.read_text() for path in sorted(source.iterdir())
                  if path.suffix == ".oath"}
    OATH_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, wanted in enrolments.items():
        path = OATH_DIR / name
        current = path.read_text() if path.is_file() else ""
        if current.split("\t")[:4] != wanted.rstrip("\n").split("\t"):
            install_file(wanted, path, 0o600)
    for path in OATH_DIR.glob("*.oath"):
        if path.name not in enrolments:
            path.unlink(missing_ok=True)


def install_munge_key() -> None:
    munge = pwd.getpwnam("munge")
    install_file(CLUSTER_DIR / "munge.key", Path("/etc/munge/munge.key"), 0o400,
                 munge.pw_uid, munge.pw_gid)


def configure_slurm(slurm_cluster: str) -> None:
    """This host's Slurm cluster configuration, rendered at `up`."""
    for source in sorted((CLUSTER_DIR / "slurm" / slurm_cluster).iterdir()):
        install_file(source, Path("/etc/slurm") / source.name, 0o644)


def enable_services(services: list[str]) -> None:
    """Link the host's services into runit's directory (the roles do the same)."""
    for service in services:
        link = Path("/etc/service") / service
        if not link.is_symlink():
            link.symlink_to(Path("/etc/sv") / service)


def runtime_dirs(lines: list[str]) -> dict[str, tuple[int, str, str]]:
    """The directories under /run that tmpfiles.d `d` lines ask for (path -> mode, user,
    group), as systemd-tmpfiles --create makes them at boot; a later line for the same
    path wins, as in /etc over /usr/lib."""
    wanted: dict[str, tuple[int, str, str]] = {}
    for line in lines:
        fields = line.split()
        if len(fields) < 2 or fields[0] not in ("d", "D") or fields[1].startswith("#"):
            continue
        path = fields[1]
        if not path.startswith("/run/") or "%" in path or ".." in path.split("/"):
            continue
        try:
            mode = int(fields[2], 8) if len(fields) > 2 and fields[2] != "-" else 0o755
        except ValueError:
            continue
        user = fields[3] if len(fields) > 3 and fields[3] != "-" else "root"
        group = fields[4] if len(fields) > 4 and fields[4] != "-" else "root"
        wanted[path] = (mode & 0o7777, user, group)
    return wanted


def create_runtime_dirs() -> None:
    """/run is a tmpfs made empty at each start and no systemd runs here: make the
    directories the packages' tmpfiles.d ask for (e.g. /run/screen, which `screen` needs
    as a user)."""
    lines: list[str] = []
    for directory in TMPFILES_DIRS:
        if directory.is_dir():
            for conf in sorted(directory.glob("*.conf")):
                lines += conf.read_text(errors="replace").splitlines()
    for path, (mode, user, group) in runtime_dirs(lines).items():
        target = Path(path)
        if target.exists() or target.is_symlink():
            continue
        try:
            uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
        except KeyError:
            continue
        target.mkdir(parents=True, exist_ok=True)
        os.chown(target, uid, gid)
        os.chmod(target, mode)


def run_hooks() -> None:
    """Start-up steps a role installed for its hosts (e.g. links into the shared trees)."""
    if HOOKS.is_dir():
        for hook in sorted(HOOKS.iterdir()):
            if hook.is_file() and os.access(hook, os.X_OK):
                subprocess.run([str(hook)], check=True)


def main() -> None:
    READY.unlink(missing_ok=True)
    create_runtime_dirs()
    node = NodeConfig.load()
    accounts = json.loads(ACCOUNTS.read_text())

    install_file(NODE_DIR / "ssh_host_ed25519_key", Path("/etc/ssh/ssh_host_ed25519_key"), 0o600)
    install_file(NODE_DIR / "ssh_host_ed25519_key.pub",
                 Path("/etc/ssh/ssh_host_ed25519_key.pub"), 0o644)
    install_file(CLUSTER_DIR / "ssh_known_hosts", Path("/etc/ssh/ssh_known_hosts"), 0o644)
    configure_sshd(node)

    if "munge" in node.services:
        install_munge_key()
    if node.slurm_cluster:
        configure_slurm(node.slurm_cluster)
    enable_services(node.services)

    projects = accounts.get("projects", [])
    ensure_groups(accounts["groups"] + projects)
    for user in accounts["users"]:
        ensure_user(user)
        if "/home" in node.mounts and user.get("active", True):
            ensure_home(user)
    if "/projects" in node.mounts:
        for project in projects:
            ensure_project_dir(project)
    run_hooks()

    READY.parent.mkdir(parents=True, exist_ok=True)
    READY.write_text(node.name + "\n")
    sys.stdout.flush()
    os.execv(SERVICES, [SERVICES])


if __name__ == "__main__":
    try:
        main()
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError) as err:
        print(f"aitestbed-node-init: {err}", file=sys.stderr)
        sys.exit(1)
