"""Who is in the room: the learners' names and ids, decided purely, and the room's record.

A cluster has at most one classroom. Its record is ClusterState(name).root /
classroom/room.json; the learners are ordinary accounts of the cluster's registry
(host/accounts.py), onboarded by the account playbooks. Load users (`aitestbed
load`) are recorded in classroom/load.json.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aitestbed.host.errors import AitestbedError

# Learners' uids (and the project's gid) come from this range, above the inventory's
# accounts (1000-19999) and below the top of the registry's range (ACCOUNT_SCHEMA).
UID_FIRST = 20000
UID_LAST = 59999
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,27}$")  # room for 4 digits within 32 characters
PROJECT = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
PROJECT_DAYS = 30  # the workshop project ends a month after `create`


class ClassroomError(AitestbedError):
    """A classroom request that cannot be done (nothing was changed)."""


@dataclass
class Room:
    """One cluster's classroom."""

    prefix: str
    project: str
    project_gid: int
    systems: list[str]
    learners: dict[str, int]  # name -> uid, in order
    created: str
    listen: str | None = None
    exercises: dict[str, str] = field(default_factory=dict)  # begun exercise -> when

    @classmethod
    def from_json(cls, data: dict) -> Room:
        return cls(**data)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Load:
    """The background load: its level and its users."""

    level: str
    users: dict[str, int]  # name -> uid
    started: str
    jobs: dict[str, list[str]] = field(default_factory=dict)  # system -> job ids / names


def room_dir(state_root: Path) -> Path:
    return state_root / "classroom"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ClassroomError(f"cannot read {path}: {err}") from None


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def load_room(state_root: Path) -> Room | None:
    data = _read(room_dir(state_root) / "room.json")
    return Room.from_json(data) if data else None


def save_room(state_root: Path, room: Room | None) -> None:
    path = room_dir(state_root) / "room.json"
    if room is None:
        path.unlink(missing_ok=True)
    else:
        _write(path, room.to_json())


def load_load(state_root: Path) -> Load | None:
    data = _read(room_dir(state_root) / "load.json")
    return Load(**data) if data else None


def save_load(state_root: Path, load: Load | None) -> None:
    path = room_dir(state_root) / "load.json"
    if load is None:
        path.unlink(missing_ok=True)
    else:
        _write(path, asdict(load))


@contextmanager
def exclusive(state_root: Path, what: str):
    """One classroom change at a time per cluster (a second is refused, not queued)."""
    directory = room_dir(state_root)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another command"
            raise ClassroomError(f"{holder} is running on this cluster's classroom: wait for "
                                 f"it to finish, then run `{what}` again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"`{what}` (pid {os.getpid()})".encode(), 0)
        yield
    finally:
        os.close(fd)


# pure decisions --------------------------------------------------------------------
def learner_names(prefix: str, count: int) -> list[str]:
    """learner01..learner30; three digits from 100 learners on."""
    width = max(2, len(str(count)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def free_ids(taken: set[int], count: int, first: int = UID_FIRST,
             last: int = UID_LAST) -> list[int]:
    """The first `count` ids of [first, last] nobody holds (uids and gids share the space:
    each user's primary group has its uid as gid)."""
    found: list[int] = []
    if count <= 0:
        return found
    for candidate in range(first, last + 1):
        if candidate not in taken:
            found.append(candidate)
            if len(found) == count:
                return found
    raise ClassroomError(f"only {len(found)} free uids are left in {first}-{last}: "
                         f"ask for at most {max(len(found) - 1, 0)} learners")


def check_count(count: int) -> None:
    if count < 1:
        raise ClassroomError(f"--learners must be at least 1 (got {count})")
    capacity = UID_LAST - UID_FIRST  # one id goes to the project's group
    if count > capacity:
        raise ClassroomError(f"--learners {count} is more than the {capacity} uids of the "
                             f"learners' range ({UID_FIRST}-{UID_LAST})")


def plan(*, count: int, prefix: str, project: str, systems: list[str],
         cluster_systems: list[str], users: dict[str, dict], projects: dict[str, dict],
         system_groups: dict[str, int], today: dt.date) -> Room:
    """The room `classroom create` makes, or a ClassroomError saying why not."""
    check_count(count)
    if not NAME.match(prefix):
        raise ClassroomError(f"--prefix {prefix!r} is not a user name's start: lower-case "
                             "letters, digits, - and _, starting with a letter, at most 28")
    if not PROJECT.match(project):
        raise ClassroomError(f"--project {project!r} is not a project name: letters, digits, "
                             "- and _, starting with a letter")
    unknown = [s for s in systems if s not in cluster_systems]
    if unknown:
        raise ClassroomError(f"--systems: this cluster has no {unknown[0]!r} system: choose "
                             f"from {', '.join(cluster_systems)}")
    names = learner_names(prefix, count)
    # An offboarded learner of an earlier classroom comes back with their uid.
    clash = sorted(n for n in names if users.get(n, {}).get("active", False))
    if clash:
        raise ClassroomError(f"--prefix {prefix!r} clashes with the existing user {clash[0]!r}:"
                             " choose another prefix")
    group_clash = sorted(set(names) & (set(projects) | set(system_groups)))
    if group_clash:
        raise ClassroomError(f"--prefix {prefix!r} clashes with the group {group_clash[0]!r}: "
                             "choose another prefix")
    if project in users or project in system_groups:
        raise ClassroomError(f"--project {project!r} is the name of a user or a system group: "
                             "choose another")
    others = sorted(n for n, u in users.items() if u.get("active", True)
                    and project in u.get("projects", []) and n not in names)
    if others:
        raise ClassroomError(f"--project {project!r} already exists on this cluster with "
                             f"members ({others[0]}...): choose another name for the "
                             "workshop's project")
    taken = {int(u["uid"]) for u in users.values()} | {int(u.get("gid", u["uid"]))
                                                       for u in users.values()}
    taken |= {int(p["gid"]) for p in projects.values()} | set(system_groups.values())
    returning = {n: int(users[n]["uid"]) for n in names if n in users}
    # The project of an earlier classroom (all its members gone) is taken up again.
    again = int(projects[project]["gid"]) if project in projects else None
    ids = iter(free_ids(taken, count + (again is None) - len(returning)))
    gid = again if again is not None else next(ids)
    return Room(prefix=prefix, project=project, project_gid=gid,
                systems=list(systems or cluster_systems),
                learners={n: returning[n] if n in returning else next(ids) for n in names},
                created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def account_vars(room: Room, pi: str, today: dt.date) -> dict:
    """The vars file the onboarding playbook reads (`-e @FILE`): the learners and the
    workshop's project."""
    return {
        "accounts": [{"name": name, "uid": uid, "systems": room.systems}
                     for name, uid in room.learners.items()],
        "projects": [{"name": room.project, "gid": room.project_gid, "pi": pi,
                      "members": list(room.learners), "systems": room.systems,
                      "end_date": (today + dt.timedelta(days=PROJECT_DAYS)).isoformat()}],
    }
