"""The emulated IPU system of this process: its device clock, its configuration, its IPUs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from aitestbed.devices.host import FacadeRuntime, start
from aitestbed.graphcore import popc

from ._log import log


@dataclass
class AttachedDevice:
    """One TensorFlow IPU device (/device:IPU:N): a Poplar device of `ipus` IPUs."""

    ordinal: int
    ipus: int
    poplar_id: int | None  # None on the IPU Model


@dataclass
class SystemState:
    config_key: str | None = None
    devices: list[AttachedDevice] = field(default_factory=list)


class Runtime(FacadeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.system = SystemState()

    def tune_cpu(self) -> None:
        """TensorFlow sizes its own thread pools; nothing of torch's to tune here."""

    def device(self, ordinal: int = 0) -> AttachedDevice | None:
        for device in self.system.devices:
            if device.ordinal == ordinal:
                return device
        return None


def use_ipu_model() -> bool:
    """TF_POPLAR_FLAGS=--use_ipu_model: the IPU Model on the host, no IPUs needed."""
    return "--use_ipu_model" in os.environ.get("TF_POPLAR_FLAGS", "").split()


def poplar_version_line() -> str:
    version = os.environ.get("POPLAR_SDK_VERSION") or popc.DEFAULT_VERSION
    build = popc.VERSIONS.get(version, popc.VERSIONS[popc.DEFAULT_VERSION])[0]
    return f"Poplar version: {version} ({build}) Poplar package: {PACKAGES.get(version, build)}"


# The Poplar package hash `from tensorflow.python import ipu` prints (the guide's, 3.1.0).
PACKAGES = {"3.1.0": "9c103dc348", "3.3.0": "b67b751185"}

runtime = start(Runtime)
log("I", "tensorflow/compiler/plugin/poplar/driver/poplar_platform.cc:43", poplar_version_line())
