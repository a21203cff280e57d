"""The input functions cszoo hands to the appliance: the dataloader's data processor,
by the name the config gives (trainer.config.DATA_PROCESSORS).

A processor is a torch Dataset built from its dataloader section and the params:
Processor(config, params). The reduced-scale models read REDUCED_BATCH of its items a
step (the processor's attribute, 4 unless it says), each step standing for the
section's batch_size samples (the appliance times the nominal batch). Nothing is
downloaded: the input workers have no internet.
"""

from __future__ import annotations

import errno
import importlib
import os

import torch

REDUCED_BATCH = 4


def data_files(data_dir: str, suffix: str, what: str) -> list[str]:
    """The data_dir's files ending in suffix, sorted; a clear error when there are none."""
    try:
        names = sorted(n for n in os.listdir(data_dir) if n.endswith(suffix))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    if not names:
        raise FileNotFoundError(
            errno.ENOENT, f"No {what} ({suffix} files) in data_dir {data_dir!r}: set it to the "
            "absolute path of a prepared dataset, e.g. under /software/cerebras/dataset",
            data_dir)
    return [os.path.join(data_dir, n) for n in names]


def processor_class(name: str):
    from cerebras.modelzoo.trainer.config import DATA_PROCESSORS

    module, _, attr = DATA_PROCESSORS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    config = params[section]
    cls = processor_class(str(config["data_processor"]))
    dataset = cls(config, params)
    generator = torch.Generator()
    generator.manual_seed(int(config.get("shuffle_seed") or 0))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=getattr(cls, "REDUCED_BATCH", REDUCED_BATCH),
        shuffle=bool(config.get("shuffle", train)), drop_last=True, generator=generator)
    loader.aitestbed_samples_per_batch = int(config.get("batch_size") or REDUCED_BATCH)
    return loader


def train_input_fn(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def eval_input_fn(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
