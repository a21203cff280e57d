"""GPT-J: a decoder-only language model with rotary positions and parallel residual blocks.

The params' model section is the nominal model (GPT-J 6B: hidden 4096, 28 layers,
16 heads, filter 16384, vocabulary 50400, sequence 2048): the emulated wafer
compiles and times that (aitestbed_workload). The network that really trains is
the same architecture at REDUCED size (hidden 32, 2 layers, 2 heads, filter 128, a
vocabulary of 512 ids, rotary over the whole head), on windows of REDUCED_CONTEXT
(64) tokens of the samples, so that 500 steps take well under two minutes. Its loss
(next-token cross entropy) starts near ln(512) and really falls on the sample data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

from modelzoo.common.pytorch.input_utils import input_section

REDUCED = {"vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2,
           "filter_size": 128}
REDUCED_CONTEXT = 64
ROTARY_BASE = 10000.0
INITIALIZER_RANGE = 0.02


def nominal_parameters(model_params: dict) -> tuple[int, int]:
    """(all parameters, largest layer's) of the full-size GPT-J."""
    vocab, hidden = int(model_params["vocab_size"]), int(model_params["hidden_size"])
    layers, ffn = int(model_params["num_hidden_layers"]), int(model_params["filter_size"])
    projection_bias = hidden if model_params.get("use_projection_bias_in_attention") else 0
    ffn_bias = ffn + hidden if model_params.get("use_ffn_bias", True) else 0
    layer = 4 * (hidden * hidden + projection_bias) + 2 * hidden * ffn + ffn_bias + 2 * hidden
    embeddings = vocab * hidden
    output = 0 if model_params.get("share_embedding_weights") else vocab * hidden
    output += vocab if model_params.get("use_bias_in_output") else 0
    return embeddings + layers * layer + 2 * hidden + output, max(vocab * hidden, hidden * ffn)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of (batch, heads, tokens, head_dim), GPT-J's interleaving."""
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class GPTJBlock(nn.Module):
    """x + attention(ln(x)) + mlp(ln(x)): attention and MLP side by side, one layer norm."""

    def __init__(self, hidden: int, heads: int, ffn: int, epsilon: float, dropout: float):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(hidden, eps=epsilon)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.mlp = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                causal: torch.Tensor) -> torch.Tensor:
        batch, tokens, hidden = x.shape
        normed = self.norm(x)
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(normed).chunk(3, dim=-1))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        attention = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        attention = self.out(attention.transpose(1, 2).reshape(batch, tokens, hidden))
        return x + self.dropout(attention) + self.dropout(self.mlp(normed))


class GptjModel(nn.Module):
    """Called on a batch (a dict with input_ids, attention_mask, labels), returns the loss."""

    def __init__(self, params: dict):
        super().__init__()
        model_params = params["model"]
        hidden, heads = REDUCED["hidden_size"], REDUCED["num_heads"]
        epsilon = float(model_params.get("layer_norm_epsilon", 1e-5))
        dropout = float(model_params.get("residual_dropout_rate", 0.0))
        self.embeddings = nn.Embedding(REDUCED["vocab_size"], hidden)
        self.blocks = nn.ModuleList(
            GPTJBlock(hidden, heads, REDUCED["filter_size"], epsilon, dropout)
            for _ in range(REDUCED["num_hidden_layers"]))
        self.final_norm = nn.LayerNorm(hidden, eps=epsilon)
        self.lm_head = nn.Linear(hidden, REDUCED["vocab_size"],
                                 bias=bool(model_params.get("use_bias_in_output", True)))
        half = hidden // heads // 2
        self.register_buffer("inverse_frequencies",
                             ROTARY_BASE ** (-torch.arange(half, dtype=torch.float32) / half),
                             persistent=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=INITIALIZER_RANGE)

    def forward(self, batch: dict) -> torch.Tensor:
        input_ids = batch["input_ids"]
        tokens = input_ids.shape[1]
        angles = torch.arange(tokens, dtype=torch.float32)[:, None] * self.inverse_frequencies
        cos, sin = angles.cos(), angles.sin()
        causal = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x, cos, sin, causal)
        logits = self.lm_head(self.final_norm(x))
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                                    reduction="none")
        weights = batch["attention_mask"].flatten().float()
        return (per_token * weights).sum() / weights.sum().clamp(min=1.0)

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        model_params = params["model"]
        parameters, largest = nominal_parameters(model_params)
        return {"kind": "gptj", "parameters": parameters, "largest_layer_parameters": largest,
                "hidden_size": int(model_params["hidden_size"]),
                "seq_len": int(input_section(params).get("max_sequence_length", 2048))}
