"""poptorch.DataLoader: a torch DataLoader whose batches are PopTorch's combined batches.

combined batch = batch_size x deviceIterations x (replicationFactor / inputGroupSize)
x gradientAccumulation; under poprun each instance reads its own share of the
dataset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.utils.data

from ._runtime import runtime
from .enums import DataLoaderMode
from .options import Options


class DataLoader(torch.utils.data.DataLoader):
    def __init__(self, options: Options, dataset: torch.utils.data.Dataset, batch_size: int = 1,
                 shuffle: bool | None = None, num_workers: int = 0, drop_last: bool = True,
                 persistent_workers: bool | None = None, auto_distributed_partitioning: bool = True,
                 mode: DataLoaderMode = DataLoaderMode.Sync, async_options: dict | None = None,
                 rebatched_worker_size: int | None = None, **kwargs: Any):
        if not isinstance(options, Options):
            raise TypeError("poptorch.DataLoader's first argument must be a poptorch.Options")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        self.options = options
        self._combined_batch_size = (batch_size * options.device_iterations *
                                     (options.replication_factor // options.input_group_size) *
                                     options.gradient_accumulation)
        distributed = options.Distributed
        sampler = kwargs.pop("sampler", None)
        if sampler is None and auto_distributed_partitioning and distributed.numProcesses > 1:
            sampler = torch.utils.data.distributed.DistributedSampler(
                dataset, num_replicas=distributed.numProcesses, rank=distributed.processId,
                shuffle=bool(shuffle), drop_last=drop_last)
            shuffle = None
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        super().__init__(dataset, batch_size=self._combined_batch_size, shuffle=shuffle,
                         sampler=sampler, num_workers=num_workers, drop_last=drop_last,
                         persistent_workers=persistent_workers, **kwargs)
        self._mode = DataLoaderMode(mode)
        self._passes = 0

    @property
    def combinedBatchSize(self) -> int:  # noqa: N802 - PopTorch's name
        return self._combined_batch_size

    def terminate(self) -> None:
        """Stop the workers of an asynchronous loader (nothing to stop here)."""

    def __iter__(self) -> Iterator[Any]:
        first = self._passes == 0
        self._passes += 1
        batches = super().__iter__()
        runtime.first_pass = first
        try:
            yield from batches
        finally:
            runtime.first_pass = False


class AsynchronousDataAccessor:
    """Wraps a DataLoader; batches come from it as they would from its worker process."""

    def __init__(self, dataset: DataLoader, buffer_size: int = 3,
                 miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True, early_preload: bool = False,
                 sharing_strategy: Any = None, rebatched_size: int | None = None):
        self._loader = dataset

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._loader)

    def terminate(self) -> None:
        pass
