"""The appliance: how cstorch programs run on the Wafer-Scale Cluster.

  program  run_program(): the client side of a CSX run (compile, then execute jobs)
  runner   the JobRunner protocol and get_runner() (CEREBRAS_APPLIANCE_RUNNER)
  channel  newline-delimited JSON from a job's worker to the client
  worker   the appliance side of a job (python -m cerebras_pytorch.appliance.worker)
  local    LocalJobRunner: jobs as local subprocesses
  session  the appliance job this process runs, if any
  errors   the exceptions a failed job raises on the client
"""

from __future__ import annotations

from . import errors
from .errors import *  # noqa: F403 - the Appliance* errors, named once in errors.__all__
from .program import run_program
from .runner import JobRunner, get_runner

__all__ = [*(name for name in errors.__all__ if name.startswith("Appliance")),
           "JobRunner", "get_runner", "run_program"]
