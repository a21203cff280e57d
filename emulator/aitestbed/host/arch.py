"""The machine architecture the node images are built for: the host's (the Docker engine
runs there), or AITESTBED_ARCH (amd64 or arm64). The wheels downloaded for the cluster
follow it; Debian's packages and the Go and OpenPBS builds follow the base image's own.
A leaf every host module may import."""

from __future__ import annotations

import os
import platform

from aitestbed.host.errors import AitestbedError

# Docker's / Debian's name -> the machine name Python wheels and GNU triplets use
MACHINES = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}


def machine() -> str:
    """x86_64 or aarch64."""
    wanted = os.environ.get("AITESTBED_ARCH") or platform.machine()
    try:
        return MACHINES[wanted.lower()]
    except KeyError:
        raise AitestbedError(
            f"cannot build node images for the architecture {wanted!r}"
            f"{' (AITESTBED_ARCH)' if os.environ.get('AITESTBED_ARCH') else ''}: "
            "choose amd64 or arm64") from None


def wheel_platforms() -> list[str]:
    """pip download's --platform values for Python 3.11 wheels of this architecture."""
    m = machine()
    return [f"manylinux2014_{m}", f"manylinux_2_17_{m}", "any"]


def pip_platform_args() -> list[str]:
    return [arg for p in wheel_platforms() for arg in ("--platform", p)]
