"""MNIST from data_dir, in torchvision's layout (data_dir/MNIST/raw/*-ubyte).

Nothing is downloaded: the cluster's input workers have no internet access, so
data_dir must hold a prepared copy (at ALCF /software/cerebras/dataset/fc_mnist/
data/mnist/train, which holds the test split too) and be under --mount_dirs.
"""

from __future__ import annotations

import errno
import os

import torch
from torchvision import datasets

MEAN, STD = 0.1307, 0.3081


def _mnist(input_params: dict, train: bool) -> torch.utils.data.TensorDataset:
    data_dir = str(input_params.get("data_dir", "./mnist"))
    raw = os.path.join(data_dir, "MNIST", "raw")
    try:
        os.listdir(raw)
    except (FileNotFoundError, NotADirectoryError) as err:
        raise FileNotFoundError(
            errno.ENOENT,
            f"No MNIST data in data_dir {data_dir!r}. The dataset is not downloaded (the "
            "input workers have no internet access): set data_dir to the absolute path of a "
            "prepared copy, e.g. /software/cerebras/dataset/fc_mnist/data/mnist/train, and "
            "list its file system in --mount_dirs", raw) from err
    mnist = datasets.MNIST(data_dir, train=train, download=False)
    images = ((mnist.data.float() / 255.0 - MEAN) / STD).flatten(1)
    if input_params.get("to_float16"):
        images = images.half()
    return torch.utils.data.TensorDataset(images, mnist.targets.long())


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    input_params = params[section]
    seed = params.get("runconfig", {}).get("seed")
    generator = torch.Generator()
    if seed is not None:
        generator.manual_seed(int(seed))
    return torch.utils.data.DataLoader(
        _mnist(input_params, train), batch_size=int(input_params.get("batch_size", 128)),
        shuffle=bool(input_params.get("shuffle", train)),
        drop_last=bool(input_params.get("drop_last_batch", True)), generator=generator)


def get_train_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def get_eval_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
