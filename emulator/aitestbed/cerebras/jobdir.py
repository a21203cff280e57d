"""A wsjob's work dir on /n1, as the (root) agent handles it: never through a link.

The path comes from the job's namespace and name, never from spec.workdir (users
write the spec). Its layout:

    <root>/<namespace>/<job>/      root 0755    made by the agent
        request.json               root 0644    the job's request
        workload.log               root 0644    the workload's output (the agent opens it)
        workload.pid               root 0644    PID and start time, to adopt it after a restart
        result.json                wsjob 0644   made empty by the agent, written by the workload
        work/                      wsjob 0700   the workload's cwd and HOME

The workload runs the user's own code as the service user, so nothing it can write
is trusted: every directory from / down to the job's is opened without following
links and must belong to root (or the agent's own user) and be writable by nobody
else (sticky directories excepted); files are opened relative to the job's directory
with O_NOFOLLOW, and a file read back must be a regular file with one link, owned by
the agent or the service user. The workload cannot swap any of them: their
directory is the agent's.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

# A Kubernetes object name (RFC 1123 subdomain): no "/", no empty or dot-only parts.
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
READ_LIMIT = 64 * 1024 * 1024
WORK = "work"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeWorkdir(Exception):
    """The work dir, or a file in it, is not what the agent made (a link, another owner...)."""


def _trusted(uids: set[int]) -> set[int]:
    return {0, os.geteuid(), *uids}


def _check_dir(fd: int, path: str, owners: set[int]) -> None:
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeWorkdir(f"{path} is not a directory")
    if info.st_uid not in owners:
        raise UnsafeWorkdir(f"{path} belongs to uid {info.st_uid}, not to the appliance")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise UnsafeWorkdir(f"{path} is writable by others")


def open_dir(path: str | Path, owners: set[int] | None = None) -> int:
    """An fd of the directory `path`, reached without following any link; every
    directory on the way checked (see the module's docstring)."""
    path = Path(os.path.abspath(path))
    trusted = _trusted(set()) if owners is None else owners
    fd = os.open("/", _DIR_FLAGS)
    try:
        _check_dir(fd, "/", trusted)
        walked = Path("/")
        for part in path.parts[1:]:
            walked = walked / part
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                raise UnsafeWorkdir(f"{walked}: {err.strerror} (a link, or not a directory)"
                                    ) from None
            os.close(fd)
            fd = child
            _check_dir(fd, str(walked), trusted)
        return fd
    except BaseException:
        os.close(fd)
        raise


class JobDir:
    """The work dir of job `name` under `root`/`namespace`, held open by an fd."""

    def __init__(self, root: str | Path, namespace: str, name: str, service_uid: int,
                 service_gid: int):
        if not (NAME.match(name) and NAME.match(namespace)):
            raise UnsafeWorkdir(f"{namespace}/{name} is not a valid job name")
        self.path = Path(root) / namespace / name
        self.parent = Path(root) / namespace
        self.name = name
        self.service_uid, self.service_gid = service_uid, service_gid
        self._fd: int | None = None

    # the directory --------------------------------------------------------------
    def fd(self) -> int:
        if self._fd is None:
            parent = open_dir(self.parent)
            try:
                fd = os.open(self.name, _DIR_FLAGS, dir_fd=parent)
            except OSError as err:
                raise UnsafeWorkdir(f"{self.path}: {err.strerror}") from None
            finally:
                os.close(parent)
            try:
                _check_dir(fd, str(self.path), _trusted(set()))
            except UnsafeWorkdir:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def create(self) -> None:
        """Make the job's directory (and its workload's `work/`), or take the one a
        previous run of the agent made."""
        parent = open_dir(self.parent)
        try:
            try:
                os.mkdir(self.name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        finally:
            os.close(parent)
        fd = self.fd()
        os.fchmod(fd, 0o755)  # whatever the agent's umask: the workload reads its request
        try:
            os.mkdir(WORK, 0o700, dir_fd=fd)
        except FileExistsError:
            pass
        work = os.open(WORK, _DIR_FLAGS, dir_fd=fd)
        try:
            info = os.fstat(work)
            if info.st_uid not in (os.geteuid(), self.service_uid):
                raise UnsafeWorkdir(f"{self.path / WORK} belongs to uid {info.st_uid}")
            if os.geteuid() == 0:
                os.fchown(work, self.service_uid, self.service_gid)
        finally:
            os.close(work)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # files ----------------------------------------------------------------------
    def open_write(self, file: str, append: bool = False, for_service: bool = False) -> int:
        """An fd to write `file` (created 0644 if missing; a link is refused)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        flags |= os.O_APPEND if append else os.O_TRUNC
        try:
            fd = os.open(file, flags, 0o644, dir_fd=self.fd())
        except OSError as err:
            raise UnsafeWorkdir(f"{self.path / file}: {err.strerror}") from None
        try:
            self._check_file(fd, file)
            os.fchmod(fd, 0o644)
            os.set_blocking(fd, True)
            if for_service and os.geteuid() == 0:
                os.fchown(fd, self.service_uid, self.service_gid)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, file: str, text: str, for_service: bool = False) -> None:
        fd = self.open_write(file, for_service=for_service)
        with os.fdopen(fd, "w") as stream:
            stream.write(text)

    def _open_read(self, file: str) -> int | None:
        """An fd to read the file, never through a link; None if it does not exist."""
        try:
            return os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                           dir_fd=self.fd())
        except FileNotFoundError:
            return None
        except OSError as err:
            raise UnsafeWorkdir(f"{self.path / file}: {err.strerror}") from None

    def read(self, file: str, limit: int = READ_LIMIT) -> bytes | None:
        """The file's bytes (at most `limit`, from its start), None if it does not exist;
        UnsafeWorkdir if it is a link, not a regular file, or not the appliance's."""
        if (fd := self._open_read(file)) is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            self._check_file(fd, file)
            return stream.read(limit)

    def tail(self, file: str, keep: int) -> tuple[bytes, int] | None:
        """The last `keep` bytes of the file and its size (None if it does not exist)."""
        if (fd := self._open_read(file)) is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            size = self._check_file(fd, file).st_size
            stream.seek(max(0, size - keep))
            return stream.read(keep), size

    def mtime(self, file: str) -> int:
        return int(os.stat(file, dir_fd=self.fd(), follow_symlinks=False).st_mtime)

    def _check_file(self, fd: int, file: str) -> os.stat_result:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeWorkdir(f"{self.path / file} is not a regular file")
        if info.st_nlink != 1:
            raise UnsafeWorkdir(f"{self.path / file} has {info.st_nlink} links")
        if info.st_uid not in _trusted({self.service_uid}):
            raise UnsafeWorkdir(f"{self.path / file} belongs to uid {info.st_uid}")
        return info
