"""trace, step_closure and checkpoint_closure.

On the wafer, a traced step is compiled once and its tensors only exist on the
device; closures run on the host with their values when the step is done. Here the
step runs eagerly on the CPU, so closures simply run when called; what trace adds
is telling the running DataExecutor that a step was executed (its samples and
device time count from then, so rates logged in a step closure include that step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def trace(step_fn: F) -> F:
    @functools.wraps(step_fn)
    def traced(*args, **kwargs):
        from .utils.data import DataExecutor  # the executor module imports this one

        result = step_fn(*args, **kwargs)
        executor = DataExecutor.running()
        if executor is not None:
            executor.complete_step()
        return result

    return traced  # type: ignore[return-value]


def step_closure(closure: F) -> F:
    """Runs with the step's values when called after the step (eager here)."""
    return closure


def checkpoint_closure(closure: F) -> F:
    """Runs with the weights of the step just done, on checkpoint steps only.

    While a DataExecutor runs, a call on a step that is not one of its checkpoint
    steps (a multiple of checkpoint_steps, or the final step) does nothing; outside
    a run the closure runs whenever it is called.
    """
    @functools.wraps(closure)
    def on_checkpoint_steps(*args, **kwargs):
        from .utils.data import DataExecutor

        executor = DataExecutor.running()
        if executor is not None and not executor.is_checkpoint_step:
            return None
        return closure(*args, **kwargs)

    return on_checkpoint_steps  # type: ignore[return-value]
