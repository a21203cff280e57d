"""The image cache for fresh runners (`aitestbed images`): the real node images of one
class through a cache file, and the image chain through a real registry on 127.0.0.1.

Everything runs under scratch image names (the session cluster's images are tagged again
under a scratch prefix; only those scratch tags are removed), so the cluster's own tags
are never touched. Expected cost on CI (2 cores): the save/load round trip ~60 s (base +
OS layer + slurmctld, ~2.7 GB through docker save | zstd and back), the registry tests
~10 s (tiny images: the chain base -> OS layer -> class is what they prove; pushing the
real 2.5 GB OS layer would take minutes).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import docker
import pytest
from aitestbed.host import imagecache, images
from aitestbed.host.driver import AITESTBED
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import load as load_inventory

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

REGISTRY = "/usr/bin/docker-registry"


@pytest.fixture()
def client():
    return docker.from_env(timeout=300)


@pytest.fixture()
def scratch(client, monkeypatch):
    """A scratch image prefix; every tag under it is removed at the end (tags only: the
    images stay as long as their own tags hold them)."""
    prefix = f"scratch-cache-{uuid.uuid4().hex[:6]}"
    yield prefix
    monkeypatch.delenv("AITESTBED_IMAGE_PREFIX", raising=False)
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(f"{prefix}/") or f"/{prefix}/" in tag:
                client.images.remove(tag, noprune=True)


def _tag(client, source: str, target: str) -> None:
    client.images.get(source).tag(*target.rsplit(":", 1))


@pytest.mark.slow("2.7 GB of real images through docker save | zstd and back (about 60 s)")
def test_real_images_survive_a_save_and_load_and_up_builds_nothing(cluster, client, scratch,
                                                                    monkeypatch, tmp_path):
    # The session's cluster built this checkout's images under the default prefix.
    monkeypatch.delenv("AITESTBED_IMAGE_PREFIX", raising=False)
    monkeypatch.delenv("AITESTBED_BASE_IMAGE", raising=False)
    assert imagecache.missing(client, {"slurmctld": ()}) == []
    real = [images.base_image(), images.node_os_tag(client, images.base_image())]
    real.append(images.class_tag(client, real[1], "slurmctld", ()))
    monkeypatch.setenv("AITESTBED_IMAGE_PREFIX", scratch)
    ours = [f"{scratch}/{tag.split('/', 1)[1]}" for tag in real]
    for source, target in zip(real, ours, strict=True):
        _tag(client, source, target)
    assert imagecache.missing(client, {"slurmctld": ()}) == []
    path = tmp_path / "cache.aic"
    key = imagecache.cache_key({"slurmctld": ()})
    saved = imagecache.save_tags(client, path, ours, {"key": key})
    assert saved.size == path.stat().st_size and saved.size < saved.uncompressed
    ids = {tag: client.images.get(tag).id for tag in ours}
    for tag in ours:
        client.images.remove(tag, noprune=True)
    assert imagecache.missing(client, {"slurmctld": ()}) == [ours[0]]
    loaded = imagecache.load(client, path, imagecache.cache_key({"slurmctld": ()}))
    assert sorted(loaded.tags) == sorted(ours) and loaded.notes == []
    assert {tag: client.images.get(tag).id for tag in ours} == ids
    # What `up` (and `build`) would build now: nothing.
    assert imagecache.missing(client, {"slurmctld": ()}) == []


# ------------------------------------------------------------------ a real registry

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path: Path, auth: bool = False):
    if not Path(REGISTRY).exists():
        pytest.skip("Debian's docker-registry is not installed (scripts/ensure-host-tools.sh)")
    port = _free_port()
    config = tmp_path / f"registry-{port}.yml"
    text = (f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {tmp_path / f'data-{port}'}\nhttp:\n  addr: 127.0.0.1:{port}\n")
    if auth:
        (tmp_path / "htpasswd").write_text("nobody:$2y$05$" + "0" * 53 + "\n")
        text += f"auth:\n  htpasswd:\n    realm: test\n    path: {tmp_path / 'htpasswd'}\n"
    config.write_text(text)
    process = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
            break
        except urllib.error.HTTPError:  # 401 from the one with auth: it answers
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"no registry: {process.stderr.read()}") from None
            time.sleep(0.2)
    return process, f"127.0.0.1:{port}"


@pytest.fixture()
def registry_at(tmp_path):
    started = []

    def start(auth: bool = False) -> str:
        process, address = _serve(tmp_path, auth)
        started.append(process)
        return address

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture()
def tiny_chain(client, scratch, monkeypatch, tmp_path):
    """A base, an 'OS layer' and a slurmctld image as images.py names them, each a tiny
    image FROM scratch, so the tag chain (each tag a hash of the one before's ID) is real."""
    monkeypatch.setenv("AITESTBED_IMAGE_PREFIX", scratch)
    monkeypatch.delenv("AITESTBED_BASE_IMAGE", raising=False)
    built = []

    def tiny(text: str, tag: str) -> str:
        context = tmp_path / text
        context.mkdir()
        (context / "f").write_text(text + scratch)
        (context / "Dockerfile").write_text("FROM scratch\nCOPY f /f\n")
        image, _ = client.images.build(path=str(context), tag=tag, rm=True)
        built.append(image.id)
        return tag

    base = tiny("base", images.base_image())
    node_os = tiny("os", images.node_os_tag(client, base))
    tiny("ctld", images.class_tag(client, node_os, "slurmctld", ()))
    yield
    monkeypatch.delenv("AITESTBED_IMAGE_PREFIX", raising=False)
    for tag in [t for image in client.images.list() for t in image.tags
                if t.startswith(f"{scratch}/") or f"/{scratch}/" in t]:
        client.images.remove(tag, noprune=True)
    for image_id in built:
        try:
            client.images.remove(image_id)
        except docker.errors.APIError:
            pass


def _chain(client) -> list[str]:
    base = images.base_image()
    node_os = images.node_os_tag(client, base)
    return [base, node_os, images.class_tag(client, node_os, "slurmctld", ())]


def test_push_then_pull_gives_every_tag_back(client, tiny_chain, registry_at):
    address = registry_at()
    where = f"{address}/aitestbed-test"
    local = _chain(client)
    pushed = imagecache.push(client, where, {"slurmctld": ()})
    assert pushed == [f"{where}/{tag.rsplit('/', 1)[1]}" for tag in local]
    ids = {tag: client.images.get(tag).id for tag in local}
    for tag in local:
        client.images.remove(tag, noprune=True)
    assert imagecache.missing(client, {"slurmctld": ()}) == [local[0]]
    assert imagecache.pull(client, where, {"slurmctld": ()}) == local
    assert {tag: client.images.get(tag).id for tag in local} == ids
    assert imagecache.missing(client, {"slurmctld": ()}) == []
    # The registry's names were only passing through.
    assert not [t for image in client.images.list() for t in image.tags if address in t]


def test_a_refusing_or_stopped_registry_is_one_clear_error(client, tiny_chain, registry_at):
    locked = registry_at(auth=True)
    with pytest.raises(AitestbedError, match=f"registry {locked}/x: cannot push .*: it asks "
                                             "for credentials"):
        imagecache.push(client, f"{locked}/x", {"slurmctld": ()})
    for where in (f"{locked}/x", f"127.0.0.1:{_free_port()}/x"):
        result = subprocess.run([*AITESTBED, "images", "pull", "--registry", where,
                                 "--profile", "mini", "--systems", "graphcore"],
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith(f"aitestbed: error: registry {where}: cannot pull "), \
            result.stderr
        assert ("asks for credentials" if where.startswith(locked) else "it is unreachable") \
            in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_make_release_images_pushes_every_class_and_a_subset_pulls_from_it(
        client, tiny_chain, registry_at, tmp_path, monkeypatch):
    """The release workflow's one command (.github/workflows/release-images.yml) against a
    registry on 127.0.0.1: `make release-images` pushes the profile's base, OS layer and
    each class image under the tags `up` asks for (tiny images, the real chain). Then a
    one-system `up` finds every image there, its login node's in the profile's image that
    carries more systems: nothing is built."""
    classes = load_inventory("mini").class_systems
    node_os = images.node_os_tag(client, images.base_image())
    made = {}
    for node_class, systems in classes.items():
        context = tmp_path / f"class-{node_class}"
        context.mkdir()
        (context / "f").write_text(node_class)
        (context / "Dockerfile").write_text("FROM scratch\nCOPY f /f\n")
        tag = images.class_tag(client, node_os, node_class, systems)
        made[tag] = client.images.build(path=str(context), rm=True, tag=tag)[0].id
    try:
        address = registry_at()
        result = subprocess.run(["make", "-s", "-C", str(Path(__file__).resolve().parents[2]),
                                 "release-images", f"REGISTRY={address}/release",
                                 "RELEASE_PROFILES=mini"],
                                capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "pushing profile mini's images" in result.stderr
        with urllib.request.urlopen(f"http://{address}/v2/_catalog", timeout=10) as answer:
            pushed = sorted(json.load(answer)["repositories"])
        assert pushed == sorted(f"release/{name}" for name in
                                ["base", "node-os", *classes]), pushed

        for tag in made:  # a fresh engine: only the base and the OS layer are here
            client.images.remove(tag, noprune=True)
        monkeypatch.setenv("AITESTBED_REGISTRY", f"{address}/release")

        def no_build(*args, **kwargs):
            raise AssertionError("an image was built, not pulled")

        monkeypatch.setattr(images, "build_host_artifacts", no_build)
        subset = load_inventory("mini", ["graphcore"]).class_systems
        assert subset["login"] == ("graphcore",) != classes["login"]
        got = images.ensure_class_images(client, subset)
        assert got["login"] == images.class_tag(client, node_os, "login", classes["login"])
        assert {c: client.images.get(t).id for c, t in got.items()} == {
            c: made[images.class_tag(client, node_os, c, classes[c])] for c in subset}
        for tag in set(got.values()):  # `images pull` of the subset: the same images
            client.images.remove(tag, noprune=True)
        pulled = imagecache.pull(client, f"{address}/release", subset)
        assert set(got.values()) <= set(pulled)
    finally:
        for image_id in made.values():
            try:
                client.images.remove(image_id, force=True)
            except docker.errors.APIError:
                pass
