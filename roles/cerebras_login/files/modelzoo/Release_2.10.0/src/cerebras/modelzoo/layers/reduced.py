"""The transformer pieces of the reduced-scale example models (hidden 32, 2 layers).

Each example model's config names the full-size model; the emulated wafer compiles
and times that (the model's aitestbed_workload), while the network that really
trains is its architecture at REDUCED size, built from these pieces: attention
(causal or not, with rotary positions or none), a pre-norm or post-norm block
with LayerNorm or RMSNorm, a GELU or SwiGLU MLP, attention and MLP in sequence or
side by side (GPT-J). Small enough that a documented run's hundreds of steps take
seconds on one CPU core.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

REDUCED = {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "filter_size": 128}
ROTARY_BASE = 10000.0
INITIALIZER_RANGE = 0.02


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def norm(kind: str, hidden: int, eps: float) -> nn.Module:
    return RMSNorm(hidden, eps) if kind == "rmsnorm" else nn.LayerNorm(hidden, eps=eps)


def rotary(tokens: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, (tokens, head_dim / 2)."""
    inverse = 1.0 / ROTARY_BASE ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.arange(tokens).float()[:, None] * inverse[None, :]
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of (batch, heads, tokens, head_dim), pairs interleaved."""
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, ffn: int, bias: bool):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=bias)
        self.up = nn.Linear(hidden, ffn, bias=bias)
        self.down = nn.Linear(ffn, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """One transformer layer.

    pre-norm: x + attn(norm(x)), then + mlp(norm(.)); post-norm (BERT): norm(x + attn(x)),
    then norm(. + mlp(.)); parallel (GPT-J): x + attn(norm(x)) + mlp(norm(x)).
    """

    def __init__(self, *, hidden: int, heads: int, ffn: int, eps: float = 1e-5,
                 norm_type: str = "layernorm", mlp: str = "gelu", bias: bool = True,
                 layout: str = "pre", use_rotary: bool = False):
        super().__init__()
        self.heads, self.layout, self.use_rotary = heads, layout, use_rotary
        self.norm1 = norm(norm_type, hidden, eps)
        self.norm2 = None if layout == "parallel" else norm(norm_type, hidden, eps)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=bias)
        self.out = nn.Linear(hidden, hidden, bias=bias)
        self.mlp = (SwiGLU(hidden, ffn, bias) if mlp == "swiglu" else
                    nn.Sequential(nn.Linear(hidden, ffn, bias=bias), nn.GELU(),
                                  nn.Linear(ffn, hidden, bias=bias)))

    def attention(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, tokens, hidden = x.shape
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        if self.use_rotary:
            cos, sin = rotary(tokens, q.shape[-1])
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        attended = scores.softmax(-1) @ v
        return self.out(attended.transpose(1, 2).reshape(batch, tokens, hidden))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.layout == "post":
            x = self.norm1(x + self.attention(x, mask))
            return self.norm2(x + self.mlp(x))
        if self.layout == "parallel":
            normed = self.norm1(x)
            return x + self.attention(normed, mask) + self.mlp(normed)
        x = x + self.attention(self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


def blocks(**kwargs) -> nn.ModuleList:
    return nn.ModuleList(Block(hidden=REDUCED["hidden_size"], heads=REDUCED["num_heads"],
                               ffn=REDUCED["filter_size"], **kwargs)
                         for _ in range(REDUCED["num_hidden_layers"]))


def causal_mask(tokens: int) -> torch.Tensor:
    """True above the diagonal: the positions a token may not attend to."""
    return torch.ones(tokens, tokens, dtype=torch.bool).triu(1)


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(batch, 1, 1, tokens): True where a key is padding."""
    return (attention_mask == 0)[:, None, None, :]


def initialize(module: nn.Module) -> None:
    """N(0, 0.02) weights, zero biases (the modelzoo's default initializer)."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=INITIALIZER_RANGE)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    weights = weights.flatten().float()
    return (values.flatten() * weights).sum() / weights.sum().clamp(min=1.0)


def transformer_parameters(*, vocab: int, hidden: int, layers: int, ffn: int,
                           positions: int = 0, attention_bias: bool = True,
                           ffn_bias: bool = True, gated: bool = False, norms: int = 2,
                           norm_bias: bool = True, tied: bool = True,
                           extra: int = 0) -> tuple[int, int]:
    """(all parameters, largest layer's) of a full-size transformer of that shape."""
    attention = 4 * hidden * hidden + (4 * hidden if attention_bias else 0)
    mlp = (3 if gated else 2) * hidden * ffn + ((ffn + hidden) if ffn_bias else 0)
    layer = attention + mlp + norms * hidden * (2 if norm_bias else 1)
    embeddings = vocab * hidden + positions * hidden
    output = 0 if tied else vocab * hidden
    total = embeddings + layers * layer + hidden * (2 if norm_bias else 1) + output + extra
    return total, max(vocab * hidden, hidden * ffn, 1)


def lm_metrics(average_loss: float, averages: dict) -> dict:
    """A language model's evaluation metrics, as the release names them."""
    import math

    return {"eval/lm_perplexity": math.exp(min(average_loss, 50.0)),
            "eval/accuracy": averages["accuracy"]}


class CausalLM(nn.Module):
    """A decoder-only language model at reduced size (GPT-J's and Llama's shape).

    Called on a batch (input_ids, attention_mask, labels): the loss when training;
    (loss, {"accuracy": token accuracy}) in eval mode.
    """

    def __init__(self, vocab: int, *, learned_positions: int = 0, tied: bool = False,
                 **block):
        super().__init__()
        hidden = REDUCED["hidden_size"]
        self.embeddings = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(learned_positions, hidden) if learned_positions else None
        self.blocks = blocks(**block)
        self.final_norm = norm(block.get("norm_type", "layernorm"), hidden,
                               block.get("eps", 1e-5))
        self.lm_head = None if tied else nn.Linear(hidden, vocab, bias=False)
        self.apply(initialize)

    def forward(self, batch: dict):
        ids = batch["input_ids"]
        x = self.embeddings(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(ids.shape[1]))
        mask = causal_mask(ids.shape[1])
        for block in self.blocks:
            x = block(x, mask)
        x = self.final_norm(x)
        logits = x @ self.embeddings.weight.T if self.lm_head is None else self.lm_head(x)
        weights = batch["attention_mask"]
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                                    reduction="none")
        loss = masked_mean(per_token, weights)
        if self.training:
            return loss
        hits = (logits.argmax(-1) == batch["labels"]).float()
        return loss, {"accuracy": masked_mean(hits, weights)}


def nominal_workload(kind: str, params: dict, parameters_fn, default_seq_len: int,
                     positions: bool = True) -> dict:
    """The emulated wafer's view of a full-size language model (aitestbed_workload): its
    parameters and largest layer (parameters_fn of the model section), its hidden size and
    its sequence length (the dataloader's max_sequence_length, else with positions the
    model's max_position_embeddings, else default_seq_len)."""
    model = params["model"]
    parameters, largest = parameters_fn(model)
    section = params.get("train_input") or params.get("eval_input") or {}
    seq_len = section.get("max_sequence_length") or (
        model.get("max_position_embeddings") if positions else None) or default_seq_len
    return {"kind": kind, "parameters": parameters, "largest_layer_parameters": largest,
            "hidden_size": int(model["hidden_size"]), "seq_len": int(seq_len)}
