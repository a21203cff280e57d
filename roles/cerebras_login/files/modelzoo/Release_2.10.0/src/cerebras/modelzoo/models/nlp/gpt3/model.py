"""GPT-3 (the Cerebras-GPT family): a decoder-only transformer with learned positions.

The config's model section is the nominal model (Cerebras-GPT 111M: hidden 768, 10
layers, 12 heads, filter 3072, vocabulary 50257, 2048 positions): the emulated wafer
compiles and times that (aitestbed_workload). The network that really trains is the
same architecture at REDUCED size (hidden 32, 2 layers, 2 heads, filter 128, 512
token ids) on windows of 64 tokens (cerebras.modelzoo.data.nlp.gpt), so that a
400-step run takes seconds. Its loss (next-token cross entropy) starts near ln(512)
and really falls on the sample data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from cerebras.modelzoo.data.nlp.gpt import REDUCED_CONTEXT, REDUCED_VOCAB
from cerebras.modelzoo.layers.reduced import lm_metrics, nominal_workload
from torch import nn

REDUCED = {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "filter_size": 128}


def nominal_parameters(model: dict) -> tuple[int, int]:
    """(all parameters, largest layer's) of the full-size model."""
    vocab, hidden = int(model["vocab_size"]), int(model["hidden_size"])
    layers, ffn = int(model["num_hidden_layers"]), int(model["filter_size"])
    positions = int(model.get("max_position_embeddings", 2048))
    attention_bias = 4 * hidden if model.get("use_projection_bias_in_attention", True) else 0
    ffn_bias = ffn + hidden if model.get("use_ffn_bias", True) else 0
    layer = 4 * hidden * hidden + attention_bias + 2 * hidden * ffn + ffn_bias + 4 * hidden
    embeddings = vocab * hidden + (positions * hidden
                                   if model.get("position_embedding_type", "learned") == "learned"
                                   else 0)
    output = 0 if model.get("share_embedding_weights", True) else vocab * hidden
    return embeddings + layers * layer + 2 * hidden + output, max(vocab * hidden, hidden * ffn)


class Block(nn.Module):
    """x + attention(ln(x)), then + mlp(ln(.)): GPT-2/3's pre-norm block."""

    def __init__(self, hidden: int, heads: int, ffn: int, epsilon: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, eps=epsilon)
        self.norm2 = nn.LayerNorm(hidden, eps=epsilon)
        self.qkv, self.out = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))

    def forward(self, x: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
        batch, tokens, hidden = x.shape
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        attention = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        x = x + self.out(attention.transpose(1, 2).reshape(batch, tokens, hidden))
        return x + self.mlp(self.norm2(x))


class Gpt3Model(nn.Module):
    """Called on a batch (input_ids, attention_mask, labels): the loss when training;
    (loss, {"accuracy": token accuracy}) in eval mode."""

    def __init__(self, params: dict):
        super().__init__()
        model = params["model"]
        hidden, epsilon = REDUCED["hidden_size"], float(model.get("layer_norm_epsilon", 1e-5))
        self.embeddings = nn.Embedding(REDUCED_VOCAB, hidden)
        self.positions = nn.Embedding(REDUCED_CONTEXT, hidden)
        self.blocks = nn.ModuleList(Block(hidden, REDUCED["num_heads"], REDUCED["filter_size"],
                                          epsilon) for _ in range(REDUCED["num_hidden_layers"]))
        self.final_norm = nn.LayerNorm(hidden, eps=epsilon)
        self.share = bool(model.get("share_embedding_weights", True))
        self.lm_head = None if self.share else nn.Linear(hidden, REDUCED_VOCAB, bias=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, batch: dict):
        ids = batch["input_ids"]
        tokens = ids.shape[1]
        causal = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)
        x = self.embeddings(ids) + self.positions(torch.arange(tokens))
        for block in self.blocks:
            x = block(x, causal)
        x = self.final_norm(x)
        logits = x @ self.embeddings.weight.T if self.share else self.lm_head(x)
        weights = batch["attention_mask"].flatten().float()
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                                    reduction="none")
        loss = (per_token * weights).sum() / weights.sum().clamp(min=1.0)
        if self.training:
            return loss
        hits = (logits.argmax(-1).flatten() == batch["labels"].flatten()).float()
        return loss, {"accuracy": (hits * weights).sum() / weights.sum().clamp(min=1.0)}

    eval_metrics = staticmethod(lm_metrics)

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        return nominal_workload("gpt3", params, nominal_parameters, 2048)
