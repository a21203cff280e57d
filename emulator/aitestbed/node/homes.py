"""Users' homes on the shared /home: root creates a missing home (0700), and does
everything inside a home as its user, so a link a user plants (`~/.ssh -> /etc`)
can never make root write, chown or follow anything.

A home that exists keeps its mode (the guide's `chmod a+xr ~/` for the Cerebras
appliance must survive node starts), and what the user put there (their own keys,
a `~/.ssh` that is a link or not a directory) is left as it is with a warning:
a node always starts.

Used by node-init at every container start and by roles/accounts (`python -m
aitestbed.node.homes` with the users and their keys as JSON on stdin), so both
paths do the same.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

HOME_ROOT = Path("/home")
KEY_FILES = (("id_ed25519", 0o600), ("id_ed25519.pub", 0o644))


def warn(message: str) -> None:
    print(f"aitestbed homes: {message}", file=sys.stderr)


def as_user(uid: int, gid: int, work: Callable[[], list[str]]) -> list[str]:
    """Run `work` in a child process with the user's ids only; return what it did."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root for good, then work
        code = 0
        try:
            os.close(read)
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
            os.write(write, json.dumps(work()).encode())
        except BaseException as err:  # noqa: BLE001 - reported by the parent
            warn(f"uid {uid}: {err}")
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else []


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create path with data, atomically, never replacing or following what is there."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
        os.chmod(name, mode)
        os.link(name, path)  # fails if path exists (a file, or a link the user made)
    finally:
        os.unlink(name)


def _inside(home: Path, keys: Mapping[str, bytes], authorized: list[str]) -> list[str]:
    """As the user: ~/.ssh, the cluster's hop key (never replacing the user's own) and
    the authorized keys."""
    done = []
    ssh = home / ".ssh"
    try:
        ssh.mkdir(mode=0o700)
        done.append(f"created {ssh}")
    except FileExistsError:
        pass
    if ssh.is_symlink() or not ssh.is_dir():
        warn(f"{ssh} is not a directory of its own: its keys are left alone")
        return done
    for name, mode in KEY_FILES:
        path = ssh / name
        if name in keys and not os.path.lexists(path):
            try:
                _write_new(path, keys[name], mode)
                done.append(f"created {path}")
            except FileExistsError:  # another node (or the user) was first
                pass
    path = ssh / "authorized_keys"
    if path.is_symlink():
        warn(f"{path} is a link: left alone")
        return done
    present = path.read_text().splitlines() if path.exists() else []
    missing = [k for k in authorized if k not in present]
    if missing or not path.exists():
        fd, name = tempfile.mkstemp(prefix=".authorized_keys.", dir=ssh)
        with os.fdopen(fd, "w") as tmp:
            tmp.write("".join(f"{line}\n" for line in present + missing))
        os.chmod(name, 0o600)
        os.replace(name, path)  # replaces the entry itself, never what a link points to
        done.append(f"updated {path}")
    return done


def ensure_home(user: Mapping, keys: Mapping[str, bytes], root: Path = HOME_ROOT) -> list[str]:
    """The user's home: created 0700 when missing; inside it, what the user lacks, as them."""
    home = root / user["name"]
    uid, gid = user["uid"], user["gid"]
    done = []
    try:
        info = os.lstat(home)
    except FileNotFoundError:
        try:  # only root writes the shared /home; another node may be creating it too
            os.mkdir(home, 0o700)
        except FileExistsError:
            pass
        else:
            os.chown(home, uid, gid, follow_symlinks=False)
            os.chmod(home, 0o700)
            done.append(f"created {home}")
        info = os.lstat(home)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        warn(f"{home} is not a directory owned by {user['name']}: left alone")
        return done
    return done + as_user(uid, gid, lambda: _inside(home, keys, list(user["authorized_keys"])))


def cluster_keys(directory: Path) -> dict[str, bytes]:
    """The user's hop key pair as the state directory holds it (read as root)."""
    return {name: (directory / name).read_bytes() for name, _ in KEY_FILES
            if (directory / name).is_file()}


def main() -> None:
    """roles/accounts: {"users": [user, ...]} on stdin, each user with its "keys" (file name
    -> text, the cluster's hop key pair) when it has them; prints each change."""
    request = json.load(sys.stdin)
    for user in request["users"]:
        keys = {name: text.encode() for name, text in (user.get("keys") or {}).items()}
        for line in ensure_home(user, keys):
            print(line)


if __name__ == "__main__":
    try:
        main()
    except (OSError, KeyError, ValueError) as err:
        sys.exit(f"aitestbed homes: {err}")
