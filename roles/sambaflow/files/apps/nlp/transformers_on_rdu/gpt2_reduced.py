# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""GPT-2 for causal language modelling, and the reduced size the emulator trains.

The configuration file (`--config_name`, e.g. gpt2_config_xl_50260.json: 48
layers, width 1600, 25 heads, vocabulary 50,260, 1,024 positions) gives the
nominal model: its parameter count times the timing model's, and what the PEF
records. The model trained has the same architecture (token and position
embeddings, pre-LayerNorm blocks of causal self-attention and a GELU MLP, a
final LayerNorm, the output layer tied to the token embedding, initialised
N(0, 0.02) as GPT-2) at REDUCED size, so that a step takes milliseconds on a
CPU: 2 layers of width 64 with 4 heads, sequences of 32 tokens, and the
vocabulary trimmed to 512 ids (the synthetic corpus uses fewer).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812 - torch's convention

REDUCED = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 32, "vocab_size": 512}
# The reduced model trains with this multiple of the given learning rate: a narrow
# model takes larger Adam steps (the step size scales inversely with width), and so
# learns in the hundred steps of a documented run what the full model learns in more.
LR_SCALE = 12.0


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class GPT2Config:
    n_layer: int
    n_embd: int
    n_head: int
    n_positions: int
    vocab_size: int
    layer_norm_epsilon: float = 1e-5

    @classmethod
    def from_file(cls, path: str | Path) -> GPT2Config:
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"--config_name {path}: no such file") from None
        except (OSError, json.JSONDecodeError) as err:
            raise ConfigError(f"--config_name {path}: not a JSON configuration: {err}") from None
        try:
            return cls(n_layer=int(raw["n_layer"]), n_embd=int(raw["n_embd"]),
                       n_head=int(raw["n_head"]),
                       n_positions=int(raw.get("n_positions", raw.get("n_ctx", 1024))),
                       vocab_size=int(raw["vocab_size"]),
                       layer_norm_epsilon=float(raw.get("layer_norm_epsilon", 1e-5)))
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"--config_name {path}: missing or bad field {err}") from None

    def parameters(self) -> int:
        """Embeddings, blocks (attention, MLP, two LayerNorms), the final LayerNorm."""
        d = self.n_embd
        return (self.vocab_size + self.n_positions) * d + self.n_layer * (12 * d * d + 13 * d) \
            + 2 * d

    def reduced(self, seq_len: int) -> GPT2Config:
        return GPT2Config(n_layer=min(self.n_layer, REDUCED["n_layer"]),
                          n_embd=REDUCED["n_embd"], n_head=REDUCED["n_head"],
                          n_positions=min(seq_len, REDUCED["n_positions"]),
                          vocab_size=min(self.vocab_size, REDUCED["vocab_size"]),
                          layer_norm_epsilon=self.layer_norm_epsilon)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        length = config.n_positions
        self.register_buffer("bias", torch.triu(torch.full((length, length), float("-inf")), 1),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        heads = self.n_head
        q, k, v = self.c_attn(x).view(batch, length, 3, heads, width // heads) \
            .permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(width // heads)
        scores = scores + self.bias[:length, :length]
        y = scores.softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    """forward(input_ids, labels) -> (loss, logits); the loss predicts token t+1 from 0..t."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        length = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe.weight[:length]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               labels[:, 1:].reshape(-1))
        return loss, logits
