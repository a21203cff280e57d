"""A synthetic stand-in for kaggle_3m, the LGG brain MRI segmentation dataset.

SYNTHETIC DATA. The real dataset (Buda et al., "LGG Segmentation Dataset",
Kaggle `mateuszbuda/lgg-mri-segmentation`: brain MRI slices of 110 TCGA
lower-grade glioma patients, 3,929 three-channel 256x256 `.tif` images with
hand-drawn FLAIR abnormality masks) cannot be downloaded on the offline
testbed. This module writes, deterministically from a fixed seed, a dataset of
the same shape:

* the same counts: 110 patients, 3,929 slices (20 to 88 per patient), about a
  third of them with a tumour (the real set: 1,373);
* the same layout: `kaggle_3m/TCGA_<site>_<case>_<YYYYMMDD>/` folders holding
  `<folder>_<n>.tif` (RGB: pre-contrast, FLAIR, post-contrast) and
  `<folder>_<n>_mask.tif` (grey, 0 or 255) for slices n = 1..N, plus `data.csv`
  and `README.md` at the top;
* images are only 32x32 pixels (the emulator's UNet trains at reduced scale;
  the nominal 256x256 is what its timing model and PEFs use).

Each patient is a brain-like ellipse with smooth texture, a bright skull rim
and small bright vessels (post-contrast only) that are not tumour, and a
tumour: an irregular blob, bright mostly in the FLAIR channel, present over a
contiguous run of slices and growing then shrinking through them. The masks
are exactly the tumour pixels, so a segmentation network learns real,
measurable Dice on it. The files are baseline uncompressed TIFF written
without any imaging library (PIL, tifffile and skimage read them).

    python -m aitestbed.datasets.kaggle_3m --out /software/sambanova/dataset/kaggle_3m
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

from aitestbed.datasets import build_once, command

PATIENTS = 110
SLICES = 3929
MIN_SLICES, MAX_SLICES = 20, 88
SIDE = 32
SEED = 20230418
SITES = ("CS", "DU", "EZ", "FG", "HT")
VERSION = "aitestbed-kaggle_3m-synthetic-1"


# --------------------------------------------------------------------------- TIFF


def tiff_bytes(pixels: np.ndarray) -> bytes:
    """A baseline little-endian TIFF, one uncompressed strip: (H, W, 3) RGB or (H, W) grey."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim == 3 and pixels.shape[2] == 3:
        samples, photometric = 3, 2
    elif pixels.ndim == 2:
        samples, photometric = 1, 1
    else:
        raise ValueError(f"cannot write an image of shape {pixels.shape}")
    height, width = pixels.shape[:2]
    data = pixels.tobytes()
    data_offset = 8
    ifd_offset = data_offset + len(data) + (len(data) & 1)
    entries: list[tuple[int, int, int, bytes]] = []  # tag, type, count, value field
    short, long_ = 3, 4

    def value(kind: int, number: int) -> bytes:
        return struct.pack("<HH", number, 0) if kind == short else struct.pack("<I", number)

    tags = 10 if samples == 3 else 9
    extra_offset = ifd_offset + 2 + 12 * tags + 4  # BitsPerSample's 3 values, after the IFD
    bits = struct.pack("<I", extra_offset) if samples == 3 else value(short, 8)
    entries.append((256, long_, 1, value(long_, width)))
    entries.append((257, long_, 1, value(long_, height)))
    entries.append((258, short, samples, bits))
    entries.append((259, short, 1, value(short, 1)))  # no compression
    entries.append((262, short, 1, value(short, photometric)))
    entries.append((273, long_, 1, value(long_, data_offset)))
    entries.append((277, short, 1, value(short, samples)))
    entries.append((278, long_, 1, value(long_, height)))
    entries.append((279, long_, 1, value(long_, len(data))))
    if samples == 3:
        entries.append((284, short, 1, value(short, 1)))  # chunky: RGBRGB...
    assert len(entries) == tags
    out = bytearray(b"II*\x00" + struct.pack("<I", ifd_offset))
    out += data + (b"\x00" if len(data) & 1 else b"")
    out += struct.pack("<H", len(entries))
    for tag, kind, count, field in sorted(entries):
        out += struct.pack("<HHI", tag, kind, count) + field
    out += struct.pack("<I", 0)
    if samples == 3:
        out += struct.pack("<HHH", 8, 8, 8)
    return bytes(out)


def read_tiff(path: str | Path) -> np.ndarray:
    """Read back a TIFF this module wrote (uncompressed, one strip), without PIL."""
    raw = Path(path).read_bytes()
    if raw[:4] != b"II*\x00":
        raise ValueError(f"{path}: not a little-endian TIFF")
    (ifd,) = struct.unpack_from("<I", raw, 4)
    (count,) = struct.unpack_from("<H", raw, ifd)
    tags: dict[int, int] = {}
    for i in range(count):
        tag, kind, _, field = struct.unpack_from("<HHI4s", raw, ifd + 2 + 12 * i)
        number = struct.unpack("<H", field[:2])[0] if kind == 3 else struct.unpack("<I", field)[0]
        tags[tag] = number
    if tags.get(259, 1) != 1:
        raise ValueError(f"{path}: compressed TIFF")
    width, height, samples = tags[256], tags[257], tags.get(277, 1)
    start, size = tags[273], tags[279]
    pixels = np.frombuffer(raw, dtype=np.uint8, count=size, offset=start)
    return pixels.reshape((height, width, samples) if samples > 1 else (height, width)).copy()


# --------------------------------------------------------------------------- patients


def slice_counts(rng: np.random.Generator) -> list[int]:
    """110 slice counts between 20 and 88 that add up to 3,929."""
    counts = rng.integers(MIN_SLICES, MAX_SLICES + 1, PATIENTS)
    while counts.sum() != SLICES:
        i = int(rng.integers(PATIENTS))
        step = 1 if counts.sum() < SLICES else -1
        if MIN_SLICES <= counts[i] + step <= MAX_SLICES:
            counts[i] += step
    return [int(c) for c in counts]


def patient_names(rng: np.random.Generator) -> list[str]:
    alphabet = np.array(list("0123456789ABCDEFGHJKLMNPRSTUVWXYZ"))
    names: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < PATIENTS:
        site = SITES[int(rng.integers(len(SITES)))]
        if rng.random() < 0.8:
            case = f"{int(rng.integers(1000, 10000)):04d}"
        else:
            case = "".join(rng.choice(alphabet, 4))
        year, month, day = int(rng.integers(1995, 2004)), int(rng.integers(1, 13)), \
            int(rng.integers(1, 29))
        name = f"TCGA_{site}_{case}_{year:04d}{month:02d}{day:02d}"
        if name not in names:
            names.add(name)
            ordered.append(name)
    return sorted(ordered)


def _smooth(rng: np.random.Generator, side: int, cells: int) -> np.ndarray:
    """Smooth noise in about [-1, 1]: a coarse grid, bilinearly upsampled."""
    coarse = rng.normal(size=(cells + 1, cells + 1))
    x = np.linspace(0, cells, side)
    rows = np.array([np.interp(x, np.arange(cells + 1), row) for row in coarse])
    return np.array([np.interp(x, np.arange(cells + 1), col) for col in rows.T]).T


def patient_slices(rng: np.random.Generator, count: int, side: int = SIDE
                   ) -> list[tuple[np.ndarray, np.ndarray]]:
    """One patient's slices: (H, W, 3) uint8 images and (H, W) uint8 masks (0/255)."""
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float64) + 0.5
    centre = side / 2 + rng.normal(0, side * 0.03, 2)
    axes = side * np.array([rng.uniform(0.36, 0.42), rng.uniform(0.30, 0.38)])
    tissue = np.array([rng.uniform(70, 100), rng.uniform(80, 110), rng.uniform(60, 90)])
    texture = [_smooth(rng, side, 4) for _ in range(3)]
    # The tumour: a blob inside the brain, over a contiguous run of slices.
    span = rng.uniform(0.2, 0.5)
    middle = rng.uniform(0.35, 0.65) * count
    half = max(1.0, span * count / 2)
    angle0 = rng.uniform(0, 2 * np.pi)
    where = rng.uniform(0.0, 0.55)
    tumour_centre = centre + where * axes * np.array([np.sin(angle0), np.cos(angle0)])
    tumour_radius = side * rng.uniform(0.09, 0.2)
    lobes = rng.integers(2, 6)
    wobble, phase = rng.uniform(0.1, 0.3), rng.uniform(0, 2 * np.pi)
    flair_gain = rng.uniform(45, 110)
    vessels = rng.uniform(0, side, (4, 2))

    slices = []
    for k in range(count):
        depth = (k + 0.5 - count / 2) / (0.6 * count)
        scale = np.sqrt(max(0.12, 1 - depth * depth))
        r = np.hypot((yy - centre[0]) / (axes[0] * scale), (xx - centre[1]) / (axes[1] * scale))
        brain = np.clip((1.0 - r) * side * 0.25, 0, 1)
        skull = np.clip(1 - np.abs(r - 1.12) * 8, 0, 1)
        image = np.zeros((side, side, 3))
        for c in range(3):
            image[..., c] = brain * (tissue[c] + 18 * texture[c] + 10 * np.sin(k * 0.3 + c))
        image[..., 0] += 140 * skull
        image[..., 2] += 90 * skull
        for vy, vx in vessels:  # bright in post-contrast only: not tumour
            spot = np.exp(-((yy - vy) ** 2 + (xx - vx) ** 2) / 1.5) * brain
            image[..., 2] += 120 * spot
        mask = np.zeros((side, side), dtype=bool)
        t = (k + 0.5 - middle) / half
        if abs(t) < 1:
            radius = tumour_radius * np.sqrt(1 - t * t) * min(1.0, scale * 1.3)
            dy, dx = yy - tumour_centre[0], xx - tumour_centre[1]
            theta = np.arctan2(dy, dx)
            edge = radius * (1 + wobble * np.sin(lobes * theta + phase + 0.2 * k))
            inside = np.clip(edge - np.hypot(dy, dx) + 0.5, 0, 1) * (brain > 0.5)
            mask = inside >= 0.5
            image[..., 1] += flair_gain * inside
            image[..., 0] += 0.35 * flair_gain * inside
            image[..., 2] += 0.2 * flair_gain * inside
        image += rng.normal(0, 5, image.shape)
        slices.append((np.clip(image, 0, 255).round().astype(np.uint8),
                       (mask * 255).astype(np.uint8)))
    return slices


# --------------------------------------------------------------------------- build


def layout(seed: int = SEED) -> list[tuple[str, int]]:
    """(patient folder, number of slices) for every patient, in folder order."""
    rng = np.random.default_rng(seed)
    return list(zip(patient_names(rng), slice_counts(rng), strict=True))


def build(root: str | Path, *, seed: int = SEED, side: int = SIDE) -> Path:
    """Write the dataset into `root` (the kaggle_3m directory itself); return root.

    Idempotent: a complete build (its marker file) is left alone; anything else
    is built in a temporary sibling directory and moved into place.
    """
    stamp = f"{VERSION} seed={seed} side={side}\n"

    def write(tmp: Path) -> None:
        rows = ["Patient,Slices,Tumour slices"]
        tumour_total = 0
        for index, (name, count) in enumerate(layout(seed)):
            rng = np.random.default_rng([seed, index])
            folder = tmp / name
            folder.mkdir()
            tumour = 0
            for n, (image, mask) in enumerate(patient_slices(rng, count, side), start=1):
                (folder / f"{name}_{n}.tif").write_bytes(tiff_bytes(image))
                (folder / f"{name}_{n}_mask.tif").write_bytes(tiff_bytes(mask))
                tumour += bool(mask.any())
            tumour_total += tumour
            rows.append(f"{name},{count},{tumour}")
        (tmp / "data.csv").write_text("\n".join(rows) + "\n")
        (tmp / "README.md").write_text(
            "# kaggle_3m (synthetic)\n\n"
            "SYNTHETIC stand-in for the LGG MRI segmentation dataset, written by the aitestbed\n"
            "emulator (`python -m aitestbed.datasets.kaggle_3m`): same patients, slice counts\n"
            f"and layout, {side}x{side} images, generated from seed {seed}. Not medical data.\n\n"
            f"{PATIENTS} patients, {SLICES} slices, {tumour_total} with a tumour.\n")

    return build_once(root, stamp, write)


def pairs(root: str | Path) -> list[tuple[Path, Path]]:
    """(image, mask) paths of every slice, in patient then slice order."""
    found = []
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        images = [p for p in folder.glob("*.tif") if not p.name.endswith("_mask.tif")]
        images.sort(key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        found += [(p, p.with_name(f"{p.stem}_mask.tif")) for p in images]
    return found


def main(argv: list[str] | None = None) -> None:
    command.main(
        argv, "kaggle_3m", "Write the synthetic kaggle_3m (LGG MRI segmentation) stand-in",
        [command.out_option("the kaggle_3m directory to write, e.g. "
                            "/software/sambanova/dataset/kaggle_3m"),
         command.seed_option(SEED)],
        lambda args: [f"{build(args.out, seed=args.seed)}: {PATIENTS} patients, {SLICES} "
                      f"slices (synthetic, {SIDE}x{SIDE})"])


if __name__ == "__main__":
    sys.exit(main())
