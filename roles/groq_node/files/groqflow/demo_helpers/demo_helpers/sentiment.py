"""A small synthetic, deterministic sentence classification set (offline stand-in for SST-2).

Each sentence is [CLS] + 3 to `max_len` - 2 words + [SEP]. The words are filler words and one
or two sentiment keywords of one polarity (from 12 positive and 12 negative keywords); the
label is the keywords' polarity (1: positive). `noise` of the labels (5 % by default) are
flipped on purpose, so a model that learned the keywords scores about 95 %, not 100 %, and
one that did not scores about 50 %.
"""

from __future__ import annotations

import numpy as np

PAD, CLS, SEP = 0, 101, 102
POSITIVE = list(range(3000, 3012))
NEGATIVE = list(range(4000, 4012))
FILLER = list(range(5000, 5200))


def sentences(n: int, seed: int, max_len: int = 8, noise: float = 0.05):
    """`n` token id lists (each at most `max_len` long) and their labels (int64 array)."""
    rng = np.random.default_rng(seed)
    ids, labels = [], []
    for _ in range(n):
        length = int(rng.integers(3, max_len - 1))
        words = [int(w) for w in rng.choice(FILLER, length)]
        label = int(rng.random() < 0.5)
        keywords = POSITIVE if label else NEGATIVE
        for pos in rng.choice(length, int(rng.integers(1, 3)), replace=False):
            words[pos] = int(rng.choice(keywords))
        if rng.random() < noise:
            label = 1 - label
        ids.append([CLS, *words, SEP])
        labels.append(label)
    return ids, np.array(labels, dtype=np.int64)


def encode(ids: list[list[int]], seq_len: int):
    """(input_ids, attention_mask) as int64 arrays (n, seq_len), zero-padded."""
    x = np.zeros((len(ids), seq_len), dtype=np.int64)
    mask = np.zeros_like(x)
    for i, row in enumerate(ids):
        x[i, :len(row)] = row
        mask[i, :len(row)] = 1
    return x, mask
