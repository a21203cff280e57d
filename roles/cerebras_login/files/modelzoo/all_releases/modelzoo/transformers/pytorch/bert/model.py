"""BERT pre-training (masked language model and next-sentence prediction).

The params' model section is the nominal model (BERT-large: hidden 1024, 24 layers,
16 heads, filter 4096, vocabulary 30522): the emulated wafer compiles and times that
(aitestbed_workload). The network that really trains, on the CPU of the login node
or of the appliance's worker, is the same architecture at REDUCED size (hidden 32,
2 layers, 2 heads, filter 128, a vocabulary of 512 ids), at the params' sequence
length, so that 1,000 steps take well under two minutes. Its loss (masked-LM cross
entropy plus next-sentence cross entropy) starts near ln(512) + ln(2) and really
falls on the sample dataset.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

from modelzoo.common.pytorch.input_utils import input_section

REDUCED = {"vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2,
           "filter_size": 128}
TYPE_VOCAB_SIZE = 2
INITIALIZER_RANGE = 0.02


def nominal_parameters(model_params: dict) -> tuple[int, int]:
    """(all parameters, largest layer's) of the full-size BERT with its heads."""
    vocab, hidden = int(model_params.get("vocab_size", 30522)), int(model_params["hidden_size"])
    layers, ffn = int(model_params["num_hidden_layers"]), int(model_params["filter_size"])
    positions = int(model_params.get("max_position_embeddings", 512))
    embeddings = (vocab + positions + TYPE_VOCAB_SIZE) * hidden + 2 * hidden
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden * ffn + ffn + hidden + 4 * hidden
    heads = (hidden * hidden + hidden) * 2 + 2 * hidden + vocab + 2 * hidden + 2
    return embeddings + layers * layer + heads, vocab * hidden


class BertPretrainModel(nn.Module):
    """Called on a batch of the BERT CSV data (a dict of tensors), returns the loss."""

    def __init__(self, params: dict):
        super().__init__()
        model_params = params["model"]
        hidden = REDUCED["hidden_size"]
        dropout = float(model_params.get("dropout_rate", 0.1))
        epsilon = float(model_params.get("layer_norm_epsilon", 1e-12))
        self.disable_nsp = bool(model_params.get("disable_nsp", False))
        self.word_embeddings = nn.Embedding(REDUCED["vocab_size"], hidden)
        self.position_embeddings = nn.Embedding(
            int(model_params.get("max_position_embeddings", 512)), hidden)
        self.type_embeddings = nn.Embedding(TYPE_VOCAB_SIZE, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=epsilon)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            hidden, REDUCED["num_heads"], REDUCED["filter_size"], dropout,
            activation=str(model_params.get("encoder_nonlinearity", "gelu")).lower(),
            layer_norm_eps=epsilon, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, REDUCED["num_hidden_layers"])
        self.mlm_transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                           nn.LayerNorm(hidden, eps=epsilon))
        self.mlm_bias = nn.Parameter(torch.zeros(REDUCED["vocab_size"]))
        self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        self.nsp_head = nn.Linear(hidden, 2)
        self.apply(self._initialize)

    @staticmethod
    def _initialize(module: nn.Module) -> None:
        """BERT's initialization: N(0, 0.02) weights, zero biases."""
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=INITIALIZER_RANGE)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, batch: dict) -> torch.Tensor:
        input_ids = batch["input_ids"]
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        embedded = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
                    + self.type_embeddings(batch["token_type_ids"]))
        hidden = self.encoder(self.dropout(self.embedding_norm(embedded)),
                              src_key_padding_mask=batch["attention_mask"] == 0)
        index = batch["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
        masked = self.mlm_transform(hidden.gather(1, index))
        logits = masked @ self.word_embeddings.weight.t() + self.mlm_bias
        weights = batch["masked_lm_weights"].float()
        per_token = F.cross_entropy(logits.flatten(0, 1), batch["masked_lm_ids"].flatten(),
                                    reduction="none")
        loss = (per_token * weights.flatten()).sum() / weights.sum().clamp(min=1.0)
        if not self.disable_nsp:
            nsp_logits = self.nsp_head(self.pooler(hidden[:, 0]))
            loss = loss + F.cross_entropy(nsp_logits, batch["next_sentence_label"])
        return loss

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        model_params = params["model"]
        parameters, largest = nominal_parameters(model_params)
        return {"kind": "bert", "parameters": parameters, "largest_layer_parameters": largest,
                "hidden_size": int(model_params["hidden_size"]),
                "seq_len": int(input_section(params).get("max_sequence_length", 128))}
