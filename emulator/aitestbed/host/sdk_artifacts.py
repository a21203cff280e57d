"""The pieces every system's artifacts are made of (host/systems: what each builds).

Containers being built have no network, so the host writes what the roles copy into
build/<name>/: a fresh output directory, a role's defaults (versions, wheel names),
the dataset sources, and pinned wheels downloaded once into build/downloads.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from aitestbed.datasets import fashion_mnist, mnist
from aitestbed.host import arch
from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import build_root


def fresh_output(root: Path, vendor: str) -> Path:
    out = build_root() / vendor
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def role_defaults(root: Path, role: str) -> dict:
    return yaml.safe_load((root / "roles" / role / "defaults" / "main.yml").read_text())


def mnist_source(root: Path | None = None) -> Path:
    """The MNIST source archive in build/downloads, fetched once per checkout.

    The image build copies it to the SDK roles; the facades' unit tests build their
    MNIST from the same file (tests/unit/conftest.py), fetching it if the build has not.
    """
    return mnist.fetch(build_root() / "downloads")


def copy_mnist_source(root: Path, out: Path) -> None:
    source = mnist_source(root)
    shutil.copy2(source, out / source.name)


def copy_fashion_mnist_source(root: Path, out: Path) -> None:
    source = fashion_mnist.fetch(build_root() / "downloads")
    shutil.copy2(source, out / source.name)


def pinned_wheels(root: Path, requirements: Path, dest: Path) -> Path:
    """The wheels a hash-pinned requirements file names, downloaded once into
    build/downloads/wheels and linked into dest. A cache whose files match every pin's hash
    is used as it is (no index is asked)."""
    cache = build_root() / "downloads" / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    wheels = verified_wheels(cache, requirements)
    if wheels is None:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                            "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.11", *arch.pip_platform_args(),
                            "--require-hashes", "-d", str(cache), "-r", str(requirements)],
                           check=True)
        except subprocess.CalledProcessError:
            raise AitestbedError(f"could not download the wheels {requirements} names "
                                 "(PyPI must be reachable from this machine; see above)") from None
        wheels = verified_wheels(cache, requirements)
        if wheels is None:
            raise AitestbedError(f"pip downloaded the wheels {requirements} names, but "
                                 f"{cache} does not hold one matching each pin's hash")
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        try:
            os.link(wheel, dest / wheel.name)
        except OSError:
            shutil.copy2(wheel, dest / wheel.name)
    return dest


def pinned_hashes(requirements: Path) -> dict[str, set[str]]:
    """A hash-pinned requirements file's `name==version --hash=sha256:...` lines: the
    wheel-name prefix (name-version, as a wheel spells it) and its allowed sha256s."""
    pins: dict[str, set[str]] = {}
    for line in requirements.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        spec, *options = line.split()
        name, _, version = spec.partition("==")
        pins[f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"] = {
            o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash=sha256:")}
    return pins


def verified_wheels(cache: Path, requirements: Path) -> list[Path] | None:
    """For each pin, a wheel in cache whose sha256 is one of the pin's; None when one is
    missing (or altered)."""
    found = []
    wheels = sorted(cache.glob("*.whl"))
    for prefix, hashes in pinned_hashes(requirements).items():
        match = next((w for w in wheels if w.name.lower().startswith(prefix + "-")
                      and _sha256(w) in hashes), None)
        if match is None:
            return None
        found.append(match)
    return found


def _sha256(path: Path) -> str:
    """The file's sha256, read once per process for a given size and mtime (TensorFlow's and
    TensorBoard's lists pin 16 of the same wheels)."""
    stat = path.stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


