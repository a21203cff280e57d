"""What the models' input functions share: finding their files, and reduced-scale loaders.

The emulated modelzoo trains reduced-scale networks (see each model's docstring):
a step reads a small batch for real, which stands for the params' batch_size. The
loaders say so to cerebras_pytorch (aitestbed_samples_per_batch), so that rates on
the appliance count the nominal samples its device time is modelled for.
"""

from __future__ import annotations

import errno
import os

import torch


def input_section(params: dict) -> dict:
    """The input section of the mode the params run (train_input unless evaluating)."""
    mode = params.get("runconfig", {}).get("mode", "train")
    section = "eval_input" if mode == "eval" else "train_input"
    return params.get(section) or params.get("train_input") or params.get("eval_input") or {}


def data_files(data_dir: str, suffix: str, what: str) -> list[str]:
    """The files ending in `suffix` in data_dir, sorted; FileNotFoundError if there are none.

    Nothing is downloaded: the cluster's input workers have no internet access.
    """
    try:
        names = sorted(name for name in os.listdir(data_dir) if name.endswith(suffix))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    if not names:
        raise FileNotFoundError(
            errno.ENOENT,
            f"No {what} ({suffix} files) in data_dir {data_dir!r}. Datasets are not downloaded "
            "(the input workers have no internet access): set data_dir to the absolute path of "
            "a prepared copy, e.g. under /software/cerebras/dataset, and list its file system "
            "in --mount_dirs", data_dir)
    return [os.path.join(data_dir, name) for name in names]


class DictDataset(torch.utils.data.Dataset):
    """Samples of equally long tensors, one dict of their rows per sample."""

    def __init__(self, tensors: dict[str, torch.Tensor]):
        lengths = {len(tensor) for tensor in tensors.values()}
        if len(lengths) != 1:
            raise ValueError(f"the input tensors differ in length: {sorted(lengths)}")
        self.tensors = tensors
        self.length = lengths.pop()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {key: tensor[index] for key, tensor in self.tensors.items()}


def reduced_loader(dataset, params: dict, section: str, batch_size: int, train: bool,
                   ) -> torch.utils.data.DataLoader:
    """Batches of `batch_size` samples that stand for the section's batch_size."""
    input_params = params[section]
    seed = input_params.get("shuffle_seed", params.get("runconfig", {}).get("seed"))
    generator = torch.Generator()
    generator.manual_seed(int(seed or 0))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=bool(input_params.get("shuffle", train)),
        drop_last=True, generator=generator)
    loader.aitestbed_samples_per_batch = int(input_params.get("batch_size", batch_size))
    return loader
