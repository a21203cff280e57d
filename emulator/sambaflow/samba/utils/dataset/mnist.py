"""MNIST for the starters: the transform, and the data from the node's local copy.

The real starters download MNIST with torchvision. The emulated cluster is offline:
when the data folder lacks the idx files they are copied from the node's dataset
(/software/sambanova/dataset/mnist, which holds MNIST/raw; AITESTBED_SN_MNIST to
point elsewhere), saying so (nothing is downloaded, unlike the real starters). Then
`torchvision.datasets.MNIST(root, download=False)` reads them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ...._errors import SambaError

SOURCE_ENV = "AITESTBED_SN_MNIST"
DEFAULT_SOURCE = "/software/sambanova/dataset/mnist"
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MEAN, STD = 0.1307, 0.3081


class _Normalize:
    """ToTensor then Normalize((0.1307,), (0.3081,)), for one PIL image or a uint8 batch."""

    def __init__(self, flatten: bool = False) -> None:
        self.flatten = flatten

    def __call__(self, image: Any) -> torch.Tensor:
        if isinstance(image, torch.Tensor):
            tensor = image.float().div_(255.0)
            if tensor.dim() == 3:  # N x 28 x 28 -> N x 1 x 28 x 28
                tensor = tensor.unsqueeze(1)
        else:
            from torchvision.transforms.functional import to_tensor

            tensor = to_tensor(image)
        tensor = tensor.sub_(MEAN).div_(STD)
        if self.flatten:
            tensor = tensor.reshape(tensor.shape[0], -1) if tensor.dim() == 4 \
                else tensor.reshape(-1)
        return tensor


# The config keys that name where an app keeps MNIST (logreg: --data-dir/--data-folder,
# ffn_mnist: --data-path).
DATA_FOLDER_KEYS = ("data_dir", "data_folder", "data_path")


def dataset_transform(config: Any = None) -> _Normalize:
    """The MNIST transform of the starters (ToTensor, Normalize(0.1307, 0.3081)).

    `config` is the app's arguments as a dict (`vars(args)`). An app that declares
    `num_features` (logreg, ffn_mnist: a linear first layer) gets each image as a
    vector of 784; one that does not, a 1x28x28 tensor ({"flatten": True} or False
    says which explicitly). Applied to the dataset's whole uint8 `data` tensor at
    once the batch dimension is kept (Nx784 or Nx1x28x28).

    The apps build the transform as the argument of `torchvision.datasets.MNIST(
    root=args.data_dir, ..., download=True)`; this system is offline, so when the
    config's data folder lacks MNIST and the node has its local copy, the copy is
    placed there first (saying so) and torchvision finds it instead of downloading.
    """
    settings = config if isinstance(config, dict) else vars(config) \
        if hasattr(config, "__dict__") else {}
    flatten = settings.get("flatten")
    if flatten is None:
        flatten = settings.get("num_features") is not None
    for key in DATA_FOLDER_KEYS:
        folder = settings.get(key)
        if isinstance(folder, str | os.PathLike) and str(folder):
            _place_if_available(folder)
            break
    return _Normalize(bool(flatten))


def _place_if_available(root: str | os.PathLike[str]) -> None:
    """ensure_local(root) when the node has MNIST; else leave it to torchvision."""
    raw = Path(root) / "MNIST" / "raw"
    if all((raw / name).is_file() for name in FILES):
        return
    try:
        _source()
    except SambaError:
        return  # no local copy: torchvision downloads, as on a connected system
    ensure_local(root)


def _source() -> Path:
    base = Path(os.environ.get(SOURCE_ENV) or DEFAULT_SOURCE)
    for candidate in (base / "MNIST" / "raw", base / "raw", base):
        if all((candidate / name).is_file() for name in FILES):
            return candidate
    raise SambaError(
        f"MNIST is not available: the data folder has no MNIST/raw, and this offline system "
        f"has no local copy at {base} to take it from (set {SOURCE_ENV} to a folder holding "
        "MNIST/raw)")


def ensure_local(root: str | os.PathLike[str]) -> Path:
    """root/MNIST/raw with the four idx files, copied from the node's dataset if missing."""
    raw = Path(root) / "MNIST" / "raw"
    missing = [name for name in FILES if not (raw / name).is_file()]
    if not missing:
        return raw
    source = _source()
    try:
        raw.mkdir(parents=True, exist_ok=True)
        print(f"MNIST: copying {', '.join(missing)} from {source} to {raw} "
              "(this system is offline: nothing is downloaded)")
        for name in missing:
            shutil.copyfile(source / name, raw / f".{name}.part")
            os.replace(raw / f".{name}.part", raw / name)
    except OSError as err:
        raise SambaError(f"cannot write MNIST into {raw}: {err}") from None
    return raw


def load(root: str | os.PathLike[str], train: bool, flatten: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) of MNIST's training or test split, normalised, as two tensors."""
    import torchvision

    ensure_local(root)
    dataset = torchvision.datasets.MNIST(str(root), train=train, download=False)
    images = dataset_transform({"flatten": flatten})(dataset.data)
    return images, dataset.targets.clone()
