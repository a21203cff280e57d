"""The seam between cerebras_pytorch on the client and whatever runs appliance jobs.

A JobRunner submits one wsjob ("compile" or "execute") for a request (see
cerebras_pytorch.appliance.program for its keys), relays every message the job's
worker sends except the last to `on_message`, and returns the final
{"type": "done", ...} message or raises the ApplianceError the worker reported.

get_runner() builds the runner named by CEREBRAS_APPLIANCE_RUNNER ("module:Class",
constructed without arguments); the default submits to the cluster's Kubernetes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol

from .errors import ApplianceClientError

RUNNER_ENV = "CEREBRAS_APPLIANCE_RUNNER"
DEFAULT_RUNNER = "cerebras_pytorch.appliance.kubernetes_runner:KubernetesJobRunner"
JOB_TYPES = ("compile", "execute")


class JobRunner(Protocol):
    def run(self, job_type: str, request: dict,
            on_message: Callable[[dict], None]) -> dict: ...


def get_runner() -> JobRunner:
    name = os.environ.get(RUNNER_ENV, "").strip() or DEFAULT_RUNNER
    module_name, _, class_name = name.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ApplianceClientError(
            f"Cannot load the appliance job runner {name!r} ({RUNNER_ENV}): {err}") from err
    return cls()
