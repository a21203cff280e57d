"""myquota: home and project usage against the ALCF AI Testbed quotas.

The user guide's defaults: /home 1 TB and 1,000,000 files per user, /projects
2 TB and 2,000,000 files per project. Quotas come from the cluster's accounts file
(users[].quota, projects[].quota); usage is measured by walking the trees (the quota
limits themselves are read on the host only). A tree over its quota is marked, and
the exit status stays 0.

Where the cluster has file systems of its own (aitestbed.host.storage), each home and
project is a btrfs subvolume whose byte quota the kernel enforces ("Disk quota
exceeded"); on Docker volumes, quotas are reported, not enforced. myquota tells which.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from aitestbed.node.config import ACCOUNTS

HOME_QUOTA = {"bytes": 1 << 40, "files": 1_000_000}
PROJECT_QUOTA = {"bytes": 2 << 40, "files": 2_000_000}
FOOTNOTE = ("Quotas are reported, not enforced, in the emulated testbed: its volumes have no "
            "filesystem quotas.\nA line marked OVER QUOTA would be over its limit at ALCF.")
ENFORCED = ('Byte quotas are enforced: a write past one fails with "Disk quota exceeded". '
            "File quotas are reported, not enforced.")
SUBVOLUME_INO = 256  # btrfs: the root directory of every subvolume
# (title, least width); one space between columns.
COLUMNS = [("Name", 15), ("Type", 8), ("Filesystem", 12), ("Used", 9), ("Quota", 9),
           ("Use%", 6), ("Files", 9), ("File quota", 10), ("Use%", 6)]


class QuotaError(Exception):
    """A request myquota refuses; main prints it and exits 1."""


@dataclass
class Usage:
    name: str
    type: str  # "user" or "project"
    filesystem: str
    path: str
    used_bytes: int
    quota_bytes: int
    used_files: int
    quota_files: int
    enforced: bool = False  # the byte quota is the file system's (a write past it fails)

    @property
    def over_quota(self) -> bool:
        return self.used_bytes > self.quota_bytes or self.used_files > self.quota_files

    def as_dict(self) -> dict:
        pcts = {f"{kind}_percent": None if p is None else round(p, 2) for kind, p in
                (("bytes", percent(self.used_bytes, self.quota_bytes)),
                 ("files", percent(self.used_files, self.quota_files)))}
        return {**asdict(self), **pcts, "over_quota": self.over_quota}


def accounts_path() -> Path:
    return Path(os.environ.get("AITESTBED_ACCOUNTS") or ACCOUNTS)


def tree_root() -> Path:
    """Prefix of /home and /projects (AITESTBED_QUOTA_ROOT, for tests; else /)."""
    return Path(os.environ.get("AITESTBED_QUOTA_ROOT") or "/")


def load_accounts(path: Path) -> dict:
    try:
        accounts = json.loads(path.read_text())
    except OSError as e:
        raise QuotaError(f"cannot read the accounts file {path}: {e.strerror}") from None
    except ValueError as e:
        raise QuotaError(f"the accounts file {path} is not valid JSON: {e}") from None
    if not isinstance(accounts, dict) or not isinstance(accounts.get("users"), list):
        raise QuotaError(f"the accounts file {path} has no users list")
    return accounts


def measure(path: Path) -> tuple[int, int]:
    """(bytes, inodes) under path, itself included, as a block quota counts them.

    Bytes are allocated blocks (st_blocks * 512), not file sizes; symlinks are
    counted, never followed; a hard-linked inode counts once. Directories the
    caller cannot read are skipped (their own inode still counts).
    """
    try:
        top = path.lstat()
    except OSError:
        return 0, 0
    used, files, seen = top.st_blocks * 512, 1, set()
    stack = [path] if stat.S_ISDIR(top.st_mode) else []
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                        if (st.st_dev, st.st_ino) in seen:
                            continue
                        seen.add((st.st_dev, st.st_ino))
                    used += st.st_blocks * 512
                    files += 1
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
        except OSError:
            continue
    return used, files


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_types(text: str) -> dict[str, str]:
    """/proc/self/mountinfo -> mount point: file system type (the last mount wins)."""
    types = {}
    for line in text.splitlines():
        fields = line.split()
        if "-" in fields[6:]:
            sep = fields.index("-", 6)
            if len(fields) > sep + 1:
                types[_unescape(fields[4])] = fields[sep + 1]
    return types


def fs_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system path is on: its longest mount point."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    types = mount_types(mountinfo)
    path = Path(os.path.abspath(path))
    for candidate in (path, *path.parents):
        if str(candidate) in types:
            return types[str(candidate)]
    return None


def bytes_enforced(path: Path) -> bool:
    """Whether the kernel enforces path's byte quota: on a cluster with file systems of
    its own, the host makes each home and project a btrfs subvolume with a limit."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_ino == SUBVOLUME_INO
            and fs_type(path) == "btrfs")


def human(n: int) -> str:
    """1.21G: powers of 1024, two decimals, K at the least."""
    value = n / 1024
    for suffix in "KMGT":
        if value < 1024 or suffix == "T":
            return f"{value:.2f}{suffix}"
        value /= 1024
    raise AssertionError("unreachable")


def percent(used: int, quota: int) -> float | None:
    return 100 * used / quota if quota > 0 else None


def _quota(entry: dict, default: dict) -> tuple[int, int]:
    quota = {**default, **(entry.get("quota") or {})}
    return int(quota["bytes"]), int(quota["files"])


def _find(items: list[dict], name: str) -> dict | None:
    return next((item for item in items if item.get("name") == name), None)


def is_member(project: dict, user: str) -> bool:
    return user in project.get("members", []) or user == project.get("pi")


def _usage(entry: dict, kind: str, filesystem: str, default: dict, root: Path) -> Usage:
    """The usage of entry's directory, filesystem/<name>, against its quota."""
    path = root / filesystem.lstrip("/") / entry["name"]
    used, files = measure(path)
    quota_bytes, quota_files = _quota(entry, default)
    return Usage(entry["name"], kind, filesystem, f"{filesystem}/{entry['name']}",
                 used, quota_bytes, files, quota_files, bytes_enforced(path))


def user_usage(user: dict, root: Path) -> Usage:
    return _usage(user, "user", "/home", HOME_QUOTA, root)


def project_usage(project: dict, root: Path) -> Usage:
    return _usage(project, "project", "/projects", PROJECT_QUOTA, root)


def invoking_user(accounts: dict) -> str | None:
    """The real uid's name: from the accounts file, else the passwd database."""
    uid = os.getuid()
    user = next((u for u in accounts["users"] if u.get("uid") == uid), None)
    if user is not None:
        return user["name"]
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def select(accounts: dict, user: str | None, project: str | None) -> list[tuple[str, dict]]:
    """What the caller asked for and may see, as ("user"|"project", entry) pairs."""
    root = os.getuid() == 0
    me = invoking_user(accounts)
    projects = accounts.get("projects") or []
    if project is not None:  # even a purged one (its directory is gone: nothing used)
        found = _find(projects, project)
        if found is None:
            raise QuotaError(f"no such project: {project}")
        if not root and not is_member(found, me or ""):
            raise QuotaError(f"only members of project {project} (and root) may ask for its quota")
        return [("project", found)]
    if user is not None and user != me and not root:
        raise QuotaError("only root may ask for another user's quota")
    name = user or me
    found = _find(accounts["users"], name or "")
    projects = sorted((p for p in projects if not p.get("purged")), key=lambda p: p["name"])
    if found is None:
        if user is None and root:  # root has no account here: show everyone
            return ([("user", u) for u in accounts["users"]]
                    + [("project", p) for p in projects])
        raise QuotaError(f"no such user in this testbed: {name or f'uid {os.getuid()}'}")
    return [("user", found)] + [("project", p) for p in projects if is_member(p, found["name"])]


def _pct(used: int, quota: int) -> str:
    p = percent(used, quota)
    return "-" if p is None else f"{p:.1f}%"


def footnote(rows: list[Usage], root: Path) -> str:
    """Whether the quotas above are enforced, and the cluster's caps where they are."""
    enforced = [u for u in rows if u.enforced]
    if not enforced:
        return FOOTNOTE
    lines = [ENFORCED if len(enforced) == len(rows) else
             f"Byte quotas are enforced on {', '.join(u.path for u in enforced)}: a write past "
             'one fails with "Disk quota exceeded". The others, and file quotas, are '
             "reported, not enforced."]
    for filesystem in sorted({u.filesystem for u in enforced}):
        try:
            fs = os.statvfs(root / filesystem.lstrip("/"))
        except OSError:
            continue
        lines.append(f"This cluster's {filesystem} holds {human(fs.f_blocks * fs.f_frsize)} "
                     "in all, whatever the quotas: past that, \"No space left on device\".")
    return "\n".join(lines)


def table(rows: list[Usage], note: str = FOOTNOTE) -> str:
    """ALCF myquota's layout; columns widen for long names, a line over quota says so."""
    cells = [[u.name, u.type.capitalize(), u.filesystem, human(u.used_bytes),
              human(u.quota_bytes), _pct(u.used_bytes, u.quota_bytes), f"{u.used_files:,}",
              f"{u.quota_files:,}", _pct(u.used_files, u.quota_files)] for u in rows]
    widths = [max([w, *(len(r[i]) for r in cells)]) for i, (_, w) in enumerate(COLUMNS)]

    def line(row: list[str]) -> str:
        return " ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    header = line([title for title, _ in COLUMNS])
    out = [header, "=" * len(header)]
    for u, row in zip(rows, cells, strict=True):
        out.append(line(row) + ("  OVER QUOTA" if u.over_quota else ""))
    return "\n".join(out + ["", note])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="myquota", description="Show /home and /projects usage against their quotas.",
        epilog="Quotas: /home 1 TB and 1,000,000 files per user; /projects 2 TB and "
               "2,000,000 files per project, unless your allocation says otherwise.")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-u", "--user", help="another user's home and projects (root only)")
    which.add_argument("-p", "--project", help="one project (its members and root)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    try:
        accounts = load_accounts(accounts_path())
        root = tree_root()
        rows = [user_usage(entry, root) if kind == "user" else project_usage(entry, root)
                for kind, entry in select(accounts, args.user, args.project)]
    except QuotaError as e:
        print(f"myquota: {e}", file=sys.stderr)
        return 1
    except (KeyError, TypeError, ValueError) as e:
        print(f"myquota: the accounts file {accounts_path()} is malformed ({e!r})",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"enforced": bool(rows) and all(u.enforced for u in rows),
                          "quotas": [u.as_dict() for u in rows]}, indent=2))
    else:
        print(table(rows, footnote(rows, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
