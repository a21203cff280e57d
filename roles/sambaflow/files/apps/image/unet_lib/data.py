# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""kaggle_3m (LGG brain MRI segmentation): reading, caching, splitting, sharding.

The dataset is a directory of patient folders `TCGA_*` holding `<name>_<n>.tif`
(RGB) and `<name>_<n>_mask.tif` (grey) pairs; `--data-dir` may name it or its
parent. Every slice is read once, scaled to the side trained, and kept in memory
(`--data-in-memory`); with `--data-cache DIR` the decoded arrays are saved there
and the next run (and the other data-parallel instances) load them at once.

The split is by slice, fixed for the dataset: 85 % for training (3,339 of the
3,929 slices: 13 steps of 256 per epoch for one instance, one step of 8 x 256
for eight), the rest for validation. Data-parallel instances each train on
their own share of the training slices and validate on their share of the
validation slices.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's convention

TRAIN_FRACTION = 0.85
SPLIT_SEED = 42
CACHE_VERSION = 1


class DataError(RuntimeError):
    """The dataset is missing or unreadable: reported to the user, no traceback."""


@dataclass
class Kaggle3m:
    images: torch.Tensor  # (N, 3, side, side) float32, standardised per channel
    masks: torch.Tensor  # (N, 1, side, side) float32 in {0, 1}
    train: torch.Tensor  # slice indices
    val: torch.Tensor


def dataset_root(data_dir: str | os.PathLike[str]) -> Path:
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DataError(f"the data directory {data_dir} does not exist")
    if not any(p.name.startswith("TCGA_") for p in root.iterdir() if p.is_dir()):
        nested = root / "kaggle_3m"
        if nested.is_dir():
            return nested
        raise DataError(f"{data_dir} holds no TCGA_* patient folders: is it kaggle_3m?")
    return root


def pairs(root: Path) -> list[tuple[Path, Path]]:
    """(image, mask) of every slice, in patient then slice order."""
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("TCGA_")):
        images = [p for p in folder.glob("*.tif") if not p.name.endswith("_mask.tif")]
        images.sort(key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        for image in images:
            mask = image.with_name(f"{image.stem}_mask.tif")
            if not mask.is_file():
                raise DataError(f"{image} has no mask {mask.name}")
            found.append((image, mask))
    if not found:
        raise DataError(f"no .tif slices under {root}")
    return found


def _read_plain_tiff(path: Path) -> np.ndarray:
    """An uncompressed one-strip TIFF, for hosts without PIL."""
    raw = path.read_bytes()
    if raw[:4] != b"II*\x00":
        raise DataError(f"{path}: cannot read this TIFF without PIL")
    (ifd,) = struct.unpack_from("<I", raw, 4)
    (count,) = struct.unpack_from("<H", raw, ifd)
    tags = {}
    for i in range(count):
        tag, kind, _, field = struct.unpack_from("<HHI4s", raw, ifd + 2 + 12 * i)
        short = struct.unpack("<H", field[:2])[0]
        tags[tag] = short if kind == 3 else struct.unpack("<I", field)[0]
    if tags.get(259, 1) != 1:
        raise DataError(f"{path}: compressed TIFF needs PIL")
    width, height, samples = tags[256], tags[257], tags.get(277, 1)
    pixels = np.frombuffer(raw, dtype=np.uint8, count=tags[279], offset=tags[273])
    return pixels.reshape((height, width, samples) if samples > 1 else (height, width))


def read_image(path: Path) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        return _read_plain_tiff(path)
    try:
        with Image.open(path) as image:
            return np.asarray(image)
    except OSError as err:
        raise DataError(f"cannot read {path}: {err}") from None


def _scaled(stack: np.ndarray, side: int, mask: bool) -> torch.Tensor:
    tensor = torch.from_numpy(stack).float()
    if tensor.dim() == 3:
        tensor = tensor.unsqueeze(1)
    else:
        tensor = tensor.permute(0, 3, 1, 2)
    if tensor.shape[-1] != side or tensor.shape[-2] != side:
        tensor = F.interpolate(tensor, size=(side, side), mode="area")
    tensor = tensor / 255.0
    return (tensor > 0.5).float() if mask else tensor


def _cache_file(cache_dir: Path, side: int) -> Path:
    return cache_dir / f"kaggle_3m_{side}x{side}.v{CACHE_VERSION}.npz"


def load(data_dir: str | os.PathLike[str], side: int, in_channels: int = 3,
         cache_dir: str | os.PathLike[str] | None = None) -> Kaggle3m:
    root = dataset_root(data_dir)
    slices = pairs(root)
    names = np.array([str(image.relative_to(root)) for image, _ in slices])
    cached = _cache_file(Path(cache_dir).expanduser(), side) if cache_dir else None
    images = masks = None
    if cached is not None and cached.is_file():
        try:
            with np.load(cached) as saved:
                if np.array_equal(saved["names"], names):
                    images, masks = saved["images"], saved["masks"]
        except (OSError, ValueError, KeyError):
            images = masks = None
    if images is None:
        image_list, mask_list = [], []
        for image, mask in slices:
            pixels = read_image(image)
            if pixels.ndim == 2:
                pixels = np.repeat(pixels[..., None], 3, axis=2)
            image_list.append(pixels[..., :3])
            mask_list.append(read_image(mask))
        shapes = {a.shape[:2] for a in image_list} | {a.shape[:2] for a in mask_list}
        if len(shapes) != 1:
            raise DataError(f"the slices under {root} differ in size: {sorted(shapes)}")
        scaled_images = _scaled(np.stack(image_list), side, mask=False)
        scaled_masks = _scaled(np.stack(mask_list), side, mask=True)
        images = (scaled_images * 255).round().to(torch.uint8).numpy()
        masks = scaled_masks.to(torch.uint8).numpy()
        if cached is not None:
            _save_cache(cached, names, images, masks)
    image_tensor = torch.from_numpy(np.ascontiguousarray(images)).float() / 255.0
    if in_channels != image_tensor.shape[1]:
        if in_channels > image_tensor.shape[1]:
            raise DataError(f"--in-channels {in_channels}: the images have "
                            f"{image_tensor.shape[1]} channels")
        image_tensor = image_tensor[:, :in_channels]
    mask_tensor = torch.from_numpy(np.ascontiguousarray(masks)).float()
    train, val = split(len(slices))
    mean = image_tensor[train].mean(dim=(0, 2, 3), keepdim=True)
    std = image_tensor[train].std(dim=(0, 2, 3), keepdim=True).clamp(min=1e-3)
    return Kaggle3m(images=(image_tensor - mean) / std, masks=mask_tensor, train=train, val=val)


def _save_cache(path: Path, names: np.ndarray, images: np.ndarray, masks: np.ndarray) -> None:
    """Write atomically: data-parallel instances may all try at once."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, names=names, images=images, masks=masks)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache we cannot write is only slower next time


def split(count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed train/validation split: 85 % of the slices, drawn with a fixed seed."""
    order = torch.randperm(count, generator=torch.Generator().manual_seed(SPLIT_SEED))
    cut = int(TRAIN_FRACTION * count)
    return order[:cut], order[cut:]


def steps_per_epoch(train_size: int, batch_size: int, world_size: int = 1) -> int:
    """Global steps per epoch: every instance runs the same number of full batches."""
    return (train_size // max(1, world_size)) // batch_size


def epoch_batches(indices: torch.Tensor, batch_size: int, epoch: int, rank: int = 0,
                  world_size: int = 1, seed: int = 0) -> list[torch.Tensor]:
    """This instance's batches of one epoch: a shuffle shared by all instances, then
    every world_size-th slice from the instance's rank; full batches only."""
    generator = torch.Generator().manual_seed(seed * 1000 + epoch)
    shuffled = indices[torch.randperm(len(indices), generator=generator)]
    mine = shuffled[rank::world_size]
    steps = steps_per_epoch(len(indices), batch_size, world_size)
    return [mine[i * batch_size:(i + 1) * batch_size] for i in range(steps)]
