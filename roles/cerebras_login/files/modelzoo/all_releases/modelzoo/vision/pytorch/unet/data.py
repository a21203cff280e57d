"""Severstal steel defect images, one class as a binary mask (SeverstalBinaryClassDataProcessor).

data_dir holds Kaggle's layout: train.csv (ImageId, ClassId, EncodedPixels: run-length
encoded masks, column-major, pixels numbered from 1) and train_images/ (at ALCF:
/software/cerebras/dataset/severstal-steel-defect-detection). The first
train_test_split of the images (in train.csv's order of first appearance, then the
images without defects, by name) train, the rest evaluate. Images are read as grey,
resized to image_shape divided by the model's REDUCTION (so 32x32 for 256x256),
normalized ("zero_centered": to [-1, 1]; "standard_score": per image) and, when
augment_data, flipped left-right at random; TRAIN_BATCH images a step.
"""

from __future__ import annotations

import csv
import errno
import os

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from PIL import Image

from modelzoo.common.pytorch.input_utils import reduced_loader
from modelzoo.vision.pytorch.unet.model import REDUCTION

TRAIN_BATCH = 4


def _rle_decode(encoded: str, height: int, width: int) -> np.ndarray:
    flat = np.zeros(height * width, dtype=bool)
    values = [int(v) for v in encoded.split()]
    for start, length in zip(values[::2], values[1::2], strict=True):
        flat[start - 1:start - 1 + length] = True
    return flat.reshape(width, height).T


def _listing(data_dir: str) -> tuple[list[str], dict[str, str]]:
    """Every image name, and the encoded mask of the wanted class of those that have it."""
    table = os.path.join(data_dir, "train.csv")
    try:
        with open(table, newline="") as stream:
            rows = list(csv.DictReader(stream))
        names = sorted(os.listdir(os.path.join(data_dir, "train_images")))
    except (FileNotFoundError, NotADirectoryError) as err:
        raise FileNotFoundError(
            errno.ENOENT,
            f"No Severstal data (train.csv and train_images/) in data_dir {data_dir!r}. "
            "Datasets are not downloaded (the input workers have no internet access): set "
            "data_dir to the absolute path of a prepared copy, e.g. "
            "/software/cerebras/dataset/severstal-steel-defect-detection, and list its file "
            "system in --mount_dirs", data_dir) from err
    return names, rows


class SeverstalBinaryDataset(torch.utils.data.Dataset):
    def __init__(self, input_params: dict, train: bool, seed: int):
        data_dir = str(input_params["data_dir"])
        names, rows = _listing(data_dir)
        class_id = str(input_params.get("class_id", 3))
        encoded = {row["ImageId"]: row["EncodedPixels"] for row in rows
                   if str(row["ClassId"]) == class_id}
        ordered = list(dict.fromkeys(row["ImageId"] for row in rows))
        listed = set(ordered)
        ordered += [name for name in names if name not in listed]
        split = int(len(ordered) * float(input_params.get("train_test_split", 0.85)))
        chosen = ordered[:split] if train else ordered[split:]
        height, width, _ = (int(v) for v in input_params.get("image_shape", [256, 256, 1]))
        size = (height // REDUCTION, width // REDUCTION)
        method = str(input_params.get("normalize_data_method", "zero_centered"))
        images, masks = [], []
        for name in chosen:
            with Image.open(os.path.join(data_dir, "train_images", name)) as image:
                pixels = np.asarray(image.convert("L"), dtype=np.float32)
            mask = (_rle_decode(encoded[name], *pixels.shape) if name in encoded
                    else np.zeros(pixels.shape, dtype=bool))
            images.append(F.interpolate(torch.from_numpy(pixels)[None, None], size=size,
                                        mode="bilinear", align_corners=False)[0])
            masks.append(F.interpolate(torch.from_numpy(mask.astype(np.float32))[None, None],
                                       size=size, mode="nearest")[0, 0])
        self.images = self._normalize(torch.stack(images), method)
        self.masks = torch.stack(masks)
        self.augment = train and bool(input_params.get("augment_data", False))
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)

    @staticmethod
    def _normalize(images: torch.Tensor, method: str) -> torch.Tensor:
        if method == "zero_centered":
            return images / 127.5 - 1.0
        if method == "standard_score":
            mean = images.mean(dim=(1, 2, 3), keepdim=True)
            return (images - mean) / images.std(dim=(1, 2, 3), keepdim=True).clamp(min=1e-6)
        raise ValueError(f"Unsupported normalize_data_method {method!r}: zero_centered or "
                         "standard_score")

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image, mask = self.images[index], self.masks[index]
        if self.augment and bool(torch.rand(1, generator=self.generator) < 0.5):
            image, mask = image.flip(-1), mask.flip(-1)
        return image, mask


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    seed = int(params.get("runconfig", {}).get("seed") or 0)
    dataset = SeverstalBinaryDataset(params[section], train, seed)
    return reduced_loader(dataset, params, section, TRAIN_BATCH, train)


def get_train_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def get_eval_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
