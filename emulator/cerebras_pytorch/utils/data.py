"""cstorch.utils.data: DataLoader (an input function, called where the data is read)
and DataExecutor (the steps of a run, their rates and the appliance's staging)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterator

import torch

from ..backend import Backend, current_backend


class DataLoader:
    """Wraps input_fn(*args, **kwargs), which returns an iterable of batches.

    The input function runs on the input workers (inside the appliance job), so it
    is only called when iteration starts.
    """

    def __init__(self, input_fn: Callable, *args, **kwargs):
        if not callable(input_fn):
            raise TypeError(f"DataLoader expects an input function, got "
                            f"{type(input_fn).__name__}")
        self.input_fn, self.args, self.kwargs = input_fn, args, kwargs
        self._loader = None
        self._state: dict | None = None

    @property
    def loader(self):
        if self._loader is None:
            self._loader = self.input_fn(*self.args, **self.kwargs)
        return self._loader

    @property
    def batch_size(self) -> int | None:
        return getattr(self.loader, "batch_size", None)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator:
        return iter(self.loader)

    @property
    def is_restartable(self) -> bool:
        """True if the input function's loader can save and restore its position."""
        return all(hasattr(self.loader, name) for name in ("state_dict", "load_state_dict"))

    def state_dict(self) -> dict:
        if not self.is_restartable:
            raise RuntimeError("This dataloader is not restartable: its loader has no "
                               "state_dict()/load_state_dict().")
        return self.loader.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore a position saved by state_dict() (ignored by loaders that cannot)."""
        self._state = state
        if self.is_restartable:
            self.loader.load_state_dict(state)


def compute_num_steps(dataloader, initial_step: int = 0, num_steps: int | None = None,
                      max_steps: int | None = None, num_epochs: int | None = None,
                      steps_per_epoch: int | None = None, grad_accum_steps: int = 1) -> int:
    """How many batches a run iterates.

    The run's length in optimizer steps is num_steps, else num_epochs epochs of
    steps_per_epoch batches (by default all the dataloader's batches) divided by the
    gradient accumulation; max_steps caps the global step the run may reach, counting
    from initial_step. The result counts batches (optimizer steps x grad_accum_steps).
    """
    def positive(name, value, zero_ok=False):
        if value is None:
            return None
        if isinstance(value, bool) or int(value) != value or value < (0 if zero_ok else 1):
            raise ValueError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} "
                             f"integer, got {value!r}")
        return int(value)

    initial_step = positive("initial_step", initial_step, zero_ok=True)
    num_steps = positive("num_steps", num_steps)
    max_steps = positive("max_steps", max_steps, zero_ok=True)
    num_epochs = positive("num_epochs", num_epochs)
    steps_per_epoch = positive("steps_per_epoch", steps_per_epoch)
    grad_accum_steps = positive("grad_accum_steps", grad_accum_steps) or 1

    total = None
    if num_steps is not None:
        total = num_steps
    elif num_epochs is not None:
        if steps_per_epoch is None:
            try:
                steps_per_epoch = len(dataloader)
            except TypeError as err:
                raise ValueError("num_epochs needs steps_per_epoch for a dataloader without a "
                                 "length.") from err
        total = num_epochs * steps_per_epoch // grad_accum_steps
    elif max_steps is None:
        raise ValueError("One of num_steps, num_epochs or max_steps must be given.")
    if max_steps is not None:
        if initial_step >= max_steps:
            raise RuntimeError(f"Global step {initial_step} already exceeds max step "
                               f"{max_steps}.")
        remaining = max_steps - initial_step
        total = remaining if total is None else min(total, remaining)
    if total < 1:
        raise ValueError(f"The run would have no steps (num_steps={num_steps}, "
                         f"num_epochs={num_epochs}, steps_per_epoch={steps_per_epoch}, "
                         f"grad_accum_steps={grad_accum_steps}).")
    return total * grad_accum_steps


def batch_samples(batch) -> int:
    """The number of samples in a batch: the leading size of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        return batch_samples(next(iter(batch.values())))
    if isinstance(batch, list | tuple) and batch:
        return batch_samples(batch[0])
    return 1


RATE_WINDOW = 20  # steps


class RateTracker:
    """The profiler's figures as properties (rate: since the previous reading)."""

    def __init__(self, profiler: Profiler):
        self._profiler = profiler

    @property
    def rate(self) -> float:
        """Samples per second over the recent steps (the last RATE_WINDOW at most)."""
        return self._profiler.recent_rate()

    @property
    def global_rate(self) -> float:
        return self._profiler.global_rate()

    @property
    def total_samples(self) -> int:
        return self._profiler.total_samples

    @property
    def total_time(self) -> float:
        return self._profiler.total_time


class Profiler:
    """Samples and time of a run on the backend's clock (device time on the appliance)."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.start = self._last_time = backend.now()
        self.total_samples = self._last_samples = 0
        self.rate_tracker = RateTracker(self)
        self._recent = collections.deque([(self.start, 0)], maxlen=RATE_WINDOW + 1)

    def record(self, samples: int) -> None:
        self.total_samples += samples
        self._recent.append((self.backend.now(), self.total_samples))

    def recent_rate(self) -> float:
        (first_time, first_samples), (last_time, last_samples) = self._recent[0], self._recent[-1]
        elapsed = last_time - first_time
        return (last_samples - first_samples) / elapsed if elapsed > 0 else 0.0

    @property
    def total_time(self) -> float:
        return self.backend.now() - self.start

    def rate(self) -> float:
        """Samples per second since the previous call (or the start)."""
        now = self.backend.now()
        elapsed = now - self._last_time
        samples = self.total_samples - self._last_samples
        self._last_time, self._last_samples = now, self.total_samples
        return samples / elapsed if elapsed > 0 else 0.0

    def global_rate(self) -> float:
        elapsed = self.total_time
        return self.total_samples / elapsed if elapsed > 0 else 0.0


class DataExecutor:
    """Iterates num_steps batches (cycling over the data), one per step of the run."""

    _running: DataExecutor | None = None

    def __init__(self, dataloader: DataLoader, num_steps: int | None = None,
                 checkpoint_steps: int | None = None, activation_steps: int | None = None,
                 cs_config=None, writer=None, listeners=None, micro_batch_size=None):
        if num_steps is not None and num_steps < 1:
            raise ValueError(f"num_steps must be at least 1, got {num_steps}")
        if checkpoint_steps is not None and checkpoint_steps < 0:
            raise ValueError(f"checkpoint_steps must not be negative, got {checkpoint_steps}")
        if not isinstance(dataloader, DataLoader):
            raise TypeError("DataExecutor expects a cerebras_pytorch.utils.data.DataLoader, "
                            f"got {type(dataloader).__name__}")
        self.dataloader = dataloader
        self._num_steps = num_steps
        self.checkpoint_steps = checkpoint_steps or None
        self.activation_steps = activation_steps
        self.cs_config = cs_config
        self.writer = writer
        self.listeners = list(listeners or [])
        self.backend = current_backend()
        self.profiler: Profiler | None = None
        self.user_iteration = 0
        self._pending_samples = 0

    @classmethod
    def running(cls) -> DataExecutor | None:
        return cls._running

    @property
    def num_steps(self) -> int:
        """The steps of the run (all the dataloader's batches when none were given)."""
        if self._num_steps is None:
            self._num_steps = len(self.dataloader)
        return self._num_steps

    @property
    def on_final_iteration(self) -> bool:
        return self.user_iteration == self.num_steps

    @property
    def is_checkpoint_step(self) -> bool:
        """Steps that are multiples of checkpoint_steps, and the final step."""
        if self.on_final_iteration:
            return True
        return bool(self.checkpoint_steps) and self.user_iteration % self.checkpoint_steps == 0

    def complete_step(self) -> None:
        """The current step ran: count its samples (and its device time)."""
        if self._pending_samples:
            self.backend.execute_step(self.user_iteration, self._pending_samples)
            self.profiler.record(self._pending_samples)
            self._pending_samples = 0

    def samples_in(self, batch) -> int:
        """The samples a step of `batch` counts.

        On the appliance, an input function that trains a reduced-scale model on small
        batches declares the nominal batch they stand for, as the attribute
        `aitestbed_samples_per_batch` of the iterable it returns: device time is
        modelled for the nominal workload, so its samples are what rates count there.
        """
        nominal = getattr(self.dataloader.loader, "aitestbed_samples_per_batch", None)
        if nominal and self.backend.session is not None:
            return int(nominal)
        return batch_samples(batch)

    def _batches(self) -> Iterator:
        while True:
            empty = True
            for batch in self.dataloader:
                empty = False
                yield batch
            if empty:
                raise ValueError("The dataloader produced no batches.")

    def _start_input(self) -> Iterator:
        """The input pipeline, primed: its first batch is read before the run begins."""
        batches = self._batches()
        return itertools.chain([next(batches)], batches)

    def __iter__(self) -> Iterator:
        if self.backend.is_csx and self.backend.session is None:
            # the client: the run is submitted to the appliance (does not return)
            from ..appliance import script

            script.submit_running_script(self)
        batches = self.backend.start_run(self._start_input)
        self.profiler = Profiler(self.backend)
        outer, DataExecutor._running = DataExecutor._running, self  # validation within fit
        try:
            for step in range(1, self.num_steps + 1):
                self.user_iteration = step
                batch = next(batches)
                self._pending_samples = self.samples_in(batch)
                yield batch
                self.complete_step()
        finally:
            DataExecutor._running = outer
            if self.writer is not None and hasattr(self.writer, "flush"):
                self.writer.flush()
