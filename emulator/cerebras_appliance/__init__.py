"""cerebras_appliance 2.1.1: the Wafer-Scale Cluster's client library (ours).

The real wheel set is cerebras_pytorch plus this package, which cerebras_pytorch
depends on. What it holds here:

  errors       the exceptions an appliance job raises on the client
  environment  appliance_environ: variables the appliance's workers also get
  log          the cluster's loggers (wsc_logger) and the TRACE/VERBOSE levels
  run_utils    DebugArgs, the per-job debug settings, and their file
  utils.units  byte-unit conversion
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__"]
