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
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import docker
import yaml
from docker.errors import APIError, BuildError, ImageNotFound

from aitestbed.host import systems
from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.inventory import project_root
from aitestbed.host.naming import LABEL_BUILD, LABEL_CLASS
from aitestbed.host.paths import build_root
from aitestbed.host.playbook import run_playbook
from aitestbed.host.registry import check_registry, pull_as

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


def profile_class_systems() -> list[dict[str, tuple[str, ...]]]:
    """Each profile's {class: its systems}: the images a release pushes (make
    release-images), whose class images a subset's nodes may run from."""
    return [load_inventory(path.stem).class_systems
            for path in sorted((project_root() / "inventory").glob("*.yml"))]


def covering_tags(client: docker.DockerClient, node_os: str, inputs: str, node_class: str,
                  wanted: Sequence[str]) -> list[str]:
    """The tags of the profiles' images of a class that carry these systems and more (a
    release pushes those), fewest systems first: what a subset's nodes may run from."""
    supersets = sorted({carried for profile in profile_class_systems()
                        if (carried := profile.get(node_class)) is not None
                        and set(wanted) < set(carried)}, key=lambda c: (len(c), c))
    return [class_tag(client, node_os, node_class, carried, inputs) for carried in supersets]


def _covering_from_registry(client: docker.DockerClient, node_os: str, inputs: str,
                            node_class: str, wanted: Sequence[str]) -> str | None:
    """A subset's class image absent from AITESTBED_REGISTRY: a profile's image of that
    class carrying these systems and more (the fewest), pulled from there instead."""
    if not os.environ.get("AITESTBED_REGISTRY"):
        return None
    for tag in covering_tags(client, node_os, inputs, node_class, wanted):
        if _from_registry(client, tag):
            return tag
    return None


PULLS_AT_ONCE = 3  # class images: each is one thin layer set on the shared OS layer


def pull_side_by_side(pull: Callable[[str], bool], names: Sequence[str]) -> dict[str, bool]:
    """{name: pull(name)} with up to PULLS_AT_ONCE at once: Docker applies one image's
    layers in order, on one core, so the class images' layers (on an OS layer already
    present) are unpacked side by side. The first error raised is raised."""
    if len(names) <= 1 or not os.environ.get("AITESTBED_REGISTRY"):
        return {name: pull(name) for name in names}
    with ThreadPoolExecutor(max_workers=PULLS_AT_ONCE) as pool:
        futures = {name: pool.submit(pull, name) for name in names}
        return {name: future.result() for name, future in futures.items()}


def ensure_base(client: docker.DockerClient) -> str:
    tag = base_image()
    if not _exists(client, tag) and not _from_registry(client, tag):
        script = project_root() / "scripts" / "ensure-base-image.sh"
        # without a registry it makes the image with this Python (aitestbed.host.debian_base)
        env = {"AITESTBED_PYTHON": sys.executable, **os.environ, "AITESTBED_BASE_IMAGE": tag}
        if subprocess.run(["bash", str(script)], env=env, check=False).returncode:
            raise AitestbedError(f"could not provide the base image {tag} (see above)")
    return tag


def present_node_os(client: docker.DockerClient) -> str | None:
    """The OS layer's tag if the engine has it or pulled it from AITESTBED_REGISTRY now
    (the base image made first); None if it is to be built."""
    tag = node_os_tag(client, ensure_base(client))
    return tag if _exists(client, tag) or _from_registry(client, tag) else None


def ensure_node_os(client: docker.DockerClient, nocache: bool = False) -> str:
    """The OS layer; AITESTBED_NO_CACHE=1 builds it without Docker's layer cache."""
    nocache = nocache or os.environ.get("AITESTBED_NO_CACHE") == "1"
    if not nocache and (tag := present_node_os(client)):
        return tag
    return _build_node_os(client, nocache)


def _build_node_os(client: docker.DockerClient, nocache: bool = False) -> str:
    base = ensure_base(client)
    tag = node_os_tag(client, base)
    context = project_root() / "images" / "node-os"
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


# What a class image is made from (beside the OS layer, its class and its systems): its
# tag is a hash of these and of the files the systems' artifacts are made from.
CLASS_INPUTS = ("roles", "playbooks", "deploy", "emulator", "pyproject.toml",
                "inventory/group_vars/all.yml")


def class_input_paths() -> list[str]:
    return [*CLASS_INPUTS, *systems.artifact_inputs()]


LABEL_INPUTS = "aitestbed.inputs"  # the digest of what a class image was made from
LABEL_SYSTEMS = "aitestbed.systems"  # the systems whose roles it carries, comma-separated


def class_inputs(client: docker.DockerClient, node_os: str) -> str:
    """The digest of everything a class image is made from beside its class and systems."""
    root = project_root()
    return _tree_digest([root / path for path in class_input_paths()],
                        [client.images.get(node_os).id])


def class_tag(client: docker.DockerClient, node_os: str, node_class: str,
              system_names: Sequence[str], inputs: str | None = None) -> str:
    """<prefix>/<class>:<digest of its inputs, its class and its systems>."""
    inputs = inputs or class_inputs(client, node_os)
    digest = hashlib.sha256("\0".join([inputs, node_class, *system_names]).encode())
    return f"{prefix()}/{node_class}:{digest.hexdigest()[:12]}"


def covering(client: docker.DockerClient, node_class: str, inputs: str,
              system_names: Sequence[str]) -> str | None:
    """A local image of the class made from the same inputs for these systems and more (a
    subset's login node runs from the full profile's login image): the one with the
    fewest systems."""
    found = []
    for image in client.images.list(name=f"{prefix()}/{node_class}",
                                    filters={"label": f"{LABEL_INPUTS}={inputs}"}):
        carried = set(filter(None, (image.labels or {}).get(LABEL_SYSTEMS, "").split(",")))
        # Podman names a loaded or built image localhost/<name>
        tags = sorted(t.removeprefix("localhost/") for t in image.tags
                      if t.removeprefix("localhost/").startswith(f"{prefix()}/{node_class}:"))
        if tags and set(system_names) <= carried:
            found.append((len(carried), tags[0]))
    return min(found)[1] if found else None


def build_host_artifacts(system_names: Iterable[str], node_os: str | None = None,
                         node_os_later: Callable[[], str] | None = None) -> None:
    """What the roles of these systems' images copy from the host: the common artifacts
    (the wheelhouse, TensorBoard's wheels) and each system's own (host/systems), nothing
    of a system not asked for. Reproducible, so a rebuild equals the images' copies and
    site.yml changes nothing. The OS layer (`node_os`) is made only if an artifact needs
    it (OpenPBS is compiled against it); `node_os_later` waits for one being built."""
    root = project_root()
    made: list[str] = [node_os] if node_os else []

    def the_node_os() -> str:
        if not made:
            made.append(node_os_later() if node_os_later else ensure_node_os(connect()))
        return made[0]

    context = systems.BuildContext(root, the_node_os)
    for artifact in systems.artifacts(system_names):
        say(f"  {artifact.name}" + (f" ({artifact.note})" if artifact.note else ""))
        artifact.build(context)


class _Meanwhile:
    """The host artifacts of every asked system, made in a thread while the OS layer
    builds: when the OS layer is to be built, no class image of it exists, so each
    class will be built and needs them. The Go build of kube-apiserver (minutes of CPU)
    then overlaps the OS layer's (mostly downloads and unpacking)."""

    def __init__(self, system_names: Sequence[str]):
        self.systems = set(system_names)
        self.node_os: Future[str] = Future()
        self.done: Future[None] = Future()
        say("meanwhile, what the class images' roles copy from this host:")
        threading.Thread(target=self._run, args=(sorted(self.systems),), daemon=True,
                         name="aitestbed-artifacts").start()

    def _run(self, system_names: list[str]) -> None:
        try:
            build_host_artifacts(system_names, node_os_later=self.node_os.result)
        except BaseException as err:  # noqa: BLE001 - given to the caller by wait()
            self.done.set_exception(err)
        else:
            self.done.set_result(None)

    def wait(self) -> None:
        """Until the artifacts are made; their error, if one failed."""
        if not self.done.done():
            say("waiting for the host artifacts started meanwhile")
        self.done.result()


def ensure_class_images(client: docker.DockerClient,
                        classes: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """class -> the image its nodes are made from, for a topology's classes and the systems
    each carries (Topology.class_systems): this checkout's image, a local one of the same
    inputs that carries more systems, one pulled from AITESTBED_REGISTRY, or built here
    with the artifacts of those systems only."""
    meanwhile = None
    node_os = present_node_os(client)
    if node_os is None and os.environ.get("AITESTBED_NO_CACHE") != "1":
        meanwhile = _Meanwhile(sorted({s for carried in classes.values() for s in carried}))
        try:
            node_os = _build_node_os(client)
        except BaseException as err:
            meanwhile.node_os.set_exception(AitestbedError("the OS layer was not built"))
            raise err
        meanwhile.node_os.set_result(node_os)
    else:
        node_os = node_os or ensure_node_os(client)
    inputs = class_inputs(client, node_os)
    tags = {c: class_tag(client, node_os, c, s, inputs) for c, s in classes.items()}
    missing = []
    to_pull = []
    for node_class in classes:
        if _exists(client, tags[node_class]):
            continue
        found = covering(client, node_class, inputs, classes[node_class])
        if found:
            tags[node_class] = found
        else:
            to_pull.append(node_class)
    pulled = pull_side_by_side(lambda c: _from_registry(client, tags[c]), to_pull)
    for node_class in to_pull:
        if pulled[node_class]:
            continue
        if found := _covering_from_registry(client, node_os, inputs, node_class,
                                            classes[node_class]):
            tags[node_class] = found
        else:
            missing.append(node_class)
    if not missing:
        if meanwhile:
            meanwhile.wait()
        return tags
    wanted = sorted({s for c in missing for s in classes[c]})
    say(f"building node class images: {', '.join(missing)} (Ansible, playbooks/image.yml) "
        f"for {systems.describe(wanted) or 'no system'}")
    started = time.monotonic()
    if meanwhile and set(wanted) <= meanwhile.systems:
        meanwhile.wait()
    else:
        if meanwhile:
            meanwhile.wait()
        say("what their roles copy from this host:")
        build_host_artifacts(wanted, node_os)
    run_id = uuid.uuid4().hex[:8]
    containers = {}
    try:
        for node_class in missing:
            containers[node_class] = client.containers.run(
                node_os, ["sleep", "infinity"], name=f"{prefix()}-build-{node_class}-{run_id}",
                detach=True, network_mode="none", labels={LABEL_BUILD: run_id})
        _apply_image_playbook(containers, {c: classes[c] for c in missing}, run_id)
        for node_class, container in containers.items():
            repository, tag = tags[node_class].rsplit(":", 1)
            # pause=False: the container only sleeps once the playbook is done, and rootless
            # Podman on cgroup v1 cannot pause one ("this container does not have a cgroup")
            container.commit(repository=repository, tag=tag, pause=False, conf={
                "Entrypoint": ENTRYPOINT, "Cmd": CMD,
                "Labels": {LABEL_CLASS: node_class, LABEL_INPUTS: inputs,
                           LABEL_SYSTEMS: ",".join(classes[node_class])},
                "StopSignal": "SIGTERM"})
    finally:
        for container in containers.values():
            container.remove(force=True)
    say(f"built {', '.join(tags[c] for c in missing)} in {time.monotonic() - started:.0f} s")
    _prune(client, [tags[c] for c in missing], inputs)
    return tags


def _prune(client: docker.DockerClient, current: list[str], inputs: str) -> None:
    """Remove the superseded images of the rebuilt classes (made from other inputs) that no
    container uses; the same inputs' images for other systems stay."""
    for tag in current:
        repository = tag.rsplit(":", 1)[0]
        for image in client.images.list(name=repository):
            if tag in image.tags or (image.labels or {}).get(LABEL_INPUTS) == inputs:
                continue
            try:
                client.images.remove(image.id)
            except APIError:  # a container (of some cluster) still runs from it
                continue


class _TaskProgress:
    """A line at most every PROGRESS_SECONDS while the image playbook runs: how long it
    has run, how many tasks it started, the current one (the full log's path first)."""

    PROGRESS_SECONDS = 15.0

    def __init__(self, log: Path):
        self.started = self.said = time.monotonic()
        self.tasks = 0
        say(f"  the image playbook runs (full log: {log})")

    def __call__(self, task: str) -> None:
        self.tasks += 1
        now = time.monotonic()
        if now - self.said >= self.PROGRESS_SECONDS:
            self.said = now
            say(f"  {now - self.started:4.0f} s, task {self.tasks}: {task}")


def _apply_image_playbook(containers: dict, classes: Mapping[str, Sequence[str]],
                          run_id: str) -> None:
    root = project_root()
    inventory = {"all": {"hosts": {
        f"build-{node_class}": {"ansible_host": c.name, "node_class": node_class,
                                "image_systems": list(classes[node_class]),
                                "ansible_connection": "docker",
                                "ansible_python_interpreter": "/usr/bin/python3"}
        for node_class, c in containers.items()}}}
    log = build_root() / "logs" / f"image-{run_id}.log"
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as inv:
        yaml.safe_dump(inventory, inv)
    try:
        result = run_playbook("image", [Path(inv.name)],
                              extra_vars=[f"@{root / 'inventory' / 'group_vars' / 'all.yml'}",
                                          '{"image_build": true}'],
                              log=log, on_task=_TaskProgress(log))
    finally:
        os.unlink(inv.name)
    if result.returncode:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise AitestbedError(f"playbooks/image.yml failed (full log: {log}):\n{tail}")
