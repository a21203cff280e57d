"""
The following example builds MiniLM v2 (all-MiniLM-L6-v2's architecture: 6 layers, hidden
size 384, 12 heads) with GroqFlow and compares the sentence similarity scores (Spearman rank
correlation with the gold scores) and latency of the GroqChip build and PyTorch on the CPU.

Emulation notes: no model hub and no internet here, so the model is MiniLM's architecture in
plain PyTorch (demo_helpers.models) with BERT's seeded initialization and no training; its
mean-pooled embeddings still track word overlap, which is what the synthetic, deterministic
similarity set (demo_helpers.similarity, a stand-in for stsb_multi_mt) scores.
"""

import os

import numpy as np
import torch
from demo_helpers.args import parse_args
from demo_helpers.compute_performance import Dataset, compute_performance
from demo_helpers.models import SentenceEncoder, minilm_l6_config
from demo_helpers.similarity import cosine, encode_pair, mean_pool, pairs, spearman
from groqflow import groqit

MAX_SEQ_LENGTH = 128
NUM_TEST = int(os.environ.get("MINILM_NUM_TEST", "16"))


def minilm_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return SentenceEncoder(minilm_l6_config()).eval()


def similarity_dataset() -> Dataset:
    test_pairs, gold = pairs(NUM_TEST, seed=3)
    samples, masks = [], []
    for a, b in test_pairs:
        ids, types, mask = encode_pair(a, b, MAX_SEQ_LENGTH)
        samples.append({"input_ids": torch.from_numpy(ids),
                        "token_type_ids": torch.from_numpy(types),
                        "attention_mask": torch.from_numpy(mask)})
        masks.append(mask)

    def postprocess(preds):
        scores = []
        for hidden, mask in zip(preds, masks, strict=True):
            u, v = mean_pool(np.asarray(hidden, dtype=np.float32), mask)
            scores.append(cosine(u, v))
        return np.array(scores)

    def score(pred, y):
        return f"{spearman(pred, y):.4f}"

    return Dataset(samples, gold, postprocess, score)


def evaluate_minilm(rebuild_policy=None, should_execute=True):
    pytorch_model = minilm_model()
    dummy_inputs = {
        "input_ids": torch.ones((2, MAX_SEQ_LENGTH), dtype=torch.long),
        "token_type_ids": torch.ones((2, MAX_SEQ_LENGTH), dtype=torch.long),
        "attention_mask": torch.ones((2, MAX_SEQ_LENGTH), dtype=torch.bool),
    }
    groq_model = groqit(pytorch_model, dummy_inputs, rebuild=rebuild_policy)
    if should_execute:
        compute_performance(groq_model, pytorch_model, similarity_dataset(),
                            task="sentence_similarity")
    print(f"Proof point {__file__} finished!")


if __name__ == "__main__":
    evaluate_minilm(**parse_args())
