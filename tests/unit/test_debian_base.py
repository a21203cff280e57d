"""The base image without a registry or root (aitestbed.host.debian_base): the archive's
index, debootstrap's minbase selection, the downloads' checks and stage 0's tar. The image
itself is made in tests/cluster/test_first_contact.py (slow), as a member of `docker`."""

from __future__ import annotations

import hashlib
import io
import lzma
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from aitestbed.host import debian_base as db
from aitestbed.host.debian_base import BaseImageError, Package

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = """\
Package: dpkg
Version: 1.21.22
Priority: required
Essential: yes
Pre-Depends: libc6 (>= 2.34), tar (>= 1.28-1)
Filename: pool/main/d/dpkg/dpkg_1.21.22_amd64.deb
Size: 10
SHA256: aa

Package: libc6
Version: 2.36-9
Priority: optional
Depends: libgcc-s1
Filename: pool/main/g/glibc/libc6_2.36-9_amd64.deb
Size: 20
SHA256: bb
Description: GNU C Library
 continued description line: with a colon

Package: libgcc-s1
Version: 12.2.0
Priority: optional
Filename: pool/main/g/gcc/libgcc-s1.deb
Size: 1
SHA256: cc

Package: tar
Version: 1.34
Priority: required
Depends: awk | mawk
Filename: pool/main/t/tar.deb
Size: 1
SHA256: dd

Package: gawk
Version: 5.2
Priority: optional
Provides: awk
Filename: pool/main/g/gawk.deb
Size: 1
SHA256: ee

Package: mawk
Version: 1.3.4
Priority: required
Provides: awk
Filename: pool/main/m/mawk.deb
Size: 1
SHA256: ff

Package: init-system-helpers
Version: 1.65
Priority: required
Depends: usrmerge | usr-is-merged
Filename: pool/main/i/ish.deb
Size: 1
SHA256: 11

Package: usrmerge
Version: 37
Priority: optional
Depends: perl
Filename: pool/main/u/usrmerge.deb
Size: 1
SHA256: 22

Package: usr-is-merged
Version: 37
Priority: optional
Filename: pool/main/u/usr-is-merged.deb
Size: 1
SHA256: 33

Package: apt
Version: 2.6.1
Priority: important
Depends: libapt-pkg6.0 (>= 2.6.1), libc6
Filename: pool/main/a/apt.deb
Size: 1
SHA256: 44

Package: libapt-pkg6.0
Version: 2.6.1
Priority: optional
Filename: pool/main/a/libapt.deb
Size: 1
SHA256: 55
"""


def test_the_index_is_read_with_alternatives_versions_and_continuations():
    index = db.parse_packages(PACKAGES)
    assert index["dpkg"].depends == (("libc6",), ("tar",))
    assert index["tar"].depends == (("awk", "mawk"),)
    assert index["libc6"].version == "2.36-9" and index["libc6"].size == 20
    assert index["mawk"].provides == ("awk",)
    assert db._names("libfoo:any (>= 1) [amd64], bar") == (("libfoo",), ("bar",))


def test_minbase_is_required_and_usr_is_merged_then_apt_beyond_them():
    required, base = db.select(db.parse_packages(PACKAGES))
    # libc6 and libgcc-s1 come with dpkg; mawk (required) answers tar's awk, not gawk;
    # usr-is-merged, never the usrmerge converter (and its perl)
    assert required == ["dpkg", "init-system-helpers", "libc6", "libgcc-s1", "mawk", "tar",
                        "usr-is-merged"]
    assert base == ["apt", "libapt-pkg6.0"]
    _, with_https = db.select(db.parse_packages(PACKAGES + """
Package: ca-certificates
Priority: optional
Filename: pool/main/c/ca.deb
Size: 1
SHA256: 66
"""), https=True)
    assert "ca-certificates" in with_https


def test_a_dependency_the_archive_lacks_is_one_clear_error():
    broken = PACKAGES.replace("Depends: libgcc-s1", "Depends: libgone1 | libgone2")
    with pytest.raises(BaseImageError, match=r"libc6 depends on libgone1 \| libgone2"):
        db.select(db.parse_packages(broken))
    with pytest.raises(BaseImageError, match="has no apt: is it bookworm"):
        db.select(db.parse_packages(PACKAGES.replace("Package: apt\n", "Package: apt2\n")))


def test_the_index_hash_comes_from_inrelease_sha256_section():
    release = ("Origin: Debian\nMD5Sum:\n 0123 99 main/binary-amd64/Packages.xz\n"
               "SHA256:\n abcd 10 main/binary-arm64/Packages.xz\n"
               " ef01 42 main/binary-amd64/Packages.xz\n")
    assert db.release_sha256(release, "main/binary-amd64/Packages.xz") == ("ef01", 42)
    with pytest.raises(BaseImageError, match="lists no main/binary-riscv64"):
        db.release_sha256(release, "main/binary-riscv64/Packages.xz")


def _deb(files: dict[str, bytes], links: dict[str, str] = ()) -> bytes:
    """A .deb: ar of debian-binary, control and data.tar.xz with these files."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as data:
        for directory in ("./", "./bin/", "./usr/", "./usr/bin/"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            data.addfile(info)
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid = len(content), 0o4755 if "su" in name else 0o644, 0
            data.addfile(info, io.BytesIO(content))
        for name, target in dict(links).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.LNKTYPE, target
            data.addfile(info)
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", lzma.compress(b"")),
               ("data.tar.xz", lzma.compress(raw.getvalue()))]
    out = b"!<arch>\n"
    for name, body in members:
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode()
        out += body + (b"\n" if len(body) % 2 else b"")
    return out


def test_stage0_merges_usr_and_holds_each_path_once_the_later_package_winning(tmp_path):
    (tmp_path / "a.deb").write_bytes(_deb({"./bin/sh": b"old", "./usr/bin/su": b"su"},
                                          {"./bin/sh2": "./bin/sh"}))
    (tmp_path / "b.deb").write_bytes(_deb({"./bin/sh": b"new"}))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        written = db.write_stage0(tar, {"a": tmp_path / "a.deb", "b": tmp_path / "b.deb"},
                                  "arm64", "#!/bin/sh\n")
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        names = tar.getnames()
        assert len(names) == len(set(names))  # docker import refuses a path twice
        assert tar.getmember("bin").issym() and tar.getmember("bin").linkname == "usr/bin"
        assert tar.extractfile("usr/bin/sh").read() == b"new"
        assert tar.getmember("usr/bin/sh2").linkname == "usr/bin/sh"
        assert tar.getmember("usr/bin/su").mode == 0o4755
        assert tar.extractfile("var/cache/aitestbed-debs/a.deb").read()[:8] == b"!<arch>\n"
        assert tar.extractfile("var/lib/dpkg/status").read() == b""
        assert tar.getmember("aitestbed-second-stage").mode == 0o755
    assert written == 5  # the packages' usr, usr/bin, sh, su and sh2, each once


def test_not_a_deb_and_an_unknown_compression_are_refused():
    with pytest.raises(BaseImageError, match="not a Debian package"):
        list(db.ar_members(b"PK\x03\x04"))
    zst = b"!<arch>\n" + f"{'data.tar.zst/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{2:<10}`\n" \
        .encode() + b"xx"
    with pytest.raises(BaseImageError, match="data.tar.zst"):
        db.data_tar(zst)


def test_downloads_are_checked_against_the_index_and_kept(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "pool").mkdir(parents=True)
    (mirror / "pool" / "good.deb").write_bytes(b"good")
    (mirror / "pool" / "bad.deb").write_bytes(b"tampered")
    good = Package("good", "1", "pool/good.deb", hashlib.sha256(b"good").hexdigest(), 4,
                   "required", (), ())
    bad = Package("bad", "1", "pool/bad.deb", hashlib.sha256(b"bad").hexdigest(), 3,
                  "required", (), ())
    got = db.download(mirror.as_uri(), [good], tmp_path / "cache")
    assert got["good"].read_bytes() == b"good"
    (mirror / "pool" / "good.deb").unlink()
    assert db.download(mirror.as_uri(), [good], tmp_path / "cache") == got  # from the cache
    with pytest.raises(BaseImageError, match="pool/bad.deb does not match the archive's index"):
        db.download(mirror.as_uri(), [bad], tmp_path / "cache")
    assert not list((tmp_path / "cache").glob(f"{bad.sha256}*"))
    with pytest.raises(BaseImageError, match="cannot download .*AITESTBED_DEBIAN_MIRROR"):
        db.download(mirror.as_uri(), [Package("gone", "1", "pool/gone.deb", "00", 1, "", (),
                                              ())], tmp_path / "cache")


def test_the_second_stage_follows_debootstraps_order():
    script = db.second_stage(["base-files", "dpkg", "libc6"], [], "http://mirror/debian")
    order = [script.index(s) for s in ("core base-passwd base-files dpkg", "core libc6 perl-base",
                                       "core mawk", "--unpack", "--configure --pending",
                                       "--configure -a", "dpkg --audit")]
    assert order == sorted(order)
    assert "unpacking the base packages" not in script  # apt is required in bookworm
    assert "deb http://mirror/debian bookworm main" in script
    assert "unpacking the base packages" in db.second_stage(["dpkg"], ["apt"], "http://m")


def test_the_module_runs_on_the_standard_library_alone_and_helps(tmp_path):
    """ensure-base-image.sh runs it with any python3: no third-party import, and usage."""
    env = {"PYTHONPATH": str(ROOT / "emulator"), "PATH": "/usr/bin:/bin"}
    code = ("import sys, aitestbed.host.debian_base; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'docker','click','yaml','requests','jinja2'}))")
    run = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    usage = subprocess.run([sys.executable, "-m", "aitestbed.host.debian_base"], env=env,
                           capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: python3 -m aitestbed.host.debian_base TAG" \
        in usage.stderr
    arch = subprocess.run([sys.executable, "-m", "aitestbed.host.debian_base", "x:y"],
                          env={**env, "AITESTBED_ARCH": "riscv64"}, capture_output=True,
                          text=True)
    assert arch.returncode == 1
    assert arch.stderr.strip() == ("aitestbed: error: no Debian base image for the architecture "
                                   "'riscv64': set AITESTBED_ARCH to amd64 or arm64")
