"""Plain-PyTorch transformer encoders with the BERT/MiniLM architecture.

There is no Hugging Face hub here (the cluster is offline), so the proof points build
these models from their published configurations and train them on the CPU.
    bert_tiny_config(): 2 layers, hidden 128, 2 heads, FFN 512 (google/bert_uncased_L-2_H-128_A-2)
    minilm_l6_config(): 6 layers, hidden 384, 12 heads, FFN 1536 (all-MiniLM-L6-v2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class EncoderConfig:
    vocab_size: int = 30522
    hidden: int = 128
    layers: int = 2
    heads: int = 2
    ffn: int = 512
    max_positions: int = 512
    type_vocab: int = 2
    num_labels: int = 2


def bert_tiny_config(**kw) -> EncoderConfig:
    return EncoderConfig(hidden=128, layers=2, heads=2, ffn=512, **kw)


def minilm_l6_config(**kw) -> EncoderConfig:
    return EncoderConfig(hidden=384, layers=6, heads=12, ffn=1536, **kw)


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT's initialization (HF BertPreTrainedModel._init_weights): N(0, 0.02) weights,
    zero biases, unit LayerNorms. PyTorch's defaults (N(0, 1) embeddings) train far slower."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class _Layer(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.heads, self.head_dim = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_norm = nn.LayerNorm(c.hidden, eps=1e-12)
        self.intermediate = nn.Linear(c.hidden, c.ffn)
        self.output = nn.Linear(c.ffn, c.hidden)
        self.out_norm = nn.LayerNorm(c.hidden, eps=1e-12)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + mask_bias
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.transpose(1, 2).reshape(b, s, h)
        x = self.attn_norm(x + self.attn_out(context))
        return self.out_norm(x + self.output(nn.functional.gelu(self.intermediate(x))))


class Encoder(nn.Module):
    """Embeddings and transformer layers; returns the last hidden state (batch, seq, hidden)."""

    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.norm = nn.LayerNorm(c.hidden, eps=1e-12)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.layers))
        self.apply(init_weights)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        types = token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)
        x = self.norm(self.word(input_ids) + self.position(positions) + self.token_type(types))
        mask_bias = (1.0 - attention_mask.to(x.dtype))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x


class SequenceClassifier(nn.Module):
    """BERT for sequence classification: pooled [CLS] -> logits."""

    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.encoder = Encoder(c)
        self.pooler = nn.Linear(c.hidden, c.hidden)
        self.classifier = nn.Linear(c.hidden, c.num_labels)
        self.pooler.apply(init_weights)
        self.classifier.apply(init_weights)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.encoder(input_ids, attention_mask, token_type_ids)
        return self.classifier(torch.tanh(self.pooler(hidden[:, 0])))


class SentenceEncoder(nn.Module):
    """MiniLM as sentence-transformers uses it: returns the last hidden state."""

    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.encoder = Encoder(c)

    def forward(self, input_ids, token_type_ids, attention_mask):
        return self.encoder(input_ids, attention_mask, token_type_ids)
