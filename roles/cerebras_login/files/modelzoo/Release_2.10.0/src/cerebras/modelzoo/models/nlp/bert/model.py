"""BERT pre-training: masked language model and next-sentence prediction.

The config's model section is the nominal model (BERT-large: hidden 1024, 24 layers,
16 heads, filter 4096, vocabulary 30522): the emulated wafer compiles and times
that (aitestbed_workload). The network that really trains is the same architecture
(post-norm encoder, learned positions and token types) at reduced size
(cerebras.modelzoo.layers.reduced) with 512 token ids, on the CSV samples of
cerebras.modelzoo.data.nlp.bert.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from cerebras.modelzoo.data.nlp.bert import REDUCED_VOCAB
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

TYPE_VOCAB_SIZE = 2


def nominal_parameters(model: dict) -> tuple[int, int]:
    vocab, hidden = int(model.get("vocab_size", 30522)), int(model["hidden_size"])
    heads = 2 * (hidden * hidden + hidden) + 2 * hidden + vocab + 2 * hidden + 2
    return transformer_parameters(
        vocab=vocab, hidden=hidden, layers=int(model["num_hidden_layers"]),
        ffn=int(model["filter_size"]),
        positions=int(model.get("max_position_embeddings", 512)) + TYPE_VOCAB_SIZE,
        extra=heads)


class BertPretrainModel(nn.Module):
    def __init__(self, params: dict):
        super().__init__()
        model = params["model"]
        hidden, eps = REDUCED["hidden_size"], float(model.get("layer_norm_epsilon", 1e-12))
        self.disable_nsp = bool(model.get("disable_nsp", False))
        self.words = nn.Embedding(REDUCED_VOCAB, hidden)
        self.positions = nn.Embedding(int(model.get("max_position_embeddings", 512)), hidden)
        self.types = nn.Embedding(TYPE_VOCAB_SIZE, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(float(model.get("dropout_rate", 0.1)))
        self.blocks = blocks(eps=eps, layout="post")
        self.mlm_transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                           nn.LayerNorm(hidden, eps=eps))
        self.mlm_bias = nn.Parameter(torch.zeros(REDUCED_VOCAB))
        self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        self.nsp_head = nn.Linear(hidden, 2)
        self.apply(initialize)

    def forward(self, batch: dict):
        ids = batch["input_ids"]
        x = (self.words(ids) + self.positions(torch.arange(ids.shape[1]))
             + self.types(batch["token_type_ids"]))
        x = self.dropout(self.embedding_norm(x))
        mask = padding_mask(batch["attention_mask"])
        for block in self.blocks:
            x = block(x, mask)
        index = batch["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, x.shape[-1])
        logits = self.mlm_transform(x.gather(1, index)) @ self.words.weight.T + self.mlm_bias
        weights = batch["masked_lm_weights"]
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["masked_lm_ids"].flatten(),
                                    reduction="none")
        mlm_loss = masked_mean(per_token, weights)
        loss = mlm_loss
        nsp_logits = self.nsp_head(self.pooler(x[:, 0]))
        if not self.disable_nsp:
            loss = loss + F.cross_entropy(nsp_logits, batch["next_sentence_label"])
        if self.training:
            return loss
        hits = (logits.argmax(-1) == batch["masked_lm_ids"]).float()
        return loss, {
            "accuracy_cls": (nsp_logits.argmax(-1) == batch["next_sentence_label"]).float().mean(),
            "accuracy_masked_lm": masked_mean(hits, weights), "mlm_loss": mlm_loss}

    @staticmethod
    def eval_metrics(average_loss: float, averages: dict) -> dict:
        return {"eval/accuracy_cls": averages["accuracy_cls"],
                "eval/accuracy_masked_lm": averages["accuracy_masked_lm"],
                "eval/mlm_perplexity": math.exp(min(averages["mlm_loss"], 50.0))}

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        return nominal_workload("bert", params, nominal_parameters, 128, positions=False)
