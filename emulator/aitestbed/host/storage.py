"""Each cluster's /home and /projects on file systems of their own, with quotas.

A new cluster gets one sparse btrfs image per tree in its state directory
(storage/home.img, storage/projects.img), loop-mounted on the host at storage/home/
and storage/projects/; the containers bind the directory `tree` inside each. So:

- the image's size is the cluster's hard cap: users who fill /home get "No space
  left on device" and the host's own file system keeps its free space;
- each home and each project directory is a btrfs subvolume whose qgroup limit is
  the account's (or project's) byte quota: a write past it fails with "Disk quota
  exceeded" (EDQUOT), as on a real quota-enabled file system.

Why btrfs: its quotas (qgroups) are always built into btrfs, while ext4's need the
kernel's quota format (CONFIG_QFMT_V2) and XFS's CONFIG_XFS_QUOTA, which kernels
built for VMs leave out (an ext4 image with the quota feature is refused at mount).
A qgroup limits a directory tree, not a uid: a home is written only by its user
(0700), a project directory by its members. File counts are not limited.

`tree` exists only inside the mounted image, and containers bind it with the Mounts
API (which, unlike the legacy binds, never creates a missing source), so a container
started before its image is mounted (after a host restart) fails to start instead of
writing to the host's disk; `up` mounts first, then starts the containers.

Only root can make loop mounts. Where the host cannot (not root, no loop device, no
btrfs), a new cluster keeps Docker volumes as before, and `up` says so; the cluster
record says which kind a cluster has, so a cluster made with volumes keeps them.

The decisions (sizes, argument lists, what the mount table and btrfs say) are pure
functions; the few functions at the end run the commands.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aitestbed.host.errors import AitestbedError

IMAGE_MOUNTS = ("/home", "/projects")
MIB, GIB = 2**20, 2**30
DEFAULT_CAP = 20 * GIB  # per tree, unless the inventory's shared_storage_caps says otherwise
MIN_CAP = GIB
TREE = "tree"  # the directory inside each image that the containers bind
SUBVOLUME_INO = 256  # btrfs: the inode number of every subvolume's root directory
MOUNT_OPTIONS = "loop,nodev,nosuid"
TOOLS = ("mkfs.btrfs", "btrfs", "mount", "umount", "losetup")


class StorageError(AitestbedError):
    """A storage step that failed: `up` (or the account playbook) stops with this line."""


class Unavailable(Exception):
    """This host cannot give a new cluster its images: it keeps Docker volumes."""


# -- pure decisions -----------------------------------------------------------------


def slug(mount: str) -> str:
    """/home -> home (the image home.img, mounted at home/)."""
    return mount.strip("/").replace("/", "-")


@dataclass(frozen=True)
class Layout:
    """Where one tree of one cluster lives on the host."""

    root: Path  # the cluster's state directory
    mount: str  # /home or /projects

    @property
    def directory(self) -> Path:
        return self.root / "storage"

    @property
    def image(self) -> Path:
        return self.directory / f"{slug(self.mount)}.img"

    @property
    def mount_point(self) -> Path:
        return self.directory / slug(self.mount)

    @property
    def tree(self) -> Path:
        """What the containers bind at `mount`."""
        return self.mount_point / TREE


def topology_mounts(topology) -> list[str]:
    """Every cluster-wide mount of a Topology's nodes."""
    return sorted({m for node in topology.nodes for m in node.mounts})


def on_image(record, mount: str) -> bool:
    """Is this shared mount one of the cluster's own file systems (record.storage
    "image"), not a volume?"""
    return record.storage == "image" and mount in IMAGE_MOUNTS


def image_mounts(mounts: Iterable[str]) -> list[str]:
    """The shared trees that get an image of their own (the others stay volumes)."""
    present = set(mounts)
    return [m for m in IMAGE_MOUNTS if m in present]


def human(n: int) -> str:
    for unit, size in (("T", 2**40), ("G", GIB), ("M", MIB)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"


def plan_sizes(wanted: dict[str, int], free: int, where: Path | str = "the state directory"
               ) -> dict[str, int]:
    """Each tree's cap: as the inventory wants when together they fit in half of the
    host file system's free space, else scaled down to that half (whole MiB); so a
    cluster whose users fill every tree still leaves the host room. Refused below
    MIN_CAP a tree."""
    budget = free // 2
    total = sum(wanted.values())
    if total <= budget:
        return dict(wanted)
    sizes = {m: size * budget // total // MIB * MIB for m, size in wanted.items()}
    if min(sizes.values()) < MIN_CAP:
        need = 2 * max(total, MIN_CAP * len(wanted))
        raise StorageError(
            f"the host's file system holding {where} has {human(free)} free: a cluster's "
            f"{' and '.join(wanted)} take at most half of it and at least {human(MIN_CAP)} "
            f"each ({human(need)} free for the inventory's shared_storage_caps); free some "
            "space (old clusters: `aitestbed --name NAME destroy`, `docker system prune`)")
    return sizes


def mkfs_argv(image: Path, label: str) -> list[str]:
    return ["mkfs.btrfs", "-q", "-L", label[:255], str(image)]


def mount_argv(image: Path, target: Path) -> list[str]:
    return ["mount", "-t", "btrfs", "-o", MOUNT_OPTIONS, str(image), str(target)]


def umount_argv(target: Path) -> list[str]:
    return ["umount", str(target)]


def quota_enable_argv(target: Path) -> list[str]:
    return ["btrfs", "quota", "enable", str(target)]


def subvolume_create_argv(path: Path) -> list[str]:
    return ["btrfs", "subvolume", "create", str(path)]


def subvolume_list_argv(target: Path) -> list[str]:
    return ["btrfs", "subvolume", "list", str(target)]


def qgroup_show_argv(target: Path) -> list[str]:
    return ["btrfs", "qgroup", "show", "--raw", "-re", str(target)]


def limit_argv(path: Path, limit: int | None) -> list[str]:
    return ["btrfs", "qgroup", "limit", str(limit) if limit else "none", str(path)]


@dataclass(frozen=True)
class MountEntry:
    mount_point: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as \\040 and the like."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """/proc/self/mountinfo, in mount order."""
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3:
            continue
        entries.append(MountEntry(_unescape(fields[4]), fields[sep + 1],
                                  _unescape(fields[sep + 2])))
    return entries


def mount_state(entries: list[MountEntry], target: Path, image: Path,
                backing: dict[str, str]) -> str:
    """"mounted" when target shows the image's file system (the last mount there is the
    one seen), "unmounted" when nothing is mounted there. Anything else mounted there is
    an error. `backing`: loop device -> the file behind it (/sys/block/loopN/loop)."""
    here = [e for e in entries if e.mount_point == str(target)]
    if not here:
        return "unmounted"
    top = here[-1]
    behind = backing.get(top.source, "").removesuffix(" (deleted)")
    if top.fstype == "btrfs" and behind and os.path.normpath(behind) == os.path.realpath(image):
        return "mounted"
    raise StorageError(
        f"{target} has another file system mounted on it ({top.fstype} from {top.source}), "
        f"not {image}: unmount it (`umount {target}`) and run this again")


def parse_subvolumes(text: str) -> dict[str, int]:
    """`btrfs subvolume list`: path from the file system's top -> subvolume id."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"ID (\d+) .* path (.+)$", line.strip())
        if match:
            found[match.group(2)] = int(match.group(1))
    return found


def parse_limits(text: str) -> dict[int, int | None]:
    """`btrfs qgroup show --raw -re`: subvolume id -> its referenced-bytes limit."""
    limits: dict[int, int | None] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0].startswith("0/") and fields[0][2:].isdigit():
            limits[int(fields[0][2:])] = None if fields[3] == "none" else int(fields[3])
    return limits


@dataclass(frozen=True)
class Want:
    """A home or a project directory as the accounts say it should be."""

    name: str
    uid: int
    gid: int
    mode: int
    limit: int | None  # bytes; None: no limit
    create: bool  # made when missing (an offboarded user's home is not)


def wanted_dirs(mount: str, accounts: dict) -> list[Want]:
    """accounts.json (ClusterState.publish_accounts) -> the subvolumes of one tree."""
    users = {u["name"]: u for u in accounts.get("users", [])}
    if mount == "/home":
        return [Want(u["name"], u["uid"], u["gid"], 0o700, int(u["quota"]["bytes"]) or None,
                     bool(u.get("active", True))) for u in users.values()]
    if mount == "/projects":
        return [Want(p["name"], users[p["pi"]]["uid"] if p["pi"] in users else 0, p["gid"],
                     0o2770, int(p["quota"]["bytes"]) or None, True)
                for p in accounts.get("projects", []) if not p.get("purged")]
    return []


@dataclass(frozen=True)
class Found:
    kind: str  # "missing", "subvolume" or "other" (a plain directory, a file)
    id: int | None = None
    limit: int | None = None


def quota_actions(mount: str, wants: list[Want], found: dict[str, Found]) -> list[tuple]:
    """What to do: ("create", want) makes the subvolume (owner, mode) and sets its limit;
    ("limit", want) sets a changed limit; ("warn", text) reports a quota left unenforced."""
    actions: list[tuple] = []
    for want in wants:
        seen = found.get(want.name, Found("missing"))
        if seen.kind == "missing":
            if want.create:
                actions.append(("create", want))
        elif seen.kind == "subvolume":
            if seen.limit != want.limit:
                actions.append(("limit", want))
        else:
            actions.append(("warn", f"{mount}/{want.name} is not a subvolume of its own (it "
                                    "was made before its quota): its quota is reported, not "
                                    "enforced"))
    return actions


def loop_devices(losetup_output: str) -> list[str]:
    """`losetup -j FILE`: the loop devices attached to FILE."""
    return [line.split(":", 1)[0] for line in losetup_output.splitlines() if ":" in line]


# -- the commands -----------------------------------------------------------------------


def _run(argv: list[str], what: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False,
                                stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise StorageError(f"{what}: {argv[0]} is missing (Debian: apt-get install "
                           f"{'btrfs-progs' if 'btrfs' in argv[0] else 'util-linux mount'})"
                           ) from None
    if result.returncode:
        detail = " ".join((result.stderr or result.stdout).split()) or f"exit {result.returncode}"
        raise StorageError(f"{what}: `{' '.join(argv)}` failed: {detail}")
    return result.stdout


def unavailable() -> str | None:
    """Why this host cannot mount images (None: it can try)."""
    if os.geteuid() != 0:
        return ("only root can loop-mount the file systems that enforce them (run `up` as "
                "root, as the Makefile does)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} missing (Debian: apt-get install btrfs-progs)"
    if not Path("/dev/loop-control").exists():
        return "this host has no loop devices (/dev/loop-control)"
    return None


def _backing(entries: list[MountEntry], target: Path) -> dict[str, str]:
    backing = {}
    for entry in entries:
        if entry.mount_point == str(target) and entry.source.startswith("/dev/loop"):
            path = Path("/sys/block") / Path(entry.source).name / "loop" / "backing_file"
            try:
                backing[entry.source] = path.read_text().strip()
            except OSError:
                pass
    return backing


def current_state(layout: Layout) -> str:
    """mount_state of the tree's image now (the kernel names paths without links)."""
    entries = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    target = Path(os.path.realpath(layout.mount_point))
    return mount_state(entries, target, layout.image, _backing(entries, target))


def ensure_mounted(layout: Layout) -> bool:
    """Mount the tree's image unless it is (True when it mounted it)."""
    if current_state(layout) == "mounted":
        return False
    if not layout.image.is_file():
        raise StorageError(
            f"{layout.mount} of this cluster lives in {layout.image}, which is missing: "
            "restore it, or destroy the cluster (its files are gone) and make it again")
    layout.mount_point.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(layout.mount_point.iterdir()):
        raise StorageError(f"{layout.mount_point} is not empty while {layout.image} is not "
                           "mounted there: move what it holds away, then run this again")
    _run(mount_argv(layout.image, layout.mount_point), f"cannot mount {layout.mount}")
    return True


def create(root: Path, sizes: dict[str, int], label: str) -> None:
    """Make, mount and prepare each tree's image (sparse: it takes room as it fills).

    Raises Unavailable, with everything made removed again, when the host refuses."""
    made: list[Layout] = []
    try:
        for mount, size in sizes.items():
            layout = Layout(root, mount)
            layout.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not layout.image.exists():
                with layout.image.open("xb") as image:
                    image.truncate(size)
                made.append(layout)
                _run(mkfs_argv(layout.image, f"{label}-{slug(mount)}"),
                     f"cannot make the file system of {mount}")
            fresh = ensure_mounted(layout)
            if layout not in made and not fresh:
                continue
            _run(quota_enable_argv(layout.mount_point), f"cannot enable quotas on {mount}")
            layout.tree.mkdir(mode=0o755, exist_ok=True)
            layout.tree.chmod(0o755)
    except StorageError as err:
        for layout in made:
            try:
                release_one(layout)
            except StorageError:
                pass
            else:
                layout.image.unlink(missing_ok=True)
        raise Unavailable(str(err)) from None


def release_one(layout: Layout) -> None:
    """Unmount the tree's image and detach its loop devices."""
    if layout.mount_point.exists() and current_state(layout) == "mounted":
        _run(umount_argv(layout.mount_point),
             f"cannot unmount {layout.mount_point} (a process on the host may be using it)")
    if layout.image.exists():
        for device in loop_devices(_run(["losetup", "-j", str(layout.image)],
                                        f"cannot list the loop devices of {layout.image}")):
            _run(["losetup", "-d", device], f"cannot detach {device}")


def release(root: Path) -> list[str]:
    """destroy: unmount every image of the cluster and detach its loop devices (the
    images go with the state directory). Raises before anything is removed if one
    stays mounted."""
    directory = root / "storage"
    if not directory.is_dir():
        return []
    released = []
    for image in sorted(directory.glob("*.img")):
        layout = Layout(root, "/" + image.stem)
        release_one(layout)
        released.append(f"image {image.name}")
    return released


def _found(layout: Layout, names: list[str]) -> dict[str, Found]:
    subvolumes = parse_subvolumes(_run(subvolume_list_argv(layout.mount_point),
                                       f"cannot list the subvolumes of {layout.mount}"))
    limits = parse_limits(_run(qgroup_show_argv(layout.mount_point),
                               f"cannot read the quotas of {layout.mount}"))
    found = {}
    for name in names:
        try:
            info = os.lstat(layout.tree / name)
        except FileNotFoundError:
            found[name] = Found("missing")
            continue
        ident = subvolumes.get(f"{TREE}/{name}")
        if stat.S_ISDIR(info.st_mode) and info.st_ino == SUBVOLUME_INO and ident is not None:
            found[name] = Found("subvolume", ident, limits.get(ident))
        else:
            found[name] = Found("other")
    return found


def apply_accounts(root: Path, mounts: Iterable[str], accounts: dict) -> list[str]:
    """Each home and project as a subvolume with its quota (after the accounts are
    published, before the nodes apply them). Returns warnings."""
    warnings = []
    for mount in image_mounts(mounts):
        layout = Layout(root, mount)
        if current_state(layout) != "mounted":
            raise StorageError(f"{mount} of this cluster is not mounted (the host restarted?): "
                               "run `aitestbed up` first")
        wants = wanted_dirs(mount, accounts)
        for action in quota_actions(mount, wants, _found(layout, [w.name for w in wants])):
            kind, subject = action
            if kind == "warn":
                warnings.append(subject)
                continue
            path = layout.tree / subject.name
            if kind == "create":
                _run(subvolume_create_argv(path), f"cannot make {mount}/{subject.name}")
                os.chown(path, subject.uid, subject.gid)
                path.chmod(subject.mode)
            _run(limit_argv(path, subject.limit), f"cannot set the quota of {mount}/"
                                                  f"{subject.name}")
    return warnings
