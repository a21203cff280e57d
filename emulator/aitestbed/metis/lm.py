"""A tiny decoder-only transformer in torch, and its token-by-token generation.

Our own model, trained by aitestbed.metis.train: learned positions, pre-norm blocks
(causal self-attention, a GELU MLP), the output head tied to the token embedding. It
runs on torch 1.13 (the nodes' Debian torch): attention is written out, no
scaled_dot_product_attention. `generate` keeps each layer's keys and values (a KV
cache), so a token costs one position's arithmetic; a prompt longer than the model's
window is cut to its last tokens (the served context length is the gateway's, see
aitestbed.metis.config), and a generation that fills the window starts again from
its second half.

Sampling: temperature 0 is greedy; otherwise the logits divided by the temperature,
cut to the smallest set of tokens whose probability reaches `top_p`, drawn with a
torch.Generator seeded by the request's seed (same seed, same request: same text).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - torch's own name

from aitestbed.metis.bpe import ByteBPE

WEIGHTS, TOKENIZER, MODEL_JSON = "weights.pt", "tokenizer.json", "model.json"
LICENCE = "trained by aitestbed on its own documentation"


class ModelError(RuntimeError):
    pass


@dataclass(frozen=True)
class LMConfig:
    vocab_size: int
    window: int = 256  # positions the model sees at once
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ModelError("d_model must be a multiple of n_heads")


class Block(nn.Module):
    def __init__(self, c: LMConfig):
        super().__init__()
        self.heads = c.n_heads
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.up = nn.Linear(c.d_model, c.d_ff)
        self.down = nn.Linear(c.d_ff, c.d_model)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if length > 1:  # causal: the new positions see the past and what precedes them
            total = k.shape[2]
            mask = torch.ones(length, total, dtype=torch.bool).tril(total - length)
            scores = scores.masked_fill(~mask, float("-inf"))
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, length, width)
        x = x + self.proj(attended)
        x = x + self.down(F.gelu(self.up(self.ln2(x))))
        return x, (k, v)


class TinyLM(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = nn.Embedding(config.window, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        nn.init.normal_(self.tokens.weight, std=0.02)
        nn.init.normal_(self.positions.weight, std=0.01)

    def forward(self, ids: torch.Tensor, past: list | None = None, start: int = 0
                ) -> tuple[torch.Tensor, list]:
        positions = torch.arange(start, start + ids.shape[1])
        x = self.tokens(ids) + self.positions(positions)
        present = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, past[i] if past else None)
            present.append(kv)
        return self.ln_f(x) @ self.tokens.weight.t(), present

    def parameters_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def sample(logits: torch.Tensor, temperature: float, top_p: float,
           generator: torch.Generator) -> int:
    """One token from the last position's logits (pure but for the generator)."""
    if temperature <= 1e-5:
        return int(logits.argmax())
    probs = (logits / temperature).softmax(dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        keep = sorted_probs.cumsum(0) - sorted_probs < top_p
        keep[0] = True
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def generate(model: TinyLM, prompt: list[int], *, max_tokens: int, temperature: float = 1.0,
             top_p: float = 1.0, seed: int | None = None, end_ids: frozenset[int] = frozenset()
             ) -> Iterator[int]:
    """Yield up to `max_tokens` new tokens after `prompt`; an id in `end_ids` ends the
    generation and is not yielded. Closing the iterator stops the work."""
    window = model.config.window
    generator = torch.Generator().manual_seed(
        seed if seed is not None else int.from_bytes(os.urandom(6), "little"))
    context = list(prompt[-(window - 1):]) or [0]
    logits, past = model(torch.tensor([context]))
    position = len(context)
    for _ in range(max_tokens):
        token = sample(logits[0, -1], temperature, top_p, generator)
        if token in end_ids:
            return
        yield token
        context.append(token)
        if position >= window:  # the window is full: start again from its second half
            context = context[-(window // 2):]
            logits, past = model(torch.tensor([context]))
            position = len(context)
        else:
            logits, past = model(torch.tensor([[token]]), past, start=position)
            position += 1


@dataclass
class LoadedModel:
    """A trained model as a directory holds it: weights, tokenizer, description."""

    lm: TinyLM
    tokenizer: ByteBPE
    info: dict
    path: Path


def save(directory: Path, lm: TinyLM, tokenizer: ByteBPE, info: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(lm.state_dict(), directory / WEIGHTS)
    tokenizer.save(directory / TOKENIZER)
    description = {**info, "config": asdict(lm.config), "context_length": lm.config.window,
                   "parameters": lm.parameters_count(), "licence": LICENCE}
    (directory / MODEL_JSON).write_text(json.dumps(description, indent=2) + "\n")


def load(directory: Path) -> LoadedModel:
    """The model trained into `directory`; ModelError (one line) when it cannot be read."""
    directory = Path(directory)
    try:
        info = json.loads((directory / MODEL_JSON).read_text())
        config = LMConfig(**info["config"])
        tokenizer = ByteBPE.load(directory / TOKENIZER)
        lm = TinyLM(config)
        lm.load_state_dict(torch.load(directory / WEIGHTS, map_location="cpu"))
    except FileNotFoundError as err:
        raise ModelError(f"no trained model in {directory}: {err.filename} is missing "
                         "(train one: python -m aitestbed.metis.train)") from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ModelError(f"cannot load the model in {directory}: "
                         f"{str(err).splitlines()[0]}") from None
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelError(f"{directory}: the tokenizer has {tokenizer.vocab_size} ids, the "
                         f"weights {config.vocab_size}")
    lm.eval()
    return LoadedModel(lm, tokenizer, info, directory)
