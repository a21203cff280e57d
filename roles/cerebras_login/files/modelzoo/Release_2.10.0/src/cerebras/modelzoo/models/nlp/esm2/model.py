"""ESM-2: a protein language model, an encoder with rotary positions trained by masked
language modelling (Meta FAIR's ESM-2, t12 35M).

The config's model section is the nominal model (esm2_t12_35M_UR50D: hidden 480, 12
layers, 20 heads, filter 1920, the 33-token alphabet, 1026 positions): the emulated
wafer compiles and times that (aitestbed_workload). The network that really trains
is the same architecture (pre-norm, rotary) at reduced size
(cerebras.modelzoo.layers.reduced) on windows of 64 residues
(cerebras.modelzoo.data.nlp.esm2).
"""

from __future__ import annotations

import math

import torch.nn.functional as F  # noqa: N812 - torch's own convention
from cerebras.modelzoo.data.nlp.esm2 import TOKENS
from cerebras.modelzoo.layers.reduced import (
    REDUCED,
    blocks,
    initialize,
    masked_mean,
    nominal_workload,
    padding_mask,
    transformer_parameters,
)
from torch import nn


def nominal_parameters(model: dict) -> tuple[int, int]:
    hidden = int(model["hidden_size"])
    return transformer_parameters(
        vocab=int(model.get("vocab_size", 33)), hidden=hidden,
        layers=int(model["num_hidden_layers"]), ffn=int(model["filter_size"]),
        extra=hidden * hidden + 3 * hidden + int(model.get("vocab_size", 33)))


class Esm2Model(nn.Module):
    def __init__(self, params: dict):
        super().__init__()
        model = params["model"]
        hidden, eps = REDUCED["hidden_size"], float(model.get("layer_norm_epsilon", 1e-5))
        self.embeddings = nn.Embedding(len(TOKENS), hidden)
        self.blocks = blocks(eps=eps, use_rotary=True)
        self.final_norm = nn.LayerNorm(hidden, eps=eps)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                  nn.LayerNorm(hidden, eps=eps))
        self.apply(initialize)

    def forward(self, batch: dict):
        x = self.embeddings(batch["input_ids"])
        mask = padding_mask(batch["attention_mask"])
        for block in self.blocks:
            x = block(x, mask)
        logits = self.head(self.final_norm(x)) @ self.embeddings.weight.T
        weights = batch["masked_lm_mask"]
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                                    reduction="none")
        loss = masked_mean(per_token, weights)
        if self.training:
            return loss
        hits = (logits.argmax(-1) == batch["labels"]).float()
        return loss, {"accuracy_masked_lm": masked_mean(hits, weights)}

    @staticmethod
    def eval_metrics(average_loss: float, averages: dict) -> dict:
        return {"eval/accuracy_masked_lm": averages["accuracy_masked_lm"],
                "eval/mlm_perplexity": math.exp(min(average_loss, 50.0))}

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        return nominal_workload("esm2", params, nominal_parameters, 1026, positions=False)
