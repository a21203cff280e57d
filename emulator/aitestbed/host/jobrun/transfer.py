"""What `aitestbed run` copies to the cluster and what it brings back.

Up: the directory's files (`.git` and what its `.gitignore` files name left out; in a
git work tree, git's own answer), as a tar that the user's own `tar` unpacks on the
login node, so nothing is written with more rights than the user has.
Back: a tar the user's `tar` makes of the files the job created or changed, unpacked
here with tarfile's `data` filter (no links out, no absolute paths, no devices) and
without anything under a `.git`: a job cannot make this machine write outside the output
directory, nor leave a repository whose configuration git here would obey.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from aitestbed.host.jobrun.plan import PlanError

MAX_UPLOAD = 2 << 30  # bytes; a larger directory is probably not a job's sources


# git run on a directory a job may have written (`run -C` an earlier run's output): no
# repository configuration may make it run a command (core.fsmonitor runs one on
# ls-files; hooks and the others are not reached by rev-parse and ls-files).
GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def _git_files(directory: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files, if DIRECTORY is in a git work tree."""
    try:
        inside = subprocess.run([*GIT, "-C", str(directory), "rev-parse",
                                 "--is-inside-work-tree"], capture_output=True, text=True,
                                check=False)
    except FileNotFoundError:
        return None
    if inside.returncode or inside.stdout.strip() != "true":
        return None
    listed = subprocess.run([*GIT, "-C", str(directory), "ls-files", "-z", "--cached",
                             "--others", "--exclude-standard", "--", "."],
                            capture_output=True, check=False)
    if listed.returncode:
        return None
    names = [n for n in listed.stdout.decode(errors="surrogateescape").split("\0") if n]
    # ls-files lists deleted-but-tracked files too; keep what exists
    return sorted(n for n in names if (directory / n).is_file() or (directory / n).is_symlink())


def _walk_files(directory: Path) -> list[str]:
    """Every file under DIRECTORY but .git and what .gitignore files (at any depth) name."""
    import pathspec

    found: list[str] = []
    specs: list[tuple[str, pathspec.PathSpec]] = []
    for root, dirs, files in os.walk(directory):
        rel_root = os.path.relpath(root, directory)
        rel_root = "" if rel_root == "." else rel_root + "/"
        ignore = Path(root, ".gitignore")
        if ignore.is_file():
            specs.append((rel_root, pathspec.GitIgnoreSpec.from_lines(
                ignore.read_text(errors="replace").splitlines())))

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs:
                if rel.startswith(base) and spec.match_file(rel[len(base):] + ("/" if is_dir
                                                                                 else "")):
                    return True
            return False

        dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(rel_root + d, True))
        found += [rel_root + f for f in sorted(files) if not ignored(rel_root + f, False)]
    return found


def select(directory: Path, leave_out: Path | None = None) -> list[str]:
    """The files of DIRECTORY that go to the cluster, relative, sorted; LEAVE_OUT (the
    output directory, when it is inside) is not copied back up."""
    if not directory.is_dir():
        raise PlanError(f"no such directory: {directory}")
    files = _git_files(directory)
    files = files if files is not None else _walk_files(directory)
    if leave_out is not None:
        try:
            inner = leave_out.resolve().relative_to(directory.resolve()).as_posix()
        except ValueError:
            inner = None
        if inner == ".":
            raise PlanError(f"the output directory {leave_out} is the directory copied "
                            "to the cluster: choose another --output-dir")
        if inner:
            files = [f for f in files if f != inner and not f.startswith(inner + "/")]
    return files


def pack(directory: Path, files: list[str]) -> bytes:
    """A tar of FILES (regular files and symlinks as they are; owner names left out)."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in files:
            path = directory / name
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                total += info.size
                if total > MAX_UPLOAD:
                    raise PlanError(f"{directory} holds more than {MAX_UPLOAD >> 30} GiB of "
                                    "files to copy; name what to leave out in .gitignore")
                with open(path, "rb") as data:
                    tar.addfile(info, data)
            elif info.issym() or info.isdir():
                tar.addfile(info)
    return buffer.getvalue()


def safe_name(name: str) -> str | None:
    """NAME as a relative path with no `..`, or None."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or not parts or ".." in parts:
        return None
    return "/".join(parts)


MAX_OUTPUT = 256 << 20  # bytes brought back per script unless --max-output says otherwise


def parse_listing(listing: bytes) -> list[tuple[str, int]]:
    """`find -printf '%s %p\\0'` output: (name, apparent size) in the order found."""
    entries = []
    for record in listing.split(b"\0"):
        size, _, name = record.partition(b" ")
        if size.isdigit() and name:
            entries.append((name.decode(errors="surrogateescape"), int(size)))
    return entries


def choose(entries: list[tuple[str, int]], budget: int, first: str = ""
           ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What comes back within BUDGET bytes (apparent sizes: a sparse file counts as what it
    would take here): FIRST (the job's output file) if it fits, then the smallest first so
    one huge file does not crowd out the rest; what is left on the cluster, largest
    first. `.git` is never taken (nor counted)."""
    first = safe_name(first) or ""
    wanted = sorted((e for e in entries if not is_git_metadata(safe_name(e[0]) or e[0])),
                    key=lambda e: (safe_name(e[0]) != first, e[1], e[0]))
    taken, left, used = [], [], 0
    for name, size in wanted:
        if used + size <= budget:
            taken.append((name, size))
            used += size
        else:
            left.append((name, size))
    return taken, sorted(left, key=lambda e: (-e[1], e[0]))


def is_git_metadata(name: str) -> bool:
    """A path inside a `.git` directory (any depth, any case): a job's `.git/config` could
    name a command (core.fsmonitor, hooks) that git on this machine would run."""
    return any(part.lower() == ".git" for part in name.split("/"))


def unpack(data: bytes, destination: Path) -> list[str]:
    """Unpack what the cluster sent back into DESTINATION; returns the files' relative
    names. Only regular files are written, at relative names without `..`, never through
    a link, without set-id bits, never into a `.git` directory: whatever the job left
    there, nothing lands outside DESTINATION and git here runs nothing of the job's.
    (tarfile's `data` filter does the first part on Python >= 3.11.4; Debian 12 has
    3.11.2.)"""
    destination.mkdir(parents=True, exist_ok=True)
    root = destination.resolve()
    written: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            name = safe_name(member.name)
            if name is None or not member.isreg() or is_git_metadata(name):
                continue
            target = root / name
            if not target.parent.resolve().is_relative_to(root) or target.is_symlink():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.parent.resolve().is_relative_to(root):
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            with open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            os.chmod(target, member.mode & 0o755 | 0o600)
            written.append(name)
    return sorted(written)
