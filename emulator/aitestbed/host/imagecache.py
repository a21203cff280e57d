"""The image cache: the node images of a profile in one file or in a registry, so a fresh
machine (a CI runner) starts a cluster without building an image.

  key    a hash of every input of the images, from the checkout alone (no Docker), for
         a CI cache step to key on
  file   HEADER + PAYLOAD. HEADER: HEADER_SIZE bytes, the magic line then our manifest
         as JSON, padded with NULs. PAYLOAD: the engine's save (`docker save`, through
         the client's own connection, as load is) of the base, the OS layer and
         every class image (one tar: shared layers once, tags kept), compressed by zstd.
         The manifest holds the format version, the tags with their image IDs and the
         payload's size and sha256: a damaged or foreign file is refused before anything
         is loaded.
  push/pull  the same images in a registry (aitestbed.host.registry).
`docker save`/`load` and registry pulls keep image IDs, and the tags of images.py are
hashes of image IDs, so after a load or a pull `up` finds every image it needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import docker
import requests
from docker.errors import APIError, ImageNotFound

from aitestbed.host import images, registry
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import project_root

FORMAT = 1
MAGIC = b"aitestbed image cache\n"
HEADER_SIZE = 16384
CHUNK = 1 << 20
ZSTD_LEVEL = int(os.environ.get("AITESTBED_CACHE_ZSTD_LEVEL", "3"))
# Level 3 with a 128 MiB window: measured on a 1.5 GB sample of the OS layer, 28 % of the
# size in 8 s on 2 cores (level 6: 27 % in 18 s, level 9: 26 % in 30 s).
# Every input of the images (images.py hashes these into the tags, with image IDs).
KEY_INPUTS = ("images", *images.class_input_paths(), "scripts/ensure-base-image.sh")


Classes = Mapping[str, Sequence[str]]  # class -> the systems its image carries


def class_names(classes: Classes) -> list[str]:
    """'login(cerebras,graphcore)': a class and its systems, as keys and manifests say."""
    return sorted(f"{c}({','.join(s)})" for c, s in classes.items())


def cache_key(classes: Classes | list[str]) -> str:
    """Changes whenever an input of the images of these classes (their names, their
    systems) changes; `classes` as a topology has them, or as a manifest names them."""
    root = project_root()
    names = class_names(classes) if isinstance(classes, Mapping) else sorted(classes)
    extra = [f"format {FORMAT}", images.prefix(), images.base_image(), *names]
    return images._tree_digest([root / p for p in KEY_INPUTS], extra)


def image_set(client: docker.DockerClient, classes: Classes) -> list[str]:
    """The tags of the base, the OS layer and the class images; builds what is missing."""
    tags = images.ensure_class_images(client, classes)
    return [images.base_image(), images.ensure_node_os(client), *tags.values()]


# ---------------------------------------------------------------- the file's manifest

def encode_header(manifest: dict) -> bytes:
    body = MAGIC + json.dumps(manifest, sort_keys=True).encode() + b"\n"
    if len(body) > HEADER_SIZE:
        raise AitestbedError(f"too many images for one cache file ({len(manifest['tags'])})")
    return body.ljust(HEADER_SIZE, b"\0")


def decode_header(path: Path, header: bytes, file_size: int) -> dict:
    """The manifest, or AitestbedError saying why the file is not a cache we can load."""
    if not header.startswith(MAGIC):
        raise AitestbedError(f"{path} is not an aitestbed image cache (no aitestbed header): "
                             "make one with `aitestbed images save`")
    if len(header) < HEADER_SIZE:
        raise AitestbedError(f"{path} is damaged: it ends inside its header ({file_size} bytes)")
    try:
        manifest = json.loads(header[len(MAGIC):].rstrip(b"\0"))
        version = manifest["format"]
        size = manifest["payload"]["size"]
        tags = manifest["tags"]
        manifest["payload"]["sha256"].encode()
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AitestbedError(f"{path} is damaged: its manifest cannot be read") from None
    if version != FORMAT:
        raise AitestbedError(f"{path} is an image cache of format {version}; this aitestbed "
                             f"reads format {FORMAT}: save it again with this version")
    if not isinstance(tags, dict) or not tags or not isinstance(size, int):
        raise AitestbedError(f"{path} is damaged: its manifest cannot be read")
    if file_size != HEADER_SIZE + size:
        raise AitestbedError(
            f"{path} is damaged: {file_size} bytes where its manifest says "
            f"{HEADER_SIZE + size} (truncated or appended to)")
    return manifest


def read_manifest(path: Path) -> dict:
    try:
        with path.open("rb") as file:
            return decode_header(path, file.read(HEADER_SIZE), os.fstat(file.fileno()).st_size)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as err:
        raise AitestbedError(f"cannot read {path}: {err.strerror}") from None


def verify(path: Path, manifest: dict, meter: Meter | None = None) -> None:
    """The payload's size and sha256 are the manifest's, or AitestbedError."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        file.seek(HEADER_SIZE)
        while chunk := file.read(CHUNK):
            digest.update(chunk)
            if meter:
                meter.update(len(chunk))
    if digest.hexdigest() != manifest["payload"]["sha256"]:
        raise AitestbedError(f"{path} is damaged: its checksum is not the one it was saved with "
                             "(nothing was loaded)")


# ---------------------------------------------------------------- progress

class Meter:
    """Progress of a long phase on stderr: a line rewritten in place on a terminal, else
    a line every `every` seconds; `done` prints the phase's MB and seconds."""

    def __init__(self, label: str, total: int | None = None, every: float = 15.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.count = 0
        self.tty = sys.stderr.isatty()
        self.started = self.shown = time.monotonic()

    def line(self) -> str:
        seconds = time.monotonic() - self.started
        total = f" of {self.total / 1e6:.0f}" if self.total else ""
        return f"aitestbed:   {self.label}: {self.count / 1e6:.0f}{total} MB, {seconds:.0f} s"

    def update(self, count: int) -> None:
        self.count += count
        now = time.monotonic()
        if now - self.shown >= (0.5 if self.tty else self.every):
            self.shown = now
            print(f"\r{self.line()}" if self.tty else self.line(), end="" if self.tty else "\n",
                  file=sys.stderr, flush=True)

    def done(self, note: str = "") -> float:
        print(("\r" if self.tty else "") + self.line() + note + ("\x1b[K" if self.tty else ""),
              file=sys.stderr, flush=True)
        return time.monotonic() - self.started


# ---------------------------------------------------------------- save and load

@dataclass
class SaveResult:
    path: Path
    tags: list[str]
    size: int
    uncompressed: int
    seconds: float


@dataclass
class LoadResult:
    path: Path
    tags: list[str]
    seconds: float
    verify_seconds: float
    notes: list[str] = field(default_factory=list)


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if not found:
        raise AitestbedError(f"`{name}` is missing: install it (Debian package {package})")
    return found


def _chunks(file: BinaryIO) -> Iterator[bytes]:
    while chunk := file.read(CHUNK):
        yield chunk


def _pump(source: Iterable[bytes], sink: BinaryIO, meter: Meter | None, failed: list) -> None:
    """Copy source's chunks to sink (then close sink), counting. An error is kept in
    `failed` for the caller, who also sees how the other end ended."""
    try:
        for chunk in source:
            sink.write(chunk)
            if meter:
                meter.update(len(chunk))
    except Exception as err:  # noqa: BLE001 - reported by the caller
        failed.append(err)
    finally:
        try:
            sink.close()
        except OSError:
            pass


def _engine_save(client: docker.DockerClient, tags: list[str]):
    """The engine's `docker save` of several images in one tar (GET /images/get?names=...,
    which docker-py has no public call for), through the client's own connection."""
    response = client.api._get(client.api._url("/images/get"), params={"names": tags},
                               stream=True)
    client.api._raise_for_status(response)
    return response


def _reason(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def save(client: docker.DockerClient, path: Path, classes: Classes, key: str,
         profile: str) -> SaveResult:
    """Write the images of these classes (built first when missing) to `path`."""
    _tool("zstd", "zstd")
    part = path.with_name(path.name + ".part")
    try:  # before any build: a file that cannot be written is said at once
        part.open("wb").close()
    except OSError as err:
        raise AitestbedError(f"cannot write {path}: {err.strerror}") from None
    try:
        tags = image_set(client, classes)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return save_tags(client, path, tags, {"key": key, "profile": profile,
                                          "classes": class_names(classes),
                                          "prefix": images.prefix()})


def save_tags(client: docker.DockerClient, path: Path, tags: list[str],
              meta: dict) -> SaveResult:
    """`docker save` of these tags, compressed, behind our manifest (with `meta` in it)."""
    zstd = _tool("zstd", "zstd")
    ids = {tag: client.images.get(tag).id for tag in tags}
    part = path.with_name(path.name + ".part")
    started = time.monotonic()
    try:
        out = part.open("wb")
    except OSError as err:
        raise AitestbedError(f"cannot write {path}: {err.strerror}") from None
    try:
        with out:
            out.write(b"\0" * HEADER_SIZE)
            images.say(f"saving {len(tags)} images to {path} "
                       f"(docker save | zstd -{ZSTD_LEVEL} --long)")
            raw = Meter("docker save")
            try:
                response = _engine_save(client, tags)
            except APIError as err:
                raise AitestbedError(f"docker save failed: {err.explanation or err}") from None
            packer = subprocess.Popen([zstd, "-q", f"-{ZSTD_LEVEL}", "--long=27", "-T0", "-c"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            failed: list = []
            pump = threading.Thread(target=_pump, daemon=True, args=(
                response.iter_content(CHUNK), packer.stdin, raw, failed))
            pump.start()
            digest, size = hashlib.sha256(), 0
            try:
                while chunk := packer.stdout.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            except BaseException as err:
                response.close()
                packer.kill()
                if isinstance(err, OSError):
                    raise AitestbedError(f"cannot write {path}: {err.strerror}") from None
                raise
            finally:
                pump.join()
                packer.wait()
            if failed and not isinstance(failed[0], OSError):
                raise AitestbedError(f"docker save failed: {failed[0]}")
            if packer.returncode or failed:
                raise AitestbedError(f"zstd failed: {_reason(packer.stderr.read())}")
            raw.done(f" -> {size / 1e6:.0f} MB compressed")
            out.seek(0)
            out.write(encode_header({
                **meta, "format": FORMAT, "tags": ids, "uncompressed": raw.count,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "payload": {"compression": "zstd", "size": size, "sha256": digest.hexdigest()}}))
            out.flush()
            os.fsync(out.fileno())
        part.replace(path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return SaveResult(path, list(ids), HEADER_SIZE + size, raw.count,
                      time.monotonic() - started)


def missing(client: docker.DockerClient, classes: Classes) -> list[str]:
    """What `up` would build now for these classes (nothing after a load or a pull)."""
    base = images.base_image()
    if _image_id(client, base) is None:
        return [base]
    node_os = images.node_os_tag(client, base)
    if _image_id(client, node_os) is None:
        return [node_os]
    inputs = images.class_inputs(client, node_os)
    return [tag for c, s in sorted(classes.items())
            if _image_id(client, tag := images.class_tag(client, node_os, c, s, inputs)) is None
            and images.covering(client, c, inputs, s) is None]


def _image_id(client: docker.DockerClient, tag: str) -> str | None:
    try:
        return client.images.get(tag).id
    except ImageNotFound:
        return None


def _restore(client: docker.DockerClient, before: dict[str, str | None]) -> None:
    """Undo a failed load's tags: remove those it created, point moved ones back."""
    for tag, old in before.items():
        now = _image_id(client, tag)
        if now == old:
            continue
        try:
            if old is None:
                client.images.remove(tag)
            else:
                repository, name = tag.rsplit(":", 1)
                client.images.get(old).tag(repository, name)
        except (APIError, ImageNotFound):
            continue


def load(client: docker.DockerClient, path: Path, key: str | None = None) -> LoadResult:
    """Verify the file, then load it: afterwards its tags name the images it was saved with.
    Nothing is loaded from a damaged or foreign file; a failed load leaves the tags as they were."""
    zstd = _tool("zstd", "zstd")
    manifest = read_manifest(path)
    tags: dict[str, str] = manifest["tags"]
    checking = Meter(f"verifying {path.name}", manifest["payload"]["size"])
    verify(path, manifest, checking)
    verify_seconds = checking.done(" (checksum good)")
    before = {tag: _image_id(client, tag) for tag in tags}
    images.say(f"loading {len(tags)} images from {path} (zstd -d | docker load)")
    meter = Meter("docker load", manifest["payload"]["size"])
    started = time.monotonic()
    try:
        with path.open("rb") as file:
            file.seek(HEADER_SIZE)
            unpacker = subprocess.Popen([zstd, "-q", "-d", "--long=27", "-c"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
            failed: list = []
            pump = threading.Thread(target=_pump, daemon=True,
                                    args=(_chunks(file), unpacker.stdin, meter, failed))
            pump.start()
            try:
                # Streamed to the engine of `client` (chunked upload): no temporary tar.
                for message in client.api.load_image(_chunks(unpacker.stdout)):
                    if "error" in message:
                        raise AitestbedError(f"docker load failed: {message['error']}")
            except APIError as err:
                raise AitestbedError(f"docker load failed: {err.explanation or err}") from None
            except requests.RequestException as err:  # the engine hung up mid-upload
                raise AitestbedError(f"docker load failed: {err}") from None
            except BaseException:
                unpacker.kill()
                raise
            finally:
                unpacker.stdout.close()
                pump.join()
                unpacker.wait()
        if unpacker.returncode:
            raise AitestbedError(f"zstd failed: {_reason(unpacker.stderr.read())}")
        wrong = [t for t, image_id in tags.items() if _image_id(client, t) != image_id]
        if wrong:
            raise AitestbedError(f"{path}: after the load {wrong[0]} is not the image it was "
                                 "saved with")
    except BaseException:
        _restore(client, before)
        raise
    meter.done()
    notes = []
    if manifest.get("prefix") not in (None, images.prefix()):
        notes.append(f"the file's images are named {manifest['prefix']}/..., and "
                     f"AITESTBED_IMAGE_PREFIX is {images.prefix()}: `up` will not use them")
    elif key and manifest.get("key") != key:
        notes.append("the file was saved from other inputs than this checkout's: "
                     "`up` builds the images whose inputs changed")
    return LoadResult(path, list(tags), time.monotonic() - started, verify_seconds, notes)


# ---------------------------------------------------------------- registry

def push(client: docker.DockerClient, where: str, classes: Classes) -> list[str]:
    """Push the base, the OS layer and the class images (built first when missing)."""
    where = registry.check_registry(where)
    pushed = []
    for tag in image_set(client, classes):
        started = time.monotonic()
        pushed.append(registry.push(client, where, tag))
        images.say(f"pushed {pushed[-1]} in {time.monotonic() - started:.0f} s")
    return pushed


def pull(client: docker.DockerClient, where: str, classes: Classes) -> list[str]:
    """Pull the images this checkout needs and give them their local names. The tags hang
    on image IDs, so it goes base -> OS layer -> classes, each tag computed from the last."""
    where = registry.check_registry(where)

    def one(tag: str) -> str:
        started = time.monotonic()
        if not registry.pull_as(client, where, tag):
            raise AitestbedError(
                f"registry {where} has no {registry.remote_name(where, tag)}: push this "
                f"checkout's images first (aitestbed images push --registry {where})")
        images.say(f"pulled {tag} in {time.monotonic() - started:.0f} s")
        return tag

    pulled = [one(images.base_image())]
    node_os = one(images.node_os_tag(client, images.base_image()))
    pulled.append(node_os)
    inputs = images.class_inputs(client, node_os)

    def one_class(item: tuple[str, Sequence[str]]) -> str:
        """The class's image, else (a subset's) the profile's image that covers it, as
        `up` would take it (images.covering): a release pushes the profiles' images."""
        node_class, carried = item
        tag = images.class_tag(client, node_os, node_class, carried, inputs)
        for candidate in [tag, *images.covering_tags(client, node_os, inputs, node_class,
                                                     carried)]:
            started = time.monotonic()
            if registry.pull_as(client, where, candidate):
                images.say(f"pulled {candidate} in {time.monotonic() - started:.0f} s")
                return candidate
        raise AitestbedError(
            f"registry {where} has no {registry.remote_name(where, tag)} (nor an image of "
            f"{node_class} that covers its systems): push this checkout's images first "
            f"(aitestbed images push --registry {where})")

    with ThreadPoolExecutor(max_workers=images.PULLS_AT_ONCE) as pool:  # as `up` pulls them
        pulled += list(pool.map(one_class, sorted(classes.items())))
    return pulled
