"""What `up` says once about an engine that is not root's Docker (host/engine.notes), from
the Engine API answers of the three engines tried on this machine (cgroup v1, 2026-11-29):
root's Docker 20.10, rootless Docker 20.10 (dockerd-rootless.sh) and rootless Podman 4.3
(`podman system service`, netavark)."""

from __future__ import annotations

from aitestbed.host import engine

DOCKER_VERSION = {"Components": [{"Name": "Engine"}, {"Name": "containerd"}, {"Name": "runc"}]}
ROOT_DOCKER = {"SecurityOptions": ["name=seccomp,profile=default"], "CgroupVersion": "1",
               "MemoryLimit": True, "PidsLimit": True}
ROOTLESS_DOCKER = {"SecurityOptions": ["name=seccomp,profile=default", "name=rootless"],
                   "CgroupVersion": "1", "CgroupDriver": "none", "MemoryLimit": False,
                   "PidsLimit": False}
PODMAN_VERSION = {"Components": [{"Name": "Podman Engine"}, {"Name": "Conmon"}]}
# Podman claims both limits in the Docker-shaped info and drops them when rootless on v1
ROOTLESS_PODMAN = {"SecurityOptions": ["name=seccomp,profile=default"], "CgroupVersion": "1",
                   "MemoryLimit": True, "PidsLimit": True}


def test_roots_docker_has_nothing_to_say():
    assert engine.notes(ROOT_DOCKER, DOCKER_VERSION) == []


def test_rootless_docker_on_cgroup_v1_holds_no_limits():
    (note,) = engine.notes(ROOTLESS_DOCKER, DOCKER_VERSION)
    assert note.startswith("this engine enforces no memory or process limits")


def test_rootless_podman_says_both_the_limits_and_its_dns():
    said = engine.notes(ROOTLESS_PODMAN, PODMAN_VERSION, podman_rootless=True)
    assert len(said) == 2
    assert "no memory or process limits" in said[0]
    assert said[1].startswith("Podman's DNS (aardvark-dns) forwards")
    # root's Podman keeps its limits: only the DNS line
    assert len(engine.notes(ROOTLESS_PODMAN, PODMAN_VERSION, podman_rootless=False)) == 1
