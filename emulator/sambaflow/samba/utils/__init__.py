"""sambaflow.samba.utils: the helpers the example apps use."""

from __future__ import annotations

import argparse
import os
import random
from typing import Any

import torch

from ..._errors import SambaAssertionError, SambaError
from ..._runtime import runtime
from .._session import session
from .._tensor import to_torch

DEFAULT_THRESHOLD = 1e-2


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's (when present) and torch's generators."""
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)


def get_file_dir(file: str) -> str:
    """The directory of a file (apps pass __file__: their app_dir)."""
    return os.path.dirname(os.path.abspath(file))


def trace_graph(model: torch.nn.Module, inputs: Any, optimizer: Any = None,
                pef: str | None = None, mapping: str | None = None, **kwargs: Any) -> tuple:
    """Load the PEF for this model and these inputs (run, test, measure-performance).

    Checks that the PEF was compiled from this model and for this batch size, takes
    its tiles from snd, and sets `model.output_tensors`, which it returns.
    """
    return session.load(model, inputs, optimizer, pef=pef, mapping=mapping, **kwargs)


def _relative_error(actual: torch.Tensor, expected: torch.Tensor,
                    metric: str) -> tuple[float, float]:
    if not actual.numel():
        return 0.0, 0.0
    difference = actual - expected
    largest = difference.abs().max().item()
    if metric == "l2":
        return largest, difference.norm().item() / max(expected.norm().item(), 1e-6)
    return largest, largest / max(expected.abs().max().item(), 1e-6)


def assert_close(actual: Any, expected: Any, name: str = "tensor",
                 threshold: float | None = None, visualize: bool = False,
                 metric: str = "max", **kwargs: Any) -> float:
    """Compare the RDU's result with the CPU's (the gold): raise when they differ.

    The error is the largest absolute difference relative to the gold's largest
    magnitude (metric="max"), or the norm of the difference relative to the gold's
    (metric="l2"); it must not exceed `threshold` (default 1e-2, bfloat16's scale).
    Prints one line per comparison; returns the error.
    """
    threshold = DEFAULT_THRESHOLD if threshold is None else float(threshold)
    if metric not in ("max", "l2"):
        raise ValueError(f"assert_close: metric is 'max' or 'l2', not {metric!r}")
    if actual is None or expected is None:
        missing = "RDU" if actual is None else "CPU"
        raise SambaAssertionError(f"{name}: no {missing} value to compare")
    a = to_torch(actual).detach().float() if isinstance(actual, torch.Tensor) \
        else torch.as_tensor(actual, dtype=torch.float32)
    e = to_torch(expected).detach().float() if isinstance(expected, torch.Tensor) \
        else torch.as_tensor(expected, dtype=torch.float32)
    if a.shape != e.shape:
        raise SambaAssertionError(f"{name}: the RDU's shape {list(a.shape)} is not the "
                                  f"CPU's {list(e.shape)}")
    difference, error = _relative_error(a, e, metric)
    verdict = "ok" if error <= threshold else "MISMATCH"
    kind = "relative error" if metric == "max" else "relative L2 error"
    print(f"{name}: max abs diff {difference:.4e}, {kind} {error:.4e} "
          f"(threshold {threshold:.1e}) {verdict}")
    if error > threshold:
        raise SambaAssertionError(f"{name}: the RDU and CPU results differ: {kind} "
                                  f"{error:.4e} exceeds the threshold {threshold:.1e}")
    return error


def common_app_driver(args: argparse.Namespace, model: torch.nn.Module, inputs: Any,
                      optim: Any = None, name: str | None = None, app_dir: str | None = None,
                      squeeze_bs_dim: bool = False, pef_metadata: dict | None = None,
                      optimizer: Any = None, **kwargs: Any) -> None:
    """compile, or load and measure the PEF's performance (measure-performance, run)."""
    from .pef_utils import get_pefmeta

    optimizer = optim if optim is not None else optimizer
    command = getattr(args, "command", "compile")
    if command == "compile":
        session.compile(model, inputs, optimizer, name=name, squeeze_bs_dim=squeeze_bs_dim,
                        app_dir=app_dir, config_dict=vars(args),
                        pef_metadata=pef_metadata or get_pefmeta(args, model))
        return
    if command not in ("measure-performance", "run", "test"):
        raise SambaError(f"common_app_driver does not handle {command!r}")
    trace_graph(model, inputs, optimizer, pef=getattr(args, "pef", None),
                mapping=getattr(args, "mapping", None))
    iterations = max(1, int(getattr(args, "num_iterations", None) or 100))
    inputs = inputs if isinstance(inputs, tuple | list) else (inputs,)
    hyperparams = {key: getattr(args, key) for key in ("lr", "momentum", "weight_decay")
                   if getattr(args, key, None) is not None}
    start = runtime.clock.now()
    for _ in range(iterations):
        session.run(input_tensors=inputs, output_tensors=model.output_tensors,
                    hyperparam_dict=hyperparams or None,
                    data_parallel=bool(getattr(args, "data_parallel", False)),
                    reduce_on_rdu=bool(getattr(args, "reduce_on_rdu", False)))
    seconds = runtime.clock.now() - start
    batch = int(getattr(args, "batch_size", 1) or 1)
    print(f"Measured {iterations} iterations of batch size {batch}: latency "
          f"{seconds / iterations * 1000:.4f} ms, throughput "
          f"{iterations * batch / seconds if seconds else float('inf'):.2f} samples/s")


__all__ = ["assert_close", "common_app_driver", "get_file_dir", "set_seed", "trace_graph"]
