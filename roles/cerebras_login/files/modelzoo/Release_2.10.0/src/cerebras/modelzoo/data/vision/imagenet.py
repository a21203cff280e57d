"""ImageNet-1k, preprocessed, for the vision transformer (ImageNetNpyDataProcessor).

data_dir is a split of /software/datasets/imagenet (train/ or val/): images.npy of
shape (images, height, width, 3) uint8 and labels.npy (images,) class indices below
num_classes. The processor normalizes with the ImageNet mean and deviation and, when
training with augment, flips horizontally at random. The reduced model sees the
images at the stored size (32 x 32), not the config's image_size.
"""

from __future__ import annotations

import os

import numpy as np
import torch

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def _split(data_dir: str, split: str | None) -> str:
    return os.path.join(data_dir, split) if split else data_dir


class ImageNetNpyDataProcessor(torch.utils.data.Dataset):
    REDUCED_BATCH = 8

    def __init__(self, config: dict, params: dict):
        directory = _split(str(config["data_dir"]), config.get("split"))
        try:
            images = np.load(os.path.join(directory, "images.npy"))
            labels = np.load(os.path.join(directory, "labels.npy"))
        except FileNotFoundError:
            raise FileNotFoundError(
                2, f"No ImageNet data (images.npy, labels.npy) in {directory!r}: set data_dir "
                "to the preprocessed dataset, e.g. /software/datasets/imagenet, and split to "
                "train or val", directory) from None
        num_classes = int(params["model"].get("num_classes", 1000))
        if images.ndim != 4 or images.shape[-1] != 3 or len(images) != len(labels):
            raise ValueError(f"{directory!r}: expected images (N, H, W, 3) and N labels")
        if int(labels.max()) >= num_classes:
            raise ValueError(f"{directory!r}: a label is not below num_classes {num_classes}")
        mean = torch.tensor(MEAN).view(3, 1, 1)
        std = torch.tensor(STD).view(3, 1, 1)
        self.images = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 - mean) / std
        self.labels = torch.from_numpy(labels.astype(np.int64))
        self.augment = bool(config.get("augment", False))
        self.served = 0

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        image = self.images[index]
        self.served += 1
        if self.augment and (index * 7919 + self.served) % 2:
            image = image.flip(-1)
        return {"images": image, "labels": self.labels[index]}
