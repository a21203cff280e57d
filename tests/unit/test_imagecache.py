"""The image cache: its key, its file's manifest, and a damaged or foreign file refused
before anything is loaded. The engine tests use one tiny image built FROM scratch under a
scratch name (removed at the end) and skip when no engine is reachable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aitestbed.host import imagecache, registry
from aitestbed.host.errors import AitestbedError

pytestmark = pytest.mark.unit

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"


def aitestbed(*args, env_extra=None):
    path = os.pathsep.join(p for p in (str(EMULATOR), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "aitestbed.cli", *args], capture_output=True,
                          text=True, env=env, check=False)


def manifest(size=10, **over):
    return {"format": imagecache.FORMAT, "tags": {"x/a:1": "sha256:" + "0" * 64},
            "payload": {"compression": "zstd", "size": size, "sha256": "0" * 64}, **over}


# ------------------------------------------------------------------ the manifest

def test_header_round_trip(tmp_path):
    header = imagecache.encode_header(manifest(size=123))
    assert len(header) == imagecache.HEADER_SIZE and header.startswith(imagecache.MAGIC)
    got = imagecache.decode_header(tmp_path / "f", header, imagecache.HEADER_SIZE + 123)
    assert got["payload"]["size"] == 123 and got["tags"] == manifest()["tags"]


@pytest.mark.parametrize(("data", "size", "message"), [
    (b"\x28\xb5\x2f\xfd" + b"\0" * 100, 104, "is not an aitestbed image cache"),   # a bare zstd
    (b"", 0, "is not an aitestbed image cache"),
    (imagecache.MAGIC + b"{}", None, "ends inside its header"),
    (imagecache.MAGIC + b"{not json", 10**6, "its manifest cannot be read"),
    (imagecache.MAGIC + b'{"format": 1, "tags": {}}', 10**6, "its manifest cannot be read"),
])
def test_foreign_or_broken_headers_are_refused(tmp_path, data, size, message):
    if size != 0 and data.startswith(imagecache.MAGIC) and size:
        data = data.ljust(imagecache.HEADER_SIZE, b"\0")
    with pytest.raises(AitestbedError, match=message):
        imagecache.decode_header(tmp_path / "f", data, size if size is not None else len(data))


def test_another_format_version_is_refused(tmp_path):
    header = imagecache.encode_header(manifest(format=imagecache.FORMAT + 1))
    with pytest.raises(AitestbedError, match="format 2; this aitestbed reads format 1"):
        imagecache.decode_header(tmp_path / "f", header, imagecache.HEADER_SIZE + 10)


@pytest.mark.parametrize("extra", [-1, +1])
def test_truncated_or_appended_files_are_refused(tmp_path, extra):
    header = imagecache.encode_header(manifest(size=1000))
    with pytest.raises(AitestbedError, match="truncated or appended to"):
        imagecache.decode_header(tmp_path / "f", header, imagecache.HEADER_SIZE + 1000 + extra)


def test_a_changed_payload_fails_its_checksum(tmp_path):
    import hashlib
    payload = b"some payload" * 1000
    path = tmp_path / "c.aic"
    good = manifest(size=len(payload))
    good["payload"]["sha256"] = hashlib.sha256(payload).hexdigest()
    path.write_bytes(imagecache.encode_header(good) + payload)
    imagecache.verify(path, imagecache.read_manifest(path))
    path.write_bytes(imagecache.encode_header(good) + payload[:-1] + b"X")
    with pytest.raises(AitestbedError, match="damaged: its checksum"):
        imagecache.verify(path, imagecache.read_manifest(path))


def test_too_many_tags_for_the_header():
    tags = {f"x/{i}:{'a' * 40}": "sha256:" + "0" * 64 for i in range(200)}
    with pytest.raises(AitestbedError, match="too many images"):
        imagecache.encode_header(manifest(tags=tags))


def test_cli_refuses_a_foreign_file_without_an_engine(tmp_path):
    foreign = tmp_path / "images.tar"
    foreign.write_bytes(b"ustar" * 5000)
    result = aitestbed("images", "load", str(foreign),
                       env_extra={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.returncode == 1
    assert result.stderr.strip() == (f"aitestbed: error: {foreign} is not an aitestbed image "
                                     "cache (no aitestbed header): make one with "
                                     "`aitestbed images save`")


def test_cli_save_to_an_unwritable_place_is_one_line(tmp_path):
    result = aitestbed("images", "save", str(tmp_path / "no" / "such" / "dir" / "c.aic"),
                       "--profile", "mini")
    assert result.returncode == 1
    assert "cannot write" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ the key

def _tree(root: Path) -> None:
    for rel in imagecache.KEY_INPUTS:
        path = root / rel
        if "." in path.name:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rel)
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / "a.txt").write_text(rel)


def test_key_follows_every_input_and_nothing_else(tmp_path, monkeypatch):
    _tree(tmp_path)
    monkeypatch.setenv("AITESTBED_HOME", str(tmp_path))
    monkeypatch.delenv("AITESTBED_IMAGE_PREFIX", raising=False)
    monkeypatch.delenv("AITESTBED_BASE_IMAGE", raising=False)
    key = imagecache.cache_key(["login", "cs2"])
    assert key == imagecache.cache_key(["cs2", "login"])
    (tmp_path / "README.md").write_text("not an input")
    (tmp_path / "emulator" / "__pycache__").mkdir()
    (tmp_path / "emulator" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert imagecache.cache_key(["login", "cs2"]) == key
    seen = {key}
    for rel in imagecache.KEY_INPUTS:
        target = tmp_path / rel
        target = target if target.is_file() else target / "a.txt"
        before = target.read_text()
        target.write_text(before + " changed")
        seen.add(imagecache.cache_key(["login", "cs2"]))
        target.write_text(before)
    assert len(seen) == 1 + len(imagecache.KEY_INPUTS)
    assert imagecache.cache_key(["login"]) not in seen
    monkeypatch.setenv("AITESTBED_IMAGE_PREFIX", "other")
    assert imagecache.cache_key(["login", "cs2"]) not in seen


def test_cli_key_needs_no_engine():
    result = aitestbed("images", "key", "--profile", "mini",
                       env_extra={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) == 12
    int(result.stdout, 16)
    alone = aitestbed("images", "key", "--profile", "mini", "--systems", "graphcore")
    assert alone.returncode == 0 and alone.stdout != result.stdout


# ------------------------------------------------------------------ registry names

@pytest.mark.parametrize("good", ["127.0.0.1:5000/ci", "localhost:5000", "reg.example.org/a/b",
                                  "127.0.0.1:5000/aitestbed/"])
def test_registry_names(good):
    assert registry.check_registry(good) == good.rstrip("/")


@pytest.mark.parametrize("bad", ["aitestbed", "myuser/images", "127.0.0.1:5000/Upper",
                                 "http://127.0.0.1:5000/x", "", "host:port/x"])
def test_bad_registry_names_are_refused(bad):
    with pytest.raises(AitestbedError, match="bad registry"):
        registry.check_registry(bad)


def test_remote_names_keep_name_and_tag():
    assert registry.remote_name("127.0.0.1:5000/ci", "scratch/a/login:abc") == \
        "127.0.0.1:5000/ci/login:abc"
    assert registry.remote_name("r.org:1/p", "aitestbed/base:bookworm") == "r.org:1/p/base:bookworm"


# ------------------------------------------------------------------ a tiny image, a real engine

@pytest.fixture(scope="module")
def engine():
    docker = pytest.importorskip("docker")
    if not shutil.which("zstd"):
        pytest.skip("zstd is missing")
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception:  # noqa: BLE001 - any failure means: no engine here
        pytest.skip("no Docker engine reachable")
    return client


@pytest.fixture()
def tiny(engine, tmp_path):
    """A one-file image FROM scratch as scratch-cache-<id>/tiny:1; every tag removed after."""
    name = f"scratch-cache-{uuid.uuid4().hex[:8]}"
    context = tmp_path / "context"
    context.mkdir()
    (context / "hello").write_text(name)
    (context / "Dockerfile").write_text("FROM scratch\nCOPY hello /hello\n")
    image, _ = engine.images.build(path=str(context), tag=f"{name}/tiny:1", rm=True)
    yield engine, f"{name}/tiny:1", image.id
    for leftover in engine.images.list(name=f"{name}/*"):
        for tag in leftover.tags:
            engine.images.remove(tag)
    try:
        engine.images.remove(image.id)
    except Exception:  # noqa: BLE001 - already gone with its last tag
        pass


def test_save_then_load_gives_back_the_tag_and_its_image_id(tiny, tmp_path):
    client, tag, image_id = tiny
    path = tmp_path / "tiny.aic"
    result = imagecache.save_tags(client, path, [tag], {"key": "k"})
    assert result.tags == [tag] and path.stat().st_size == result.size
    assert not path.with_name("tiny.aic.part").exists()
    got = imagecache.read_manifest(path)
    assert got["tags"] == {tag: image_id} and got["key"] == "k"
    client.images.remove(tag)
    imagecache.load(client, path)
    assert client.images.get(tag).id == image_id


def test_a_damaged_file_loads_nothing(tiny, tmp_path):
    client, tag, _ = tiny
    path = tmp_path / "tiny.aic"
    imagecache.save_tags(client, path, [tag], {})
    client.images.remove(tag)
    data = bytearray(path.read_bytes())
    data[imagecache.HEADER_SIZE + 20] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(AitestbedError, match="damaged: its checksum"):
        imagecache.load(client, path)
    assert not client.images.list(name=tag)


def test_a_failed_load_removes_the_tags_it_created(tiny, tmp_path):
    """The engine loads the payload, but an image is not what the manifest says: the
    tags this load created are removed again, and the error is one line."""
    client, tag, image_id = tiny
    path = tmp_path / "tiny.aic"
    imagecache.save_tags(client, path, [tag], {})
    client.images.remove(tag)
    raw = path.read_bytes()
    header = json.loads(raw[len(imagecache.MAGIC):imagecache.HEADER_SIZE].rstrip(b"\0"))
    other = tag.replace("tiny:1", "other:1")
    header["tags"][other] = image_id.replace(image_id[-4:], "beef")
    path.write_bytes(imagecache.encode_header(header) + raw[imagecache.HEADER_SIZE:])
    with pytest.raises(AitestbedError, match="is not the image it was saved with"):
        imagecache.load(client, path)
    assert not client.images.list(name=tag)


def test_the_engine_refusing_the_payload_is_one_error(tiny, tmp_path):
    import hashlib
    client, tag, image_id = tiny
    payload = subprocess.run(["zstd", "-q", "-c"], input=b"not a tar at all" * 100,
                             capture_output=True, check=True).stdout
    header = manifest(size=len(payload), tags={tag + "x": image_id})
    header["payload"]["sha256"] = hashlib.sha256(payload).hexdigest()
    path = tmp_path / "bad.aic"
    path.write_bytes(imagecache.encode_header(header) + payload)
    with pytest.raises(AitestbedError, match="docker load failed"):
        imagecache.load(client, path)
    assert not client.images.list(name=tag + "x")


def test_an_unreachable_registry_is_one_clear_error(tiny):
    client, tag, _ = tiny
    with pytest.raises(AitestbedError, match="registry 127.0.0.1:9/x: cannot push .*unreachable"):
        registry.push(client, "127.0.0.1:9/x", tag)
    assert not client.images.list(name="127.0.0.1:9/x/tiny")
    with pytest.raises(AitestbedError, match="cannot pull .*unreachable"):
        registry.pull_as(client, "127.0.0.1:9/x", tag)
