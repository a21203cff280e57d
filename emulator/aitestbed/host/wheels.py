"""Write the vendor SDKs' wheels (the poptorch wheel of a Poplar SDK, ...) from our facades.

A wheel is a zip with METADATA, WHEEL and RECORD; writing it directly gives the
file the SDK's own name (`poptorch-3.3.0+113432_960e9c294b_ubuntu_20_04-...whl`),
which setuptools would normalise away. Byte-for-byte reproducible: fixed
timestamps and sorted entries.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

_EPOCH = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(dest_dir: Path, filename: str, packages: dict[str, Path],
                summary: str, requires: list[str] = (), overrides: dict[str, str] | None = None,
                ) -> Path:
    """Write dest_dir/filename holding `packages` (import name -> source directory).

    `overrides` replaces files by their path inside the wheel (e.g. the version module).
    """
    name, version, *_, python_tag, abi_tag, platform_tag = filename[:-len(".whl")].split("-")
    dist_info = f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for package, source in packages.items():
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            files[f"{package}/{path.relative_to(source).as_posix()}"] = path.read_bytes()
    for arcname, text in (overrides or {}).items():
        files[arcname] = text.encode()
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {summary}", *[f"Requires-Dist: {r}" for r in requires]]
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: aitestbed\nRoot-Is-Purelib: true\n"
        f"Tag: {python_tag}-{abi_tag}-{platform_tag}\n").encode()
    files[f"{dist_info}/top_level.txt"] = "".join(f"{p}\n" for p in sorted(packages)).encode()
    record = [f"{arcname},{_record_hash(data)},{len(data)}"
              for arcname, data in sorted(files.items())]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / filename
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data in sorted(files.items()):
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return path
