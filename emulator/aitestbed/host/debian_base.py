"""The base image where no registry has debian:bookworm-slim and nobody is root: Debian's
minbase (what `debootstrap --variant=minbase` installs) made from Debian's own packages by
this module and one container, with no tool on the host beyond Python and the docker CLI.

  1. The archive's index: InRelease (its signature checked with gpgv and Debian's keyring
     where the host has both), then main's Packages.xz for the architecture, checked
     against InRelease's SHA256.
  2. The packages debootstrap's minbase takes: every `Priority: required` package and apt,
     with everything they depend on (the first alternative the archive has, as
     debootstrap resolves), downloaded once into the cache and checked against the index.
  3. Stage 0: one tar, written here without root: every package's files with the owners
     and modes of its data.tar, /usr merged as bookworm's debootstrap merges it (bin, sbin
     and lib are links into /usr), an empty dpkg database, the .debs and the second stage.
     `docker import` makes it an image; nothing is installed yet.
  4. The second stage runs in a container of it, as root there, with no network: dpkg
     installs the core packages, then unpacks and configures the rest, in debootstrap's
     order (debian-common's second_stage_install).
  5. The container's file system, exported and imported again, is the base image: one layer,
     CMD bash, as the slim image.

Standard library only, so `scripts/ensure-base-image.sh` can run it with any Python 3.10+:
`python3 -m aitestbed.host.debian_base TAG`.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aitestbed.host.paths import cache_root

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEBS = "/var/cache/aitestbed-debs"  # where stage 0 puts the .debs for the second stage
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
# bookworm's debootstrap links these into /usr (functions: setup_merged_usr)
MERGED = {"amd64": ("bin", "sbin", "lib", "lib32", "lib64", "libx32"),
          "arm64": ("bin", "sbin", "lib")}


class BaseImageError(Exception):
    """One line saying what failed and what to do."""


def say(message: str) -> None:
    print(f"aitestbed: {message}", file=sys.stderr, flush=True)


def debian_arch() -> str:
    wanted = os.environ.get("AITESTBED_ARCH") or platform.machine()
    try:
        return ARCHES[wanted.lower()]
    except KeyError:
        raise BaseImageError(f"no Debian base image for the architecture {wanted!r}: "
                             "set AITESTBED_ARCH to amd64 or arm64") from None


# ------------------------------------------------------------------ the archive's index

@dataclass(frozen=True)
class Package:
    name: str
    version: str
    filename: str
    sha256: str
    size: int
    priority: str
    depends: tuple[tuple[str, ...], ...]  # each a list of alternatives, names only
    provides: tuple[str, ...]


def _names(field: str) -> tuple[tuple[str, ...], ...]:
    """'libc6 (>= 2.34), awk | mawk:any' -> (('libc6',), ('awk', 'mawk'))."""
    groups = []
    for group in field.split(","):
        alternatives = tuple(re.split(r"[\s(:\[]", alt.strip(), maxsplit=1)[0]
                             for alt in group.split("|") if alt.strip())
        if alternatives:
            groups.append(alternatives)
    return tuple(groups)


def parse_packages(text: str) -> dict[str, Package]:
    """A Packages file's paragraphs, by package name (the last of a name wins)."""
    found: dict[str, Package] = {}
    for paragraph in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in paragraph.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" not in fields or "Filename" not in fields:
            continue
        depends = ", ".join(f for f in (fields.get("Pre-Depends"), fields.get("Depends")) if f)
        found[fields["Package"]] = Package(
            name=fields["Package"], version=fields.get("Version", ""),
            filename=fields["Filename"], sha256=fields.get("SHA256", ""),
            size=int(fields.get("Size", "0")), priority=fields.get("Priority", ""),
            depends=_names(depends),
            provides=tuple(a for (a, *_) in _names(fields.get("Provides", ""))))
    return found


def release_sha256(release: str, path: str) -> tuple[str, int]:
    """The SHA256 and size InRelease gives for PATH (main/binary-amd64/Packages.xz)."""
    in_section = False
    for line in release.splitlines():
        if not line.startswith(" "):
            in_section = line.startswith("SHA256:")
            continue
        parts = line.split()
        if in_section and len(parts) == 3 and parts[2] == path:
            return parts[0], int(parts[1])
    raise BaseImageError(f"the archive's InRelease lists no {path}")


def select(packages: dict[str, Package], https: bool = False) -> tuple[list[str], list[str]]:
    """debootstrap's minbase for bookworm (scripts/debian-common: work_out_debs): (required,
    base). Required: every `Priority: required` package and usr-is-merged (/usr is merged
    already, so never the usrmerge converter), with what they depend on; base: apt (and
    ca-certificates for an https mirror) with what it needs beyond those. A dependency
    takes the first alternative the archive has, or one the set holds already."""
    excluded = {"usrmerge"}
    providers: dict[str, list[str]] = {}
    for pkg in sorted(packages.values(), key=lambda p: p.name):
        for virtual in pkg.provides:
            providers.setdefault(virtual, []).append(pkg.name)

    def closure(names: Iterable[str], have: set[str]) -> set[str]:
        found = {n for n in names if n not in have}
        todo = sorted(found)
        while todo:
            name = todo.pop()
            for alternatives in packages[name].depends:
                held = found | have
                if any(a in held or held.intersection(providers.get(a, ())) for a in alternatives):
                    continue
                real = [a for a in alternatives if a in packages and a not in excluded]
                virtual = [p for a in alternatives for p in providers.get(a, ())
                           if p not in excluded]
                if not real and not virtual:
                    raise BaseImageError(f"{name} depends on {' | '.join(alternatives)}, "
                                         "which the archive does not have")
                pick = (real or virtual)[0]
                found.add(pick)
                todo.append(pick)
        return found

    missing = [n for n in ("apt", "usr-is-merged", "dpkg", "libc6") if n not in packages]
    if missing:
        raise BaseImageError(f"the archive's index has no {', '.join(missing)}: is it {SUITE}?")
    seed = {p.name for p in packages.values() if p.priority == "required"} | {"usr-is-merged"}
    required = closure(seed - excluded, set())
    base = closure(["apt", *(["ca-certificates"] if https else [])], required)
    return sorted(required), sorted(base)


# ----------------------------------------------------------------------- downloading

def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except OSError as err:
        raise BaseImageError(f"cannot download {url}: {err} (set AITESTBED_DEBIAN_MIRROR to "
                             "a Debian mirror this machine reaches)") from None


def fetch_index(mirror: str, arch: str) -> dict[str, Package]:
    release = _get(f"{mirror}/dists/{SUITE}/InRelease")
    gpgv = shutil.which("gpgv")
    if gpgv and KEYRING.is_file():
        with tempfile.NamedTemporaryFile(suffix=".InRelease") as signed:
            signed.write(release)
            signed.flush()
            check = subprocess.run([gpgv, "--keyring", str(KEYRING), signed.name],
                                   capture_output=True, text=True)
        if check.returncode:
            raise BaseImageError(f"{mirror}/dists/{SUITE}/InRelease: its signature does not "
                                 f"verify with {KEYRING}")
    else:
        say("the archive's signature is not checked here (no gpgv and debian-archive-keyring"
            " on this host); every package is checked against its index")
    path = f"main/binary-{arch}/Packages.xz"
    want, _ = release_sha256(release.decode(errors="replace"), path)
    data = _get(f"{mirror}/dists/{SUITE}/{path}")
    if hashlib.sha256(data).hexdigest() != want:
        raise BaseImageError(f"{mirror}/dists/{SUITE}/{path} does not match its InRelease")
    return parse_packages(lzma.decompress(data).decode(errors="replace"))


def download(mirror: str, wanted: list[Package], cache: Path,
             clock: Callable[[], float] = time.monotonic) -> dict[str, Path]:
    """Each package's .deb in the cache, checked against the index; progress every 10 s."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [p for p in wanted if not (cache / f"{p.sha256}.deb").is_file()]
    total = sum(p.size for p in missing)
    if missing:
        say(f"downloading {len(missing)} Debian package{'s' if len(missing) > 1 else ''} "
            f"({total / 1e6:.1f} MB) from {mirror}")
    done, last = 0, clock()
    for pkg in missing:
        data = _get(f"{mirror}/{pkg.filename}")
        if hashlib.sha256(data).hexdigest() != pkg.sha256:
            raise BaseImageError(f"{mirror}/{pkg.filename} does not match the archive's index")
        part = cache / f"{pkg.sha256}.deb.part"
        part.write_bytes(data)
        part.rename(cache / f"{pkg.sha256}.deb")
        done += pkg.size
        if clock() - last >= 10:
            last = clock()
            say(f"  {done / 1e6:.0f} of {total / 1e6:.0f} MB")
    return {p.name: cache / f"{p.sha256}.deb" for p in wanted}


# ----------------------------------------------------------------------------- stage 0

def ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The members of a .deb (an ar archive)."""
    if not data.startswith(b"!<arch>\n"):
        raise BaseImageError("not a Debian package (no ar header)")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset:offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[offset + 60:offset + 60 + size]
        offset += 60 + size + (size & 1)


def data_tar(deb: bytes) -> bytes:
    for name, member in ar_members(deb):
        if name == "data.tar.xz":
            return lzma.decompress(member)
        if name == "data.tar.gz":
            return zlib.decompress(member, 16 + zlib.MAX_WBITS)
        if name == "data.tar":
            return member
        if name.startswith("data.tar"):
            raise BaseImageError(f"cannot unpack {name} (a compression this module lacks)")
    raise BaseImageError("a Debian package without data.tar")


def merged_path(name: str, merged: Iterable[str]) -> str:
    """'./bin/sh' -> 'usr/bin/sh' where bin links to usr/bin."""
    name = name.removeprefix("./").rstrip("/")
    top, _, rest = name.partition("/")
    return f"usr/{name}" if top in merged and rest else name


def _entry(name: str, kind: bytes, mode: int, data: bytes = b"",
           link: str = "") -> tuple[tarfile.TarInfo, io.BytesIO | None]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uname, info.gname, info.mtime = kind, mode, "root", "root", 0
    info.linkname = link
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, io.BytesIO(data)
    return info, None


def write_stage0(out: tarfile.TarFile, debs: dict[str, Path], arch: str, script: str) -> int:
    """Every package's files into OUT, /usr merged, each path once (a later package's file
    wins, as a later unpack would; `docker import` refuses a path twice); returns how many
    files of the packages were written."""
    merged = MERGED[arch]
    entries: dict[str, tuple] = {}  # path -> its last source, in the order paths first came
    for top in merged:
        entries[f"usr/{top}"] = _entry(f"usr/{top}", tarfile.DIRTYPE, 0o755)
        entries[top] = _entry(top, tarfile.SYMTYPE, 0o777, link=f"usr/{top}")
    datas: dict[str, tarfile.TarFile] = {}
    for name in sorted(debs):
        datas[name] = data = tarfile.open(fileobj=io.BytesIO(data_tar(debs[name].read_bytes())))
        for index, member in enumerate(data.getmembers()):
            path = merged_path(member.name, merged)
            if path and path != "." and path not in merged:
                entries[path] = (name, index)
    written = 0
    for path, source in entries.items():
        if isinstance(source[0], tarfile.TarInfo):
            out.addfile(*source)
            continue
        data = datas[source[0]]
        member = data.getmembers()[source[1]]
        member.name = path
        if member.islnk():
            member.linkname = merged_path(member.linkname, merged)
        out.addfile(member, data.extractfile(member) if member.isreg() else None)
        written += 1
    for name in sorted(debs):
        out.addfile(*_entry(f"{DEBS.lstrip('/')}/{name}.deb", tarfile.REGTYPE, 0o644,
                            debs[name].read_bytes()))
    for directory in ("var/lib/dpkg", "var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
        if directory not in entries:
            out.addfile(*_entry(directory, tarfile.DIRTYPE, 0o755))
    for empty in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
        out.addfile(*_entry(empty, tarfile.REGTYPE, 0o644))
    if "etc/fstab" not in entries:
        out.addfile(*_entry("etc/fstab", tarfile.REGTYPE, 0o644,
                            b"# UNCONFIGURED FSTAB FOR BASE SYSTEM\n"))
    out.addfile(*_entry("aitestbed-second-stage", tarfile.REGTYPE, 0o755, script.encode()))
    return written


def second_stage(required: list[str], base: list[str], mirror: str) -> str:
    """The script the stage-0 container runs (debootstrap's second_stage_install, in its
    order, for a system that is already the container's root)."""
    def debs(names: Iterable[str]) -> str:
        return " ".join(f"{DEBS}/{n}.deb" for n in names)
    libc = "libc6"
    base_step = (f"say 'unpacking the base packages'\n"
                 f"dpkg --force-overwrite --force-confold --skip-same-version --force-depends "
                 f"--unpack {debs(base)}\n") if base else ""
    return f"""#!/bin/sh
set -eu
export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
say() {{ echo "second stage: $*"; }}
core() {{ for p; do dpkg --force-depends --install {DEBS}/$p.deb; done; }}
printf 'Package: dpkg\\nVersion: %s\\nMaintainer: unknown\\nStatus: install ok installed\\n' \\
    "$(dpkg-deb -f {DEBS}/dpkg.deb Version)" >> /var/lib/dpkg/status
touch /var/lib/dpkg/info/dpkg.list
/sbin/ldconfig
say "installing the core packages"
ln -sf mawk /usr/bin/awk
core base-passwd base-files dpkg
[ -e /etc/localtime ] || ln -sf /usr/share/zoneinfo/UTC /etc/localtime
core {libc} perl-base
rm /usr/bin/awk
core mawk
say "unpacking the required packages"
dpkg --force-depends --unpack {debs(required)}
printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
mv /sbin/start-stop-daemon /sbin/start-stop-daemon.REAL
printf '#!/bin/sh\\necho\\necho "Warning: Fake start-stop-daemon called, doing nothing"\\n' \\
    > /sbin/start-stop-daemon
chmod 755 /sbin/start-stop-daemon
say "configuring the required packages"
dpkg --configure --pending --force-configure-any --force-depends
{base_step}dpkg --configure -a --force-confold
mv /sbin/start-stop-daemon.REAL /sbin/start-stop-daemon
rm -f /usr/sbin/policy-rc.d
dpkg --audit
echo "deb {mirror} {SUITE} main" > /etc/apt/sources.list
rm -rf {DEBS} /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \\
    /aitestbed-second-stage
say "done: $(dpkg-query -W | wc -l) packages"
"""


# ------------------------------------------------------------------------ the image

def _docker(*args: str, stdin=None, stdout=None) -> str:
    run = subprocess.run(["docker", *args], stdin=stdin, stdout=stdout or subprocess.PIPE,
                         stderr=subprocess.PIPE, text=stdout is None and stdin is None)
    if run.returncode:
        err = run.stderr if isinstance(run.stderr, str) else run.stderr.decode(errors="replace")
        last = (err.strip().splitlines() or ["(no message)"])[-1]
        raise BaseImageError(f"docker {args[0]} failed: {last}")
    return run.stdout.strip() if isinstance(run.stdout, str) else ""


def cache_dir() -> Path:
    return cache_root() / "debian" / SUITE


def build(tag: str, mirror: str | None = None) -> None:
    mirror = (mirror or os.environ.get("AITESTBED_DEBIAN_MIRROR") or MIRROR).rstrip("/")
    arch = debian_arch()
    started = time.monotonic()
    say(f"making the base image {tag} from Debian's packages ({SUITE} minbase, {arch}; "
        "no registry and no root needed, about 2 min)")
    index = fetch_index(mirror, arch)
    required, base = select(index, https=mirror.startswith("https:"))
    debs = download(mirror, [index[n] for n in (*required, *base)], cache_dir())
    script = second_stage(required, base, mirror)
    stage0 = f"{tag.rsplit(':', 1)[0]}-stage0:{os.getpid()}"
    container = f"aitestbed-base-stage0-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="aitestbed-base.") as work:
        tarball = Path(work) / "stage0.tar"
        with tarfile.open(tarball, "w", format=tarfile.GNU_FORMAT) as out:
            files = write_stage0(out, debs, arch, script)
        say(f"stage 0: {len(debs)} packages, {files} files unpacked "
            f"({tarball.stat().st_size / 1e6:.0f} MB); the second stage runs in a container")
        with open(tarball, "rb") as src:
            _docker("import", "-", stage0, stdin=src)
    try:
        run = subprocess.run(["docker", "run", "--name", container, "--network", "none",
                              "--label", "aitestbed.base-stage0=1", stage0,
                              "/aitestbed-second-stage"], capture_output=True, text=True)
        if run.returncode:
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
            raise BaseImageError(f"the base image's second stage failed:\n{tail}")
        export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        try:
            _docker("import", "--change", 'CMD ["bash"]', "-", tag, stdin=export.stdout)
        finally:
            export.stdout.close()
            export.wait()
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        subprocess.run(["docker", "rmi", stage0], capture_output=True)
    size = _docker("image", "inspect", "-f", "{{.Size}}", tag)
    say(f"base image {tag} made in {time.monotonic() - started:.0f} s "
        f"({int(size) / 1e6:.0f} MB, {len(required) + len(base)} packages)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: python3 -m aitestbed.host.debian_base TAG\n\n"
              "Make TAG, a Debian bookworm minbase image, from Debian's packages with no\n"
              "registry and no root (AITESTBED_DEBIAN_MIRROR, AITESTBED_ARCH, AITESTBED_CACHE).",
              file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        build(argv[0])
    except BaseImageError as err:
        print(f"aitestbed: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
