"""The appliance job this process runs as a worker; None on a client or a CPU run.

The worker activates a session before it runs the user's flow, and cerebras_pytorch
consults it: a "CSX" backend then trains here for real, keeps device time on the
session's clock and turns files the flow saves into messages for the client.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aitestbed.cerebras import timing as cs2_timing
from aitestbed.cerebras.cs2 import CS2, Workload
from aitestbed.devices.base import SystemSpec
from aitestbed.devices.clock import VirtualClock

STAGING = (
    ("About to send initial weights", None),
    ("Finished sending initial weights", "weights"),
    ("Finalizing appliance staging for the run", None),
    ("Waiting for device programming to complete", None),
    ("Device programming is complete", "programming"),
    ("Using network type: ROCE", None),
    ("Waiting for input workers to prime the data pipeline and begin streaming ...", None),
)


@dataclass
class ApplianceSession:
    job_type: str
    request: dict
    workload: Workload
    send: Callable[[dict], None]
    systems: list[str] = field(default_factory=list)
    clock: VirtualClock = field(default_factory=VirtualClock)
    samples: int = 0
    run_started_at: float | None = None
    muted: bool = False  # a script's set-up, which its client already printed
    system: SystemSpec = CS2  # the systems' model (CS-2 or CS-3): their step time

    @property
    def num_csx(self) -> int:
        return int(self.request.get("num_csx") or 1)

    def stage(self, start_input: Callable[[], object]) -> object:
        """The execute job's staging, in device time; returns what start_input made."""
        self.muted = False
        log = logging.getLogger("cerebras_pytorch.appliance")
        log.info(f"Preparing to execute using {self.num_csx} CSX")
        for line, phase in STAGING:
            if phase == "weights":
                self.clock.advance(cs2_timing.weight_transfer_seconds(self.workload))
            elif phase == "programming":
                self.clock.advance(cs2_timing.PROGRAMMING_SECONDS)
            log.info(line)
        started = start_input()
        log.info("Input workers have begun streaming input data")
        log.info("Appliance staging is complete")
        log.info("Beginning appliance run")
        self.run_started_at = self.clock.device_seconds
        return started

    def execute_step(self, step: int, samples: int, training: bool = True) -> None:
        """Step `step` (1-based within this run) ran on the systems (an evaluation step
        when not training: timed at its own batch, the validation dataloader's)."""
        workload = (self.workload if training else
                    self.workload.with_(training=False, batch_size=max(1, samples)))
        self.clock.advance(cs2_timing.step_seconds(workload, step, self.num_csx,
                                                   system=self.system))
        self.samples += samples

    def run_seconds(self) -> float:
        if self.run_started_at is None:
            return 0.0
        return self.clock.device_seconds - self.run_started_at

    def write_file(self, path: str, data: bytes) -> None:
        """Have the client write `path`: the worker may not write the user's files."""
        self.send({"type": "file", "path": path, "data": base64.b64encode(data).decode()})


_active: ApplianceSession | None = None


def active() -> ApplianceSession | None:
    return _active


def activate(session: ApplianceSession | None) -> None:
    global _active
    _active = session
