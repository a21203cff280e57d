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


def dataset_transform(config: Any = None) -> _Normalize:
    """The MNIST transform of the starters (ToTensor, Normalize(0.1307, 0.3081)).

    Applied to a torchvision MNIST image it gives a 1x28x28 tensor; applied to the
    dataset's whole uint8 `data` tensor at once, Nx1x28x28. With config
    {"flatten": True} the images come out as vectors of 784.
    """
    flatten = bool((config or {}).get("flatten")) if isinstance(config, dict) else False
    return _Normalize(flatten)


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
