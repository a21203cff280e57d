"""cstorch.utils.data: DataLoader (an input function, called where the data is read)
and DataExecutor (the steps of a run, their rates and the appliance's staging)."""

from __future__ import annotations

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
        self.input_fn, self.args, self.kwargs = input_fn, args, kwargs
        self._loader = None

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


def batch_samples(batch) -> int:
    """The number of samples in a batch: the leading size of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        return batch_samples(next(iter(batch.values())))
    if isinstance(batch, list | tuple) and batch:
        return batch_samples(batch[0])
    return 1


class Profiler:
    """Samples and time of a run on the backend's clock (device time on the appliance)."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.start = self._last_time = backend.now()
        self.total_samples = self._last_samples = 0

    def record(self, samples: int) -> None:
        self.total_samples += samples

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
                 checkpoint_steps: int | None = None, cs_config=None):
        if num_steps is not None and num_steps < 1:
            raise ValueError(f"num_steps must be at least 1, got {num_steps}")
        self.dataloader = dataloader
        self.num_steps = num_steps if num_steps is not None else len(dataloader)
        self.checkpoint_steps = checkpoint_steps
        self.cs_config = cs_config
        self.backend = current_backend()
        self.profiler: Profiler | None = None
        self.user_iteration = 0
        self._pending_samples = 0

    @classmethod
    def running(cls) -> DataExecutor | None:
        return cls._running

    @property
    def on_final_iteration(self) -> bool:
        return self.user_iteration == self.num_steps

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
        batches = self.backend.start_run(self._start_input)
        self.profiler = Profiler(self.backend)
        DataExecutor._running = self
        try:
            for step in range(1, self.num_steps + 1):
                self.user_iteration = step
                batch = next(batches)
                self._pending_samples = self.samples_in(batch)
                yield batch
                self.complete_step()
        finally:
            DataExecutor._running = None
