"""Node images: a shared OS layer, then one thin image per node class.

  base      aitestbed/base:bookworm    debian:bookworm-slim, or debootstrap + import
  OS layer  <prefix>/node-os:<hash>    images/node-os/Dockerfile: every Debian package
  classes   <prefix>/<class>:<hash>    playbooks/image.yml applied by Ansible to a
                                       container of the OS layer, then committed
Tags are content hashes of what went into them, so an image is rebuilt exactly
when its inputs change, and `up` with everything built does no build work.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import docker
import yaml
from docker.errors import APIError, BuildError, ImageNotFound

from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import project_root
from aitestbed.host.naming import LABEL_BUILD, LABEL_CLASS
from aitestbed.host.playbook import run_playbook
from aitestbed.host.registry import check_registry, pull_as
from aitestbed.host.sdk_artifacts import (
    build_cerebras,
    build_graphcore,
    build_groq,
    build_kubernetes,
    build_openpbs,
    build_sambanova,
    build_tensorboard,
)

ENTRYPOINT = ["/usr/bin/tini", "--"]
CMD = ["/opt/aitestbed/venv/bin/aitestbed-node-init"]


def prefix() -> str:
    return os.environ.get("AITESTBED_IMAGE_PREFIX", "aitestbed")


def base_image() -> str:
    return os.environ.get("AITESTBED_BASE_IMAGE", f"{prefix()}/base:bookworm")


def say(message: str) -> None:
    print(f"aitestbed: {message}", file=sys.stderr, flush=True)


def _tree_digest(paths: Iterable[Path], extra: Iterable[str] = ()) -> str:
    digest = hashlib.sha256()
    for item in extra:
        digest.update(item.encode() + b"\0")
    root = project_root()
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if any(p == "__pycache__" or p.endswith(".egg-info") for p in file.parts):
                continue
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:12]


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def _from_registry(client: docker.DockerClient, tag: str) -> bool:
    """With AITESTBED_REGISTRY set, a missing image is pulled from there before it is built."""
    registry = os.environ.get("AITESTBED_REGISTRY")
    if not registry:
        return False
    registry = check_registry(registry)
    say(f"pulling {tag} from {registry}")
    try:
        if pull_as(client, registry, tag):
            return True
        say(f"{registry} has no {tag}: building it")
    except AitestbedError as err:
        say(f"{err}: building {tag}")
    return False


def ensure_base(client: docker.DockerClient) -> str:
    tag = base_image()
    if not _exists(client, tag) and not _from_registry(client, tag):
        script = project_root() / "scripts" / "ensure-base-image.sh"
        env = {**os.environ, "AITESTBED_BASE_IMAGE": tag}
        if subprocess.run(["bash", str(script)], env=env, check=False).returncode:
            raise AitestbedError(f"could not provide the base image {tag} (see above)")
    return tag


def ensure_node_os(client: docker.DockerClient, nocache: bool = False) -> str:
    """The OS layer; AITESTBED_NO_CACHE=1 builds it without Docker's layer cache."""
    nocache = nocache or os.environ.get("AITESTBED_NO_CACHE") == "1"
    base = ensure_base(client)
    tag = node_os_tag(client, base)
    context = project_root() / "images" / "node-os"
    if not nocache and (_exists(client, tag) or _from_registry(client, tag)):
        return tag
    say(f"building the OS layer {tag} (all Debian packages of the cluster; a few minutes once)")
    started = time.monotonic()
    try:
        for chunk in client.api.build(path=str(context), tag=tag, buildargs={"BASE_IMAGE": base},
                                      rm=True, forcerm=True, nocache=nocache, decode=True):
            if "error" in chunk:
                raise BuildError(chunk["error"], [])
            line = chunk.get("stream", "").strip()
            if line.startswith("Step "):
                say(f"  {line[:110]}")
    except (BuildError, APIError) as err:
        raise AitestbedError(f"building {tag} failed: {str(err).strip()}") from None
    say(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


def node_os_tag(client: docker.DockerClient, base: str) -> str:
    context = project_root() / "images" / "node-os"
    return f"{prefix()}/node-os:" + _tree_digest([context], [client.images.get(base).id])


# What a class image is made from (beside the OS layer): its tag is a hash of these.
CLASS_INPUTS = ("roles", "playbooks", "deploy", "emulator", "pyproject.toml",
                "images/cluster-requirements.txt", "images/graphcore-tensorflow-requirements.txt",
                "images/tensorboard-requirements.txt",
                "inventory/group_vars/all.yml")


def class_tag(client: docker.DockerClient, node_os: str, node_class: str) -> str:
    root = project_root()
    inputs = [root / path for path in CLASS_INPUTS]
    digest = _tree_digest(inputs, [client.images.get(node_os).id, node_class])
    return f"{prefix()}/{node_class}:{digest}"


def build_wheelhouse() -> Path:
    """Wheels for inside the cluster (containers cannot reach PyPI): ours and our needs."""
    root = project_root()
    wheelhouse = root / "build" / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    wheelhouse.mkdir(parents=True)
    # setuptools builds in build/lib and never empties it: a module since moved or
    # deleted would ride along in every later wheel (and differ from a clean clone's).
    for stale in [root / "build" / "lib", *root.joinpath("build").glob("bdist.*")]:
        shutil.rmtree(stale, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    # A fixed SOURCE_DATE_EPOCH makes the wheel byte-for-byte reproducible, so a rebuilt
    # wheelhouse equals the one in the images and site.yml finds nothing to copy.
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheelhouse),
                    str(root)], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"})
    requirements = root / "images" / "cluster-requirements.txt"
    wanted = [ln for ln in requirements.read_text().splitlines()
              if ln.strip() and not ln.lstrip().startswith("#")]
    if wanted:
        subprocess.run([*pip, "download", "--only-binary=:all:", "--python-version", "3.11",
                        "--platform", "manylinux2014_x86_64", "--platform", "any",
                        "-d", str(wheelhouse), "-r", str(requirements)], check=True)
    return wheelhouse


def build_host_artifacts(node_os: str | None = None) -> None:
    """What the roles copy from the host: the wheelhouse and the vendor SDKs' files.
    Reproducible, so a rebuild equals the images' copies and site.yml changes nothing.
    OpenPBS is compiled against the node OS layer (`node_os`, made if missing)."""
    if node_os is None:
        node_os = ensure_node_os(connect())
    build_wheelhouse()
    say("the vendor SDKs' files and TensorBoard (TensorFlow's wheels for the Graphcore hosts "
        "and TensorBoard's: about 220 MB, downloaded once into build/downloads)")
    build_graphcore()
    build_sambanova()
    build_cerebras()
    build_kubernetes()
    build_openpbs(node_os)
    build_groq()
    build_tensorboard()


def ensure_class_images(client: docker.DockerClient, classes: list[str]) -> dict[str, str]:
    node_os = ensure_node_os(client)
    tags = {c: class_tag(client, node_os, c) for c in classes}
    missing = [c for c in classes
               if not _exists(client, tags[c]) and not _from_registry(client, tags[c])]
    if not missing:
        return tags
    say(f"building node class images: {', '.join(missing)} (Ansible, playbooks/image.yml)")
    started = time.monotonic()
    build_host_artifacts(node_os)
    run_id = uuid.uuid4().hex[:8]
    containers = {}
    try:
        for node_class in missing:
            containers[node_class] = client.containers.run(
                node_os, ["sleep", "infinity"], name=f"{prefix()}-build-{node_class}-{run_id}",
                detach=True, network_mode="none", labels={LABEL_BUILD: run_id})
        _apply_image_playbook(containers, run_id)
        for node_class, container in containers.items():
            repository, tag = tags[node_class].rsplit(":", 1)
            container.commit(repository=repository, tag=tag, conf={
                "Entrypoint": ENTRYPOINT, "Cmd": CMD,
                "Labels": {LABEL_CLASS: node_class}, "StopSignal": "SIGTERM"})
    finally:
        for container in containers.values():
            container.remove(force=True)
    say(f"built {', '.join(tags[c] for c in missing)} in {time.monotonic() - started:.0f} s")
    _prune(client, [tags[c] for c in missing])
    return tags


def _prune(client: docker.DockerClient, current: list[str]) -> None:
    """Remove superseded tags of the rebuilt classes that no container uses."""
    for tag in current:
        repository = tag.rsplit(":", 1)[0]
        for image in client.images.list(name=repository):
            if tag in image.tags:
                continue
            try:
                client.images.remove(image.id)
            except APIError:  # a container (of some cluster) still runs from it
                continue


def _apply_image_playbook(containers: dict, run_id: str) -> None:
    root = project_root()
    inventory = {"all": {"hosts": {
        f"build-{node_class}": {"ansible_host": c.name, "node_class": node_class,
                                "ansible_connection": "docker",
                                "ansible_python_interpreter": "/usr/bin/python3"}
        for node_class, c in containers.items()}}}
    log = root / "build" / "logs" / f"image-{run_id}.log"
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as inv:
        yaml.safe_dump(inventory, inv)
    try:
        result = run_playbook("image", [Path(inv.name)],
                              extra_vars=[f"@{root / 'inventory' / 'group_vars' / 'all.yml'}",
                                          '{"image_build": true}'],
                              log=log)
    finally:
        os.unlink(inv.name)
    if result.returncode:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise AitestbedError(f"playbooks/image.yml failed (full log: {log}):\n{tail}")
