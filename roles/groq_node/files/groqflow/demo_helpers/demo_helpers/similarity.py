"""A small synthetic, deterministic sentence similarity set (offline stand-in for STS-B,
`stsb_multi_mt`), scored like sentence-transformers: cosine similarity of mean-pooled token
embeddings, compared with the gold scores by Spearman's rank correlation.

Sentence B of a pair is sentence A with k of its n words replaced by other words; the gold
score is 5 * (1 - k / n) on STS-B's 0-5 scale, so word overlap decides the similarity.
"""

from __future__ import annotations

import numpy as np

CLS, SEP = 101, 102
WORDS = list(range(5000, 7000))


def pairs(n: int, seed: int, min_words: int = 6, max_words: int = 14):
    """`n` (ids_a, ids_b) pairs of token id lists and their gold scores (float array)."""
    rng = np.random.default_rng(seed)
    out, gold = [], []
    for _ in range(n):
        length = int(rng.integers(min_words, max_words + 1))
        a = [int(w) for w in rng.choice(WORDS, length, replace=False)]
        k = int(rng.integers(0, length + 1))
        b = list(a)
        for pos in rng.choice(length, k, replace=False):
            b[pos] = int(rng.choice(WORDS))
        out.append(([CLS, *a, SEP], [CLS, *b, SEP]))
        gold.append(5.0 * (1 - k / length))
    return out, np.array(gold)


def encode_pair(a: list[int], b: list[int], seq_len: int):
    """input_ids, token_type_ids (int64) and attention_mask (bool), each (2, seq_len)."""
    ids = np.zeros((2, seq_len), dtype=np.int64)
    for row, tokens in enumerate((a, b)):
        ids[row, :len(tokens)] = tokens
    return ids, np.zeros_like(ids), ids != 0


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling: (batch, seq, dim) -> (batch, dim)."""
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v) + 1e-12))


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    for value in np.unique(x):  # ties share their average rank
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x, y) -> float:
    """Spearman's rank correlation coefficient (scipy.stats.spearmanr's statistic)."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / np.sqrt((rx * rx).sum() * (ry * ry).sum()))
