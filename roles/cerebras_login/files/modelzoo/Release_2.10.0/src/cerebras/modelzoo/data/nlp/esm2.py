"""Protein sequences for ESM-2 masked language modelling (ESM2NpyDataProcessor).

data_dir holds *.npy arrays of shape (sequences, max_sequence_length) uint8 in the
ESM-2 alphabet (TOKENS: <cls> sequence <eos>, then <pad>), the preprocessed
UniRef50 stand-in at /software/datasets/ESM-2. The processor masks dynamically, as
BERT-style pre-training does: mlm_fraction (15 %) of the residues, 80 % of them
replaced by <mask>, 10 % by a random residue, 10 % kept; every epoch masks anew
(the dataloader's shuffle_seed and the epoch seed it). The reduced model reads
windows of REDUCED_CONTEXT tokens (those with residues to mask).
"""

from __future__ import annotations

import numpy as np
import torch
from cerebras.modelzoo.data.common import data_files

TOKENS = ("<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I",
          "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O",
          ".", "-", "<null_1>", "<mask>")
CLS, PAD, EOS, MASK = 0, 1, 2, 32
RESIDUES = range(4, 24)
REDUCED_CONTEXT = 64


class ESM2NpyDataProcessor(torch.utils.data.Dataset):
    def __init__(self, config: dict, params: dict):
        data_dir = str(config["data_dir"])
        msl = int(config.get("max_sequence_length", 1026))
        data = np.concatenate([np.load(name) for name in
                               data_files(data_dir, ".npy", "ESM-2 token data")])
        if data.ndim != 2 or data.shape[1] != msl:
            raise ValueError(f"The arrays in {data_dir!r} have shape {data.shape[1:]} per "
                             f"sequence, expected ({msl},).")
        if int(data.max()) >= len(TOKENS):
            raise ValueError(f"Token ids in {data_dir!r} are outside the ESM-2 alphabet of "
                             f"{len(TOKENS)} tokens.")
        windows = msl // REDUCED_CONTEXT
        cut = data[:, :windows * REDUCED_CONTEXT].reshape(-1, REDUCED_CONTEXT).astype(np.int64)
        residues = ((cut >= RESIDUES.start) & (cut < RESIDUES.stop)).sum(axis=1)
        self.tokens = torch.from_numpy(cut[residues >= 8])  # not the padding at the ends
        self.fraction = float(config.get("mlm_fraction", 0.15))
        self.seed = int(config.get("shuffle_seed") or 0)
        self.served = 0

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict:
        epoch = self.served // len(self.tokens)
        self.served += 1
        rng = np.random.default_rng([self.seed, epoch, index])
        tokens = self.tokens[index].clone()
        residue = (tokens >= RESIDUES.start) & (tokens < RESIDUES.stop)
        chosen = torch.from_numpy(rng.random(len(tokens)) < self.fraction) & residue
        labels = tokens.clone()
        draw = torch.from_numpy(rng.random(len(tokens)))
        tokens[chosen & (draw < 0.8)] = MASK
        swap = chosen & (draw >= 0.8) & (draw < 0.9)
        tokens[swap] = torch.from_numpy(
            rng.integers(RESIDUES.start, RESIDUES.stop, len(tokens)))[swap]
        return {"input_ids": tokens, "attention_mask": (labels != PAD).long(),
                "labels": labels, "masked_lm_mask": chosen.long()}
