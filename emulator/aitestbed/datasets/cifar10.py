"""A seeded stand-in for CIFAR-10 in the real files' format, because no reachable
registry ships the real images.

The cluster is offline and no package on PyPI, npm or Debian carries CIFAR-10's
images, so this is NOT CIFAR-10: it has the real dataset's shape (50,000 training
images in five batches of 10,000 and 10,000 test images, 32x32 RGB, 10 classes with
CIFAR-10's names, 5,000 and 1,000 per class) and its files (`cifar-10-batches-py`:
`data_batch_1`..`5`, `test_batch`, `batches.meta`, Python pickles of uint8 rows in
R, G, B planes), so `torchvision.datasets.CIFAR10(root, download=True)` and the
tutorials' transforms work unchanged. Each class is a seeded random smooth colour
field; each image is its class's field, shifted, flipped, brightened or darkened,
blended with up to 35 % of another class and noised. A small CNN learns it in an
epoch or two, so training curves look like training; accuracy figures are not
comparable with real CIFAR-10's.

torchvision checks CIFAR-10's files against their published MD5 sums. `register`
writes this stand-in's sums into the nodes' torchvision (cifar.py's train_list,
test_list and meta), so it accepts these files; the real files would then be refused.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import re
from pathlib import Path

from aitestbed.datasets import command

BASE_FOLDER = "cifar-10-batches-py"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")
TRAIN_BATCHES, PER_BATCH, TEST_SIZE = 5, 10_000, 10_000
SIDE = 32
SEED = 20090408  # CIFAR-10's technical report, April 2009


class DatasetError(RuntimeError):
    pass


def _images(labels, generator):
    import torch  # at build time, inside the node image (Debian's python3-torch)
    import torch.nn.functional as F  # noqa: N812 - torch's own convention

    prototype_gen = torch.Generator().manual_seed(SEED)
    coarse = torch.rand(len(CLASSES), 3, 4, 4, generator=prototype_gen)
    fields = F.interpolate(coarse, size=(SIDE + 8, SIDE + 8), mode="bicubic",
                           align_corners=False).clamp(0, 1)
    n = len(labels)
    dx = torch.randint(0, 9, (n,), generator=generator)
    dy = torch.randint(0, 9, (n,), generator=generator)
    rows = torch.arange(SIDE)
    out = torch.empty(n, 3, SIDE, SIDE)
    for i in range(n):  # one crop per image; 60,000 small copies take a few seconds
        y, x = int(dy[i]), int(dx[i])
        out[i] = fields[labels[i], :, y + rows][:, :, x + rows]
    flip = torch.rand(n, generator=generator) < 0.5
    out[flip] = out[flip].flip(-1)
    others = (labels + torch.randint(1, len(CLASSES), (n,), generator=generator)) % len(CLASSES)
    mix = (torch.rand(n, 1, 1, 1, generator=generator) * 0.35)
    out = (1 - mix) * out + mix * fields[others, :, 4:4 + SIDE, 4:4 + SIDE]
    out = out * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=generator))
    out = out + 0.08 * torch.randn(out.shape, generator=generator)
    return (out.clamp(0, 1) * 255).round().to(torch.uint8).reshape(n, 3 * SIDE * SIDE)


def _labels(count, generator):
    import torch

    labels = torch.arange(count) % len(CLASSES)
    return labels[torch.randperm(count, generator=generator)]


def _write(path: Path, entry: dict) -> str:
    data = pickle.dumps(entry, protocol=4)
    path.write_bytes(data)
    return hashlib.md5(data).hexdigest()  # noqa: S324 - torchvision's own check


def build(root: Path, per_batch: int = PER_BATCH, test_size: int = TEST_SIZE) -> dict[str, str]:
    """Write root/cifar-10-batches-py; return each file's MD5 (smaller sizes for tests)."""
    import torch

    folder = root / BASE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    sums = {}
    generator = torch.Generator().manual_seed(SEED + 1)
    train_labels = _labels(TRAIN_BATCHES * per_batch, generator)
    parts = [(f"data_batch_{i + 1}", f"training batch {i + 1} of 5",
              train_labels[i * per_batch:(i + 1) * per_batch]) for i in range(TRAIN_BATCHES)]
    parts.append(("test_batch", "testing batch 1 of 1", _labels(test_size, generator)))
    for name, batch_label, labels in parts:
        images = _images(labels, generator)
        sums[name] = _write(folder / name, {
            "batch_label": batch_label, "labels": labels.tolist(), "data": images.numpy(),
            "filenames": [f"aitestbed_standin_{name}_{i:05d}.png" for i in range(len(labels))]})
    sums["batches.meta"] = _write(folder / "batches.meta", {
        "num_cases_per_batch": per_batch, "label_names": list(CLASSES),
        "num_vis": 3 * SIDE * SIDE})
    (folder / "SOURCE").write_text(f"{__doc__.strip()}\n\nMD5 sums: {sums}\n")
    return sums


def register(root: Path, cifar_py: Path) -> bool:
    """Write the stand-in's MD5 sums into torchvision's cifar.py (CIFAR10's lists only);
    True if the file changed."""
    folder = root / BASE_FOLDER
    text = cifar_py.read_text()
    start = text.index("class CIFAR10(")
    end = text.index("class CIFAR100(")
    section = text[start:end]
    for name in [*(f"data_batch_{i + 1}" for i in range(TRAIN_BATCHES)), "test_batch",
                 "batches.meta"]:
        md5 = hashlib.md5((folder / name).read_bytes()).hexdigest()  # noqa: S324
        if name == "batches.meta":
            pattern = (r'("filename": "batches\.meta",\s*"key": "label_names",\s*"md5": ")'
                       r'[0-9a-f]{32}(")')
        else:
            pattern = r'(\["' + re.escape(name) + r'", ")[0-9a-f]{32}("\])'
        section, count = re.subn(pattern, lambda m, md5=md5: m.group(1) + md5 + m.group(2),
                                 section)
        if count != 1:
            raise DatasetError(f"{cifar_py}: cannot find the MD5 of {name} in CIFAR10")
    new = text[:start] + section + text[end:]
    if new == text:
        return False
    cifar_py.write_text(new)
    return True


def _register(args: argparse.Namespace) -> list[str]:
    cifar_py = args.cifar_py
    if cifar_py is None:
        import torchvision.datasets.cifar as module
        cifar_py = Path(module.__file__)
    return ["changed" if register(args.root, cifar_py) else "unchanged"]


def main(argv: list[str] | None = None) -> None:
    command.main_with_commands(
        argv, "cifar10", "Build the CIFAR-10 stand-in, or register its MD5 sums with torchvision",
        {"build": command.Command("write ROOT/cifar-10-batches-py", [("root", command.PATH)],
                                  lambda args: [build(args.root)]),
         "register": command.Command(
             "write the stand-in's MD5 sums into torchvision's cifar.py",
             [("root", command.PATH), ("cifar_py", {**command.PATH, "nargs": "?"})],
             _register)},
        errors=(DatasetError, OSError, ValueError))


if __name__ == "__main__":
    main()
