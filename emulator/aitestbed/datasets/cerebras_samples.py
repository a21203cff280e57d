"""The sample datasets of the ALCF Cerebras guide (`/software/cerebras/dataset`), synthetic.

SYNTHETIC DATA. The guide's BERT, GPT-J and UNet examples copy a params file from
the dataset directory into the modelzoo and train on the data it names:

    bert_large/bert_large_MSL128_sampleds.yaml
    gptj/params_gptj_6B_sampleds.yaml
    severstal-steel-defect-detection/params_severstal_binary_rawds.yaml

and the current docs' GPT-3 111M example (Release 2.10, `cszoo fit`) copies

    OWT/Pytorch/111m_modified.yaml

The real data (pre-tokenised OpenWebText for BERT and GPT-J, the Kaggle
Severstal steel images) is not available offline. This module writes, from fixed
seeds and byte-reproducibly, small stand-ins of the same kind that the emulated
modelzoo's reduced-scale models really learn from:

* bert_large/msl128/: BERT pre-training samples of 128 tokens, statically masked
  (create_pretraining_data's 15 %, at most 20 predictions, 80/10/10) with
  sentence pairs for next-sentence prediction, in CSV files (columns input_ids,
  attention_mask, token_type_ids, masked_lm_positions, masked_lm_ids,
  masked_lm_weights, next_sentence_label; lists space-separated), and the
  word-level vocab.txt ([PAD] [UNK] [CLS] [SEP] [MASK], then the words);
* gptj/msl2048/: GPT sequences of 2,048 tokens as .npy arrays of shape
  (sequences, 3, 2048) uint16 (input_ids, attention_mask, labels = the next token);
* OWT/Pytorch/train_msl2048, val_msl2048/: the same kind of GPT sequences (the GPT-3
  111M example's OpenWebText stand-in), with its trainer YAML;
* severstal-steel-defect-detection/: Kaggle's layout (train.csv with ImageId,
  ClassId and run-length EncodedPixels, column-major and 1-based; train_images/),
  images at 1/8 of 256x1600 (32x200), grey PNG, steel-like texture with defects of
  the four classes (class 3: long scratches and bands).

The text is the grammar of aitestbed.datasets.gpt_corpus. The yamls give the
full-size models (BERT-large, GPT-J 6B, UNet) and absolute data paths under
--prefix (default /software/cerebras/dataset, where the cluster mounts this
directory), so they run as the guide has users run them. Each dataset directory
is built once, atomically (aitestbed.datasets.build_once), and holds a README.

    python -m aitestbed.datasets.cerebras_samples --out /software/cerebras/dataset
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import numpy as np

from aitestbed.datasets import build_once, command, trainer_yaml
from aitestbed.datasets.gpt_corpus import EOS, Grammar, vocabulary

PREFIX = "/software/cerebras/dataset"
SEED = 20230517
VERSION = "aitestbed-cerebras-samples-synthetic-1"

BERT_DIR, GPTJ_DIR, SEVERSTAL_DIR = "bert_large", "gptj", "severstal-steel-defect-detection"
OWT_DIR, OWT_YAML = "OWT", "111m_modified.yaml"
OWT_TRAIN_FILES, OWT_VAL_FILES, OWT_SEQUENCES_PER_FILE = 2, 1, 16
BERT_YAML, GPTJ_YAML = "bert_large_MSL128_sampleds.yaml", "params_gptj_6B_sampleds.yaml"
SEVERSTAL_YAML = "params_severstal_binary_rawds.yaml"

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BERT_MSL, BERT_MAX_PREDICTIONS, BERT_MASKED_FRACTION = 128, 20, 0.15
BERT_FILES, BERT_SAMPLES_PER_FILE = 4, 512
BERT_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "masked_lm_positions",
                "masked_lm_ids", "masked_lm_weights", "next_sentence_label")
GPTJ_MSL, GPTJ_FILES, GPTJ_SEQUENCES_PER_FILE = 2048, 2, 32
SEVERSTAL_IMAGES, SEVERSTAL_HEIGHT, SEVERSTAL_WIDTH = 320, 32, 200


def _inputs(loader: str) -> str:
    """A params file's train_input and eval_input: the same loader (its `{training}` True
    for training, False for evaluation), shuffled for training only."""
    return "\n".join(
        f"{section}:\n" + loader.replace("{training}", str(training))
        + ("    shuffle: True\n    shuffle_seed: 1\n" if training else "    shuffle: False\n")
        + "    num_workers: 8\n" for section, training in (("train_input", True),
                                                          ("eval_input", False)))


def _training(learning_rate: str, weight_decay_rate: str, max_steps: int,
              clip: bool = True) -> str:
    """A params file's optimizer (AdamW, dynamic loss scaling) and runconfig."""
    return f"""optimizer:
    optimizer_type: "AdamW"
    learning_rate: {learning_rate}
    weight_decay_rate: {weight_decay_rate}
""" + ("    max_gradient_norm: 1.0\n" if clip else "") + f"""\
    loss_scaling_factor: "dynamic"

runconfig:
    max_steps: {max_steps}
    log_steps: 100
    checkpoint_steps: {max_steps}
    seed: 1
"""


# The params files: the full-size models, data paths under {prefix}.
BERT_PARAMS = """\
# BERT-large, maximum sequence length 128, on the sample dataset (for both training
# and evaluation).

""" + _inputs("""\
    data_processor: "BertCSVDataProcessor"
    data_dir: "{data}/train"
    vocab_file: "{data}/vocab.txt"
    max_sequence_length: 128
    max_predictions_per_seq: 20
    batch_size: 1024
""") + """
model:
    vocab_size: 30522
    hidden_size: 1024
    num_hidden_layers: 24
    num_heads: 16
    filter_size: 4096
    encoder_nonlinearity: "gelu"
    max_position_embeddings: 512
    dropout_rate: 0.1
    attention_dropout_rate: 0.1
    layer_norm_epsilon: 1.0e-12
    disable_nsp: False
    mixed_precision: True

""" + _training("0.002", "0.01", 1000)

GPTJ_PARAMS = """\
# GPT-J 6B, sequence length 2048, on the sample dataset. Written for two CS-2
# systems: python run.py CSX --num_csx=2 --params configs/params_gptj_6B_sampleds.yaml ...

""" + _inputs("""\
    data_processor: "GptNpyDataProcessor"
    data_dir: "{data}/train"
    vocab_size: 50400
    max_sequence_length: 2048
    batch_size: 130
""") + """
model:
    vocab_size: 50400
    position_embedding_type: "rotary"
    rotary_dim: 64
    hidden_size: 4096
    num_hidden_layers: 28
    num_heads: 16
    filter_size: 16384
    max_position_embeddings: 2048
    use_projection_bias_in_attention: False
    use_ffn_bias_in_attention: False
    use_ffn_bias: True
    use_bias_in_output: True
    share_embedding_weights: False
    nonlinearity: "gelu"
    embedding_dropout_rate: 0.0
    attention_dropout_rate: 0.0
    residual_dropout_rate: 0.0
    layer_norm_epsilon: 1.0e-5
    mixed_precision: True

""" + _training("0.003", "0.1", 500)

SEVERSTAL_PARAMS = """\
# UNet, binary segmentation of defect class 3 of the Severstal steel defect images,
# read from the raw dataset (train.csv and train_images/).

""" + _inputs("""\
    data_processor: "SeverstalBinaryClassDataProcessor"
    data_dir: "{data}"
    image_shape: [256, 256, 1]
    num_classes: 2
    class_id: 3
    train_test_split: 0.85
    augment_data: {training}
    normalize_data_method: "zero_centered"
    batch_size: 32
""") + """
model:
    name: "UNet"
    nonlinearity: "ReLU"
    skip_connect: True
    enable_bias: True
    downscale_method: "max_pool"
    convs_per_block: ["3_3", "3_3"]
    encoder_filters: [64, 128, 256, 512]
    decoder_filters: [256, 128, 64]
    residual_blocks: False
    initializer:
        name: "glorot_uniform"
        gain: 1.0
    bias_initializer: "zeros"
    loss: "bce"
    mixed_precision: True

""" + _training("0.003", "0.0", 1000, clip=False)


OWT_PARAMS = ("""\
# Cerebras-GPT 111M (GPT-3 architecture) on the sample OpenWebText set, for one CS-3
# (aitestbed's own config, in Release 2.10's trainer format). As the ALCF docs run it:
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/gpt3
#   cp {data}/111m_modified.yaml configs/Cerebras_GPT/111m_modified.yaml
#   cszoo fit configs/Cerebras_GPT/111m_modified.yaml --job_labels name=gpt3_111m \\
#       --model_dir model_dir_gpt3_111m
# To restart from the checkpoint, raise max_steps (e.g. to 800) and add
# --checkpoint_path=model_dir_gpt3_111m/checkpoint_400.mdl
""" + trainer_yaml.INIT + """\
    model:
      name: gpt3
      hidden_size: 768
      num_hidden_layers: 10
      num_heads: 12
      filter_size: 3072
      vocab_size: 50257
      max_position_embeddings: 2048
      position_embedding_type: learned
      share_embedding_weights: true
      nonlinearity: gelu
      layer_norm_epsilon: 1.0e-05
      use_projection_bias_in_attention: true
      use_ffn_bias: true
""" + trainer_yaml.adamw("[0.9, 0.95]", "0.1", eps="1.0e-08")
    + trainer_yaml.warmup_then_decay(0.003, 40, 760) + trainer_yaml.precision("bfloat16")
    + trainer_yaml.loop(400, 100, 400, 20) + trainer_yaml.fit(*(f"""\
      data_processor: GptNpyDataProcessor
      data_dir: {{data}}/{split}_msl2048
      max_sequence_length: 2048
      batch_size: 120
""" for split in ("train", "val")), workers=1))


def params_text(template: str, data_dir: str) -> str:
    return template.replace("{data}", data_dir)


def _readme(title: str, body: str) -> str:
    return (f"# {title} (synthetic)\n\nSYNTHETIC sample data written by the aitestbed emulator "
            "(`python -m aitestbed.datasets.cerebras_samples`)\nfor the reduced-scale models of "
            f"its Cerebras modelzoo; not the real dataset.\n\n{body}\n")


def _write_docs(root: Path, params: Path, template: str, data_dir: str, title: str,
                body: str) -> None:
    """A dataset's params file (its data paths under data_dir) and its README."""
    params.write_text(params_text(template, data_dir))
    (root / "README.md").write_text(_readme(title, body))


# --------------------------------------------------------------------------- BERT


def bert_vocabulary() -> list[str]:
    return [*BERT_SPECIALS, *(word for word in vocabulary() if word != EOS)]


def _sentences(grammar: Grammar) -> list[list[str]]:
    """One document's sentences."""
    words, sentences, current = grammar.document()[:-1], [], []
    for word in words:
        current.append(word)
        if word == ".":
            sentences.append(current)
            current = []
    return sentences


def bert_sample(rng: np.random.Generator, grammar: Grammar, ids: dict[str, int]) -> list[list]:
    """One statically masked sentence pair, as the CSV columns' values."""
    document = _sentences(grammar)
    split = int(rng.integers(1, len(document)))
    first = [w for s in document[:split] for w in s]
    is_random = bool(rng.random() < 0.5)
    second_source = _sentences(grammar) if is_random else document[split:]
    second = [w for s in second_source for w in s]
    budget = BERT_MSL - 3
    while len(first) + len(second) > budget:
        longer = first if len(first) > len(second) else second
        longer.pop()
    tokens = ["[CLS]", *first, "[SEP]", *second, "[SEP]"]
    types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    input_ids = [ids[t] for t in tokens]
    candidates = [i for i, t in enumerate(tokens) if t not in BERT_SPECIALS]
    count = min(BERT_MAX_PREDICTIONS, max(1, round(len(tokens) * BERT_MASKED_FRACTION)))
    positions = sorted(int(p) for p in rng.choice(candidates, count, replace=False))
    labels = [input_ids[p] for p in positions]
    for p in positions:
        roll = rng.random()
        if roll < 0.8:
            input_ids[p] = ids["[MASK]"]
        elif roll < 0.9:
            input_ids[p] = int(rng.integers(len(BERT_SPECIALS), len(ids)))
    pad = BERT_MSL - len(tokens)
    missing = BERT_MAX_PREDICTIONS - count
    return [input_ids + [0] * pad, [1] * len(tokens) + [0] * pad, types + [0] * pad,
            positions + [0] * missing, labels + [0] * missing, [1] * count + [0] * missing,
            [int(is_random)]]


def write_bert(root: Path, prefix: str, seed: int) -> None:
    data = root / "msl128"
    (data / "train").mkdir(parents=True)
    words = bert_vocabulary()
    ids = {word: i for i, word in enumerate(words)}
    (data / "vocab.txt").write_text("\n".join(words) + "\n")
    for index in range(BERT_FILES):
        rng = np.random.default_rng([seed, 1, index])
        grammar = Grammar(np.random.default_rng([seed, 2, index]))
        rows = [",".join(BERT_COLUMNS)]
        for _ in range(BERT_SAMPLES_PER_FILE):
            columns = bert_sample(rng, grammar, ids)
            rows.append(",".join(" ".join(map(str, column)) for column in columns))
        (data / "train" / f"data-{index:05d}.csv").write_text("\n".join(rows) + "\n")
    _write_docs(root, root / BERT_YAML, BERT_PARAMS, f"{prefix}/{BERT_DIR}/msl128", "bert_large",
                f"msl128/train/: {BERT_FILES} CSV files of {BERT_SAMPLES_PER_FILE} BERT "
                f"pre-training samples of {BERT_MSL} tokens (columns {', '.join(BERT_COLUMNS)}), "
                "statically masked, grammar-generated English-like text; msl128/vocab.txt: its "
                f"word-level vocabulary of {len(words)} tokens. Seed {seed}.")


# --------------------------------------------------------------------------- GPT-J


def write_gptj(root: Path, prefix: str, seed: int) -> None:
    _write_gpt_files(root / "msl2048" / "train", seed, 3, GPTJ_FILES, GPTJ_SEQUENCES_PER_FILE)
    _write_docs(root, root / GPTJ_YAML, GPTJ_PARAMS, f"{prefix}/{GPTJ_DIR}/msl2048", "gptj",
                f"msl2048/train/: {GPTJ_FILES} .npy files of {GPTJ_SEQUENCES_PER_FILE} sequences "
                f"of {GPTJ_MSL} tokens, shape (sequences, 3, {GPTJ_MSL}) uint16: input_ids, "
                "attention_mask, labels (the next token). Grammar-generated English-like text, "
                f"word-level vocabulary of {len(vocabulary())} tokens (id 0 is {EOS}). "
                f"Seed {seed}.")


def _gpt_sequences(seed: int, tag: int, index: int, sequences: int, length: int) -> np.ndarray:
    """(sequences, 3, length) uint16: input_ids, attention_mask, labels (the next token)."""
    ids = {word: i for i, word in enumerate(vocabulary())}
    grammar = Grammar(np.random.default_rng([seed, tag, index]))
    needed = sequences * length + 1
    stream: list[int] = []
    while len(stream) < needed:
        stream += [ids[w] for w in grammar.document()]
    tokens = np.array(stream[:needed], dtype=np.uint16)
    inputs = tokens[:-1].reshape(sequences, length)
    labels = tokens[1:].reshape(sequences, length)
    return np.stack([inputs, np.ones_like(inputs), labels], axis=1)


def _write_gpt_files(directory: Path, seed: int, tag: int, files: int, sequences: int) -> None:
    """`files` .npy files (data-00000.npy, ...) of `sequences` GPT sequences each."""
    directory.mkdir(parents=True)
    for index in range(files):
        np.save(directory / f"data-{index:05d}.npy",
                _gpt_sequences(seed, tag, index, sequences, GPTJ_MSL))


def write_owt(root: Path, prefix: str, seed: int) -> None:
    pytorch = root / "Pytorch"
    for split, files, tag in (("train_msl2048", OWT_TRAIN_FILES, 5),
                              ("val_msl2048", OWT_VAL_FILES, 6)):
        _write_gpt_files(pytorch / split, seed, tag, files, OWT_SEQUENCES_PER_FILE)
    _write_docs(root, pytorch / OWT_YAML, OWT_PARAMS, f"{prefix}/{OWT_DIR}/Pytorch", "OWT",
                f"Pytorch/train_msl2048/ ({OWT_TRAIN_FILES} files) and val_msl2048/ "
                f"({OWT_VAL_FILES}): .npy files of {OWT_SEQUENCES_PER_FILE} sequences of "
                f"{GPTJ_MSL} tokens, shape (sequences, 3, {GPTJ_MSL}) uint16: input_ids, "
                "attention_mask, labels (the next token), in place of the pre-tokenised "
                f"OpenWebText; Pytorch/{OWT_YAML}: the GPT-3 111M trainer config of the ALCF "
                f"example. Seed {seed}.")


# --------------------------------------------------------------------------- Severstal


def png_bytes(pixels: np.ndarray) -> bytes:
    """An 8-bit greyscale PNG (every row filter 0), with zlib only."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    height, width = pixels.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    raw = b"".join(b"\x00" + row.tobytes() for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


def rle_encode(mask: np.ndarray) -> str:
    """Kaggle's run-length encoding: column-major pixel numbers from 1, "start length ..."."""
    flat = np.concatenate([[0], mask.T.flatten().astype(np.int8), [0]])
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    starts, ends = changes[::2], changes[1::2]
    return " ".join(f"{s} {e - s}" for s, e in zip(starts, ends, strict=True))


def rle_decode(encoded: str, height: int, width: int) -> np.ndarray:
    flat = np.zeros(height * width, dtype=bool)
    values = [int(v) for v in encoded.split()]
    for start, length in zip(values[::2], values[1::2], strict=True):
        flat[start - 1:start - 1 + length] = True
    return flat.reshape(width, height).T


def _defect(rng: np.random.Generator, class_id: int, yy: np.ndarray, xx: np.ndarray
            ) -> np.ndarray:
    """The mask of one defect: pits (1), small patches (2), scratches and bands (3),
    large blotches (4)."""
    cy, cx = rng.uniform(4, SEVERSTAL_HEIGHT - 4), rng.uniform(10, SEVERSTAL_WIDTH - 10)
    if class_id == 1:
        return np.hypot(yy - cy, xx - cx) < rng.uniform(1.0, 2.0)
    if class_id == 2:
        return (np.abs(yy - cy) < rng.uniform(1.5, 3)) & (np.abs(xx - cx) < rng.uniform(2, 5))
    if class_id == 3:
        slope = rng.uniform(-0.15, 0.15)
        half_width = rng.uniform(1.5, 3.5)
        half_length = rng.uniform(25, 70)
        return (np.abs(yy - cy - slope * (xx - cx)) < half_width) & (np.abs(xx - cx) < half_length)
    return np.hypot((yy - cy) / rng.uniform(5, 9), (xx - cx) / rng.uniform(12, 30)) < 1


def steel_image(rng: np.random.Generator) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """A grey steel surface and the masks of the defect classes on it."""
    yy, xx = np.mgrid[0:SEVERSTAL_HEIGHT, 0:SEVERSTAL_WIDTH].astype(np.float64)
    base = rng.uniform(90, 140)
    rows = rng.normal(0, 6, (SEVERSTAL_HEIGHT, 1))  # rolling streaks along the strip
    image = base + rows + 4 * np.sin(xx / rng.uniform(8, 20) + rng.uniform(0, 6))
    masks: dict[int, np.ndarray] = {}
    for class_id, chance, shade in ((1, 0.2, -45), (2, 0.1, 40), (3, 0.5, -55), (4, 0.15, -35)):
        if rng.random() < chance:
            mask = np.zeros_like(xx, dtype=bool)
            for _ in range(int(rng.integers(1, 3))):
                mask |= _defect(rng, class_id, yy, xx)
            image = np.where(mask, image + shade, image)
            masks[class_id] = mask
    image = image + rng.normal(0, 7, image.shape)
    return np.clip(image, 0, 255).round().astype(np.uint8), masks


def write_severstal(root: Path, prefix: str, seed: int) -> None:
    images = root / "train_images"
    images.mkdir(parents=True)
    rows = ["ImageId,ClassId,EncodedPixels"]
    counts = dict.fromkeys(range(1, 5), 0)
    for index in range(SEVERSTAL_IMAGES):
        rng = np.random.default_rng([seed, 4, index])
        name = f"{int(rng.integers(16 ** 9)):09x}.png"
        image, masks = steel_image(rng)
        (images / name).write_bytes(png_bytes(image))
        for class_id, mask in masks.items():
            rows.append(f"{name},{class_id},{rle_encode(mask)}")
            counts[class_id] += 1
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    (root / SEVERSTAL_YAML).write_text(
        params_text(SEVERSTAL_PARAMS, f"{prefix}/{SEVERSTAL_DIR}"))
    listed = ", ".join(f"class {c}: {n}" for c, n in counts.items())
    (root / "README.md").write_text(_readme("severstal-steel-defect-detection", (
        f"train_images/: {SEVERSTAL_IMAGES} grey PNG images of {SEVERSTAL_HEIGHT}x"
        f"{SEVERSTAL_WIDTH} pixels (1/8 of the real 256x1600), a steel-like surface with drawn "
        "defects; train.csv: ImageId, ClassId, EncodedPixels (Kaggle's column-major run-length "
        f"encoding) of every defect class on an image ({listed}). Seed {seed}.")))


WRITERS = {BERT_DIR: write_bert, GPTJ_DIR: write_gptj, SEVERSTAL_DIR: write_severstal,
           OWT_DIR: write_owt}


def build(out: str | Path, *, prefix: str = PREFIX, seed: int = SEED) -> list[Path]:
    """Write (or keep, if complete) each sample dataset under `out`; their directories."""
    prefix = prefix.rstrip("/") or "/"
    built = []
    for name, writer in WRITERS.items():
        stamp = f"{VERSION} seed={seed} prefix={prefix}\n"
        built.append(build_once(Path(out) / name, stamp,
                                lambda tmp, writer=writer: writer(tmp, prefix, seed)))
    return built


def main(argv: list[str] | None = None) -> None:
    command.main(
        argv, "cerebras_samples",
        "Write the synthetic sample datasets of the Cerebras BERT, GPT-J and UNet examples, "
        "with their params files",
        [command.out_option("the dataset directory, e.g. /software/cerebras/dataset"),
         ("--prefix", {"default": PREFIX,
                       "help": "the directory the params files' data paths start with, where "
                               f"--out is seen on the cluster (default {PREFIX})"}),
         command.seed_option(SEED)],
        lambda args: [f"{path}: synthetic sample dataset"
                      for path in build(args.out, prefix=args.prefix, seed=args.seed)])


if __name__ == "__main__":
    sys.exit(main())
