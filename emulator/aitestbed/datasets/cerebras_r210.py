"""The sample datasets of the current ALCF Cerebras docs (Release 2.10.0), synthetic.

SYNTHETIC DATA. The docs' example programs (cerebras/example-programs.md) copy a
trainer YAML from /software/cerebras/dataset and run `cszoo fit` on it:

    bert_large/bert_large_MSL128_sampleds.yaml      BERT-large MSL128
    gptj/params_gptj_6B_sampleds.yaml               GPT-J 6B
    params_llama2_7b.yaml                           Llama-2 7B (/software/datasets/llama_data_32K)
    ESM-2/params_esm2_t12_35M_UR50D_modified.yaml   ESM-2 35M (/software/datasets/ESM-2)
    vision_transformer/params_vit_base_patch_16_imagenet_1k.yaml
                                                    ViT-Base/16 (/software/datasets/imagenet)
    params_dit_2B_patchsize_2x2_modified.yaml       DiT 2B (dit/)
    OWT/Pytorch/111m_modified.yaml                  GPT-3 111M

Two of those paths are the 2023 guide's too, with the older params format
(aitestbed.datasets.cerebras_samples), so this is a tree of its own: a cluster of
Release 2.10 links /software/cerebras/dataset to it (aitestbed.cerebras.node_setup).
The real data is not available offline; these are small stand-ins of the same kind
that the emulated modelzoo's reduced-scale models really learn from: the BERT and
GPT sets of cerebras_samples, Llama's 32K-vocabulary text as the same kind of GPT
sequences (4096 tokens), protein-like sequences in the ESM-2 alphabet (a Markov
chain over the residues, with motifs), ImageNet stand-ins (32 x 32 RGB images of 16
classes among the 1000 labels, each class its own colour and stripes) and DiT's
VAE latents (4 x 8 x 8, each class its own pattern). The YAMLs give the full-size
models, the docs' steps and batches (as their logs show them) and absolute data
paths; as the docs say, validation is commented out of the GPT-J, Llama, ESM-2 and
ViT ones.

    python -m aitestbed.datasets.cerebras_r210 --out /opt/cerebras/software/dataset-r2.10 \\
        --datasets-out /opt/cerebras/software/datasets
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from aitestbed.datasets import build_once, command, trainer_yaml
from aitestbed.datasets import cerebras_samples as samples

PREFIX = samples.PREFIX
DATASETS_PREFIX = "/software/datasets"
VERSION = "aitestbed-cerebras-r2.10-samples-synthetic-1"
SEED = samples.SEED

LLAMA_YAML, LLAMA_DIR, LLAMA_MSL = "params_llama2_7b.yaml", "llama_data_32K", 4096
ESM_DIR, ESM_YAML, ESM_MSL = "ESM-2", "params_esm2_t12_35M_UR50D_modified.yaml", 1026
VIT_DIR, VIT_YAML = "vision_transformer", "params_vit_base_patch_16_imagenet_1k.yaml"
IMAGENET_DIR, IMAGE_SIZE, IMAGE_CLASSES = "imagenet", 32, 16
DIT_DIR, DIT_YAML, DIT_LATENT = "dit", "params_dit_2B_patchsize_2x2_modified.yaml", 8

_BERT_LOADER = """\
      data_processor: BertCSVDataProcessor
      data_dir: {data}/msl128/train
      vocab_file: {data}/msl128/vocab.txt
      max_sequence_length: 128
      max_predictions_per_seq: 20
"""

BERT_PARAMS = ("""\
# BERT-large, maximum sequence length 128, on the sample dataset (training and
# validation), for one CS-3. As the ALCF docs run it:
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/bert
#   cp {data}/bert_large_MSL128_sampleds.yaml configs/bert_large_MSL128_sampleds.yaml
#   cszoo fit configs/bert_large_MSL128_sampleds.yaml --job_labels name=bert_pt \\
#       --model_dir model_dir_bert_large_pytorch
""" + trainer_yaml.INIT + """\
    model:
      name: bert
      vocab_size: 30522
      hidden_size: 1024
      num_hidden_layers: 24
      num_heads: 16
      filter_size: 4096
      encoder_nonlinearity: gelu
      max_position_embeddings: 512
      dropout_rate: 0.1
      layer_norm_epsilon: 1.0e-12
      disable_nsp: false
""" + trainer_yaml.adamw("[0.9, 0.999]", "0.01", eps="1.0e-06")
    + trainer_yaml.schedulers((0.002, 0.0002, 1000)) + trainer_yaml.precision("bfloat16")
    + trainer_yaml.loop(1000, 220, 1000, 100) + trainer_yaml.fit(
        _BERT_LOADER + "      batch_size: 3720\n", _BERT_LOADER + "      batch_size: 256\n",
        workers=8))


def _lm_params(title: str, run: str, model: str, loop: str, data: str, msl: int,
               batch: int, micro: int = 0) -> str:
    """A decoder LM's trainer YAML, its validation commented out as the docs ship it."""
    loader = f"""\
      data_processor: GptNpyDataProcessor
      data_dir: {data}/%s
      max_sequence_length: {msl}
      batch_size: {batch}
""" + (f"      micro_batch_size: {micro}\n" if micro else "")
    return (f"{title}\n{run}" + trainer_yaml.INIT + model
            + trainer_yaml.adamw("[0.9, 0.95]", "0.1", eps="1.0e-08")
            + trainer_yaml.warmup_then_decay(0.003, 20, 180) + trainer_yaml.precision("bfloat16")
            + loop + trainer_yaml.fit(loader % "train", loader % "val", workers=1, commented=True)
            + "\n")


_LM_LOOP = trainer_yaml.loop(200, 10, 200, 50)

GPTJ_PARAMS = _lm_params(
    "# GPT-J 6B, sequence length 2048, on the sample dataset, for one CS-3.",
    """\
# As the ALCF docs run it:
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/gptj
#   cp {data}/params_gptj_6B_sampleds.yaml configs/params_gptj_6B_sampleds.yaml
#   cszoo fit configs/params_gptj_6B_sampleds.yaml --job_labels name=gptj --model_dir model_dir_gptj
""", """\
    model:
      name: gptj
      vocab_size: 50400
      hidden_size: 4096
      num_hidden_layers: 28
      num_heads: 16
      filter_size: 16384
      rotary_dim: 64
      max_position_embeddings: 2048
      layer_norm_epsilon: 1.0e-05
      share_embedding_weights: false
      use_bias_in_output: true
""", _LM_LOOP, "{data}/msl2048", 2048, 120)

LLAMA_PARAMS = _lm_params(
    "# Llama-2 7B, sequence length 4096, on the 32K-vocabulary sample set, for one CS-3.",
    """\
# As the ALCF docs run it:
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/llama
#   cp {root}/params_llama2_7b.yaml configs/params_llama2_7b.yaml
#   cszoo fit configs/params_llama2_7b.yaml --job_labels name=llama2_7b \\
#       --model_dir model_dir_llama2_7b
""", """\
    model:
      name: llama
      vocab_size: 32000
      hidden_size: 4096
      num_hidden_layers: 32
      num_heads: 32
      filter_size: 11008
      max_position_embeddings: 4096
      position_embedding_type: rotary
      norm_type: rmsnorm
      nonlinearity: swiglu
      layer_norm_epsilon: 1.0e-05
      share_embedding_weights: false
""", _LM_LOOP, "{datasets}/llama_data_32K", LLAMA_MSL, 1024, micro=64)

ESM_PARAMS = ("""\
# ESM-2 t12 35M (esm2_t12_35M_UR50D) on the UniRef50 sample set, for one CS-3.
# As the ALCF docs run it (400 steps):
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/esm2
#   cp {data}/params_esm2_t12_35M_UR50D_modified.yaml configs/
#   cszoo fit configs/params_esm2_t12_35M_UR50D_modified.yaml --job_labels name=esm2_t12_35m \\
#       --model_dir model_dir_esm2
""" + trainer_yaml.INIT + """\
    model:
      name: esm2
      vocab_size: 33
      hidden_size: 480
      num_hidden_layers: 12
      num_heads: 20
      filter_size: 1920
      max_position_embeddings: 1026
      position_embedding_type: rotary
      layer_norm_epsilon: 1.0e-05
""" + trainer_yaml.adamw("[0.9, 0.98]", "0.01", eps="1.0e-08")
    + trainer_yaml.warmup_then_decay(0.004, 40, 360) + trainer_yaml.precision("cbfloat16")
    + trainer_yaml.loop(400, 10, 200, 100) + trainer_yaml.fit(*(f"""\
      data_processor: ESM2NpyDataProcessor
      data_dir: {{datasets}}/ESM-2/{split}
      max_sequence_length: 1026
      mlm_fraction: 0.15
      batch_size: 2048
""" for split in ("train", "val")), workers=1, commented=True))

VIT_PARAMS = ("""\
# ViT-Base/16 on ImageNet-1k (the preprocessed sample set), for one CS-3.
# As the ALCF docs run it (200 steps):
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/vision/vision_transformer
#   cp {data}/params_vit_base_patch_16_imagenet_1k.yaml configs/
#   cszoo fit configs/params_vit_base_patch_16_imagenet_1k.yaml --job_labels \\
#       name=vision_transformer --model_dir model_dir_vit
""" + trainer_yaml.INIT + """\
    model:
      name: vision_transformer
      image_size: [224, 224]
      num_channels: 3
      patch_size: [16, 16]
      hidden_size: 768
      num_hidden_layers: 12
      num_heads: 12
      filter_size: 3072
      num_classes: 1000
      layer_norm_epsilon: 1.0e-06
""" + trainer_yaml.adamw("[0.9, 0.999]", "0.03")
    + trainer_yaml.schedulers((0.003, 0.0003, 200)) + trainer_yaml.precision("cbfloat16")
    + trainer_yaml.loop(200, 10, 100, 10) + trainer_yaml.fit(*(f"""\
      data_processor: ImageNetNpyDataProcessor
      data_dir: {{datasets}}/imagenet
      split: {split}
      image_size: [224, 224]
      num_classes: 1000
""" + augment + """\
      batch_size: 2850
""" for split, augment in (("train", "      augment: true\n"), ("val", ""))),
        workers=8, commented=True))

DIT_PARAMS = ("""\
# DiT with 2B parameters, patches of 2 x 2 on 32 x 32 x 4 latents of ImageNet, for one
# CS-3. As the ALCF docs run it (400 steps):
#   cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/vision/dit
#   cp {root}/params_dit_2B_patchsize_2x2_modified.yaml configs/
#   cszoo fit configs/params_dit_2B_patchsize_2x2_modified.yaml --job_labels name=DiT \\
#       --model_dir model_dir_dit
""" + trainer_yaml.INIT + """\
    model:
      name: dit
      latent_size: [32, 32]
      latent_channels: 4
      patch_size: [2, 2]
      hidden_size: 2048
      num_hidden_layers: 28
      num_heads: 16
      filter_size: 8192
      num_classes: 1000
      num_diffusion_steps: 1000
      beta_start: 0.0001
      beta_end: 0.02
""" + trainer_yaml.adamw("[0.9, 0.999]", "0.0")
    + trainer_yaml.schedulers((0.002, 0.002, 400)) + trainer_yaml.precision("bfloat16")
    + trainer_yaml.loop(400, 10, 200, 20) + trainer_yaml.fit("""\
      data_processor: DiTLatentDataProcessor
      data_dir: {data}/train
      batch_size: 1168
""", workers=8))


def _fill(template: str, **paths: str) -> str:
    for name, value in paths.items():
        template = template.replace("{" + name + "}", value)
    return template


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def esm_sequences(seed: int, tag: int, count: int) -> np.ndarray:
    """(count, ESM_MSL) uint8: <cls> residues <eos> <pad>..., from a Markov chain with
    motifs, so that a masked residue is predictable from its neighbours."""
    rng = np.random.default_rng([seed, tag])
    residues = np.arange(4, 24)
    chain = np.random.default_rng([seed, 99]).dirichlet(np.full(20, 0.15), size=20)
    motifs = [np.random.default_rng([seed, 98, m]).choice(residues, 8) for m in range(6)]
    out = np.full((count, ESM_MSL), 1, dtype=np.uint8)  # <pad>
    for row in range(count):
        length = int(rng.integers(400, ESM_MSL - 2))
        sequence, state = [], int(rng.integers(20))
        while len(sequence) < length:
            if rng.random() < 0.05:
                sequence.extend(motifs[int(rng.integers(len(motifs)))].tolist())
                state = sequence[-1] - 4
            else:
                state = int(rng.choice(20, p=chain[state]))
                sequence.append(state + 4)
        out[row, 0], out[row, 1:length + 1], out[row, length + 1] = 0, sequence[:length], 2
    return out


def images(seed: int, tag: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(count, 32, 32, 3) uint8 and their labels: each of IMAGE_CLASSES classes (spread
    over the 1000 labels) a colour and a stripe direction and frequency, with noise."""
    rng = np.random.default_rng([seed, tag])
    classes = np.arange(IMAGE_CLASSES) * (1000 // IMAGE_CLASSES) + 7
    palette = np.random.default_rng([seed, 97]).uniform(40, 215, size=(IMAGE_CLASSES, 3))
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / IMAGE_SIZE
    picks = rng.integers(IMAGE_CLASSES, size=count)
    out = np.empty((count, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for i, c in enumerate(picks):
        angle = np.pi * c / IMAGE_CLASSES
        stripes = np.sin(2 * np.pi * (2 + c % 4) * (np.cos(angle) * xx + np.sin(angle) * yy)
                         + rng.uniform(0, 2 * np.pi))
        pixel = palette[c] + 35 * stripes[..., None] + rng.normal(0, 18, (IMAGE_SIZE,
                                                                           IMAGE_SIZE, 3))
        out[i] = np.clip(pixel, 0, 255).astype(np.uint8)
    return out, classes[picks].astype(np.int16)


def latents(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(count, 4, 8, 8) float16 latents (about unit variance) and their labels."""
    rng = np.random.default_rng([seed, 11])
    patterns = np.random.default_rng([seed, 96]).normal(0, 1, (IMAGE_CLASSES, 4, DIT_LATENT,
                                                               DIT_LATENT))
    picks = rng.integers(IMAGE_CLASSES, size=count)
    values = patterns[picks] * 0.9 + rng.normal(0, 0.3, (count, 4, DIT_LATENT, DIT_LATENT))
    labels = (np.arange(IMAGE_CLASSES) * (1000 // IMAGE_CLASSES) + 7)[picks]
    return values.astype(np.float16), labels.astype(np.int16)


def write_tree(root: Path, prefix: str, datasets_prefix: str, seed: int) -> None:
    """The dataset directory a Release 2.10 cluster shows as /software/cerebras/dataset."""
    paths = {"root": prefix, "datasets": datasets_prefix}
    bert, gptj = root / samples.BERT_DIR, root / samples.GPTJ_DIR
    bert.mkdir()
    samples.write_bert(bert, prefix, seed)
    _write(bert / samples.BERT_YAML, _fill(BERT_PARAMS, data=f"{prefix}/{samples.BERT_DIR}",
                                           **paths))
    gptj.mkdir()
    samples.write_gptj(gptj, prefix, seed)
    (gptj / "msl2048" / "val").mkdir()
    np.save(gptj / "msl2048" / "val" / "data-00000.npy",
            samples._gpt_sequences(seed, 4, 0, 8, samples.GPTJ_MSL))
    _write(gptj / samples.GPTJ_YAML, _fill(GPTJ_PARAMS, data=f"{prefix}/{samples.GPTJ_DIR}",
                                           **paths))
    (root / samples.OWT_DIR).mkdir()
    samples.write_owt(root / samples.OWT_DIR, prefix, seed)
    _write(root / LLAMA_YAML, _fill(LLAMA_PARAMS, **paths))
    _write(root / ESM_DIR / ESM_YAML, _fill(ESM_PARAMS, data=f"{prefix}/{ESM_DIR}", **paths))
    _write(root / VIT_DIR / VIT_YAML, _fill(VIT_PARAMS, data=f"{prefix}/{VIT_DIR}", **paths))
    _write(root / DIT_YAML, _fill(DIT_PARAMS, data=f"{prefix}/{DIT_DIR}", **paths))
    dit = root / DIT_DIR / "train"
    dit.mkdir(parents=True)
    values, labels = latents(seed, 256)
    np.save(dit / "latents.npy", values)
    np.save(dit / "labels.npy", labels)
    _write(root / "README.md", samples._readme("Release 2.10 sample datasets", (
        "The YAMLs of the docs' example programs (BERT, GPT-J, Llama-2, ESM-2, ViT, DiT, "
        "GPT-3) and their data: bert_large/msl128 (CSV), gptj/msl2048 (.npy), OWT/Pytorch "
        f"(.npy), dit/train (VAE latents 4x{DIT_LATENT}x{DIT_LATENT} of {IMAGE_CLASSES} "
        f"classes). The rest of the data is under {datasets_prefix}. Seed {seed}.")))


def write_datasets(root: Path, seed: int) -> None:
    """/software/datasets: llama_data_32K, ESM-2, imagenet."""
    for split, files, tag in (("train", 2, 21), ("val", 1, 22)):
        (root / LLAMA_DIR / split).mkdir(parents=True)
        for index in range(files):
            np.save(root / LLAMA_DIR / split / f"data-{index:05d}.npy",
                    samples._gpt_sequences(seed, tag, index, 4, LLAMA_MSL))
    for split, count, tag in (("train", 64, 31), ("val", 8, 32)):
        (root / ESM_DIR / split).mkdir(parents=True)
        np.save(root / ESM_DIR / split / "data-00000.npy", esm_sequences(seed, tag, count))
    for split, count, tag in (("train", 512, 41), ("val", 128, 42)):
        (root / IMAGENET_DIR / split).mkdir(parents=True)
        pixels, labels = images(seed, tag, count)
        np.save(root / IMAGENET_DIR / split / "images.npy", pixels)
        np.save(root / IMAGENET_DIR / split / "labels.npy", labels)
    _write(root / "README.md", samples._readme("datasets", (
        f"{LLAMA_DIR}/{{train,val}}: GPT sequences of {LLAMA_MSL} tokens (.npy, (sequences, "
        f"3, {LLAMA_MSL})); {ESM_DIR}/{{train,val}}: protein-like sequences in the ESM-2 "
        f"alphabet (.npy, (sequences, {ESM_MSL}) uint8); {IMAGENET_DIR}/{{train,val}}: "
        f"images.npy (N, {IMAGE_SIZE}, {IMAGE_SIZE}, 3) uint8 and labels.npy, "
        f"{IMAGE_CLASSES} classes among ImageNet's 1000 labels. Seed {seed}.")))


def build(out: str | Path, datasets_out: str | Path, *, prefix: str = PREFIX,
          datasets_prefix: str = DATASETS_PREFIX, seed: int = SEED) -> list[Path]:
    """Write (or keep, if complete) the 2.10 dataset tree and /software/datasets."""
    prefix, datasets_prefix = prefix.rstrip("/") or "/", datasets_prefix.rstrip("/") or "/"
    stamp = f"{VERSION} seed={seed} prefix={prefix} datasets={datasets_prefix}\n"
    return [build_once(Path(out), stamp,
                       lambda tmp: write_tree(tmp, prefix, datasets_prefix, seed)),
            build_once(Path(datasets_out), stamp, lambda tmp: write_datasets(tmp, seed))]


def main(argv: list[str] | None = None) -> None:
    command.main(
        argv, "cerebras_r210",
        "Write the synthetic sample datasets of the current ALCF docs' Cerebras example "
        "programs (Release 2.10.0), with their trainer YAMLs",
        [command.out_option("the tree shown as /software/cerebras/dataset"),
         ("--datasets-out", {"type": Path, "required": True,
                             "help": "the tree shown as /software/datasets"}),
         ("--prefix", {"default": PREFIX,
                       "help": f"where --out is seen on the cluster (default {PREFIX})"}),
         ("--datasets-prefix", {"default": DATASETS_PREFIX,
                                "help": f"where --datasets-out is seen (default "
                                        f"{DATASETS_PREFIX})"}),
         command.seed_option(SEED)],
        lambda args: [f"{path}: synthetic sample datasets (Release 2.10)" for path in build(
            args.out, args.datasets_out, prefix=args.prefix,
            datasets_prefix=args.datasets_prefix, seed=args.seed)])


if __name__ == "__main__":
    sys.exit(main())
