"""Llama (Llama-2 7B): a decoder-only transformer with RMSNorm, SwiGLU and rotary
positions, no biases.

The config's model section is the nominal model (Llama-2 7B: hidden 4096, 32 layers,
32 heads, filter 11008, the docs' 32K vocabulary, 4096 positions): the emulated
wafer compiles and times that (aitestbed_workload). The network that really trains
is the same architecture at reduced size (cerebras.modelzoo.layers.reduced) on
windows of 64 tokens with 512 token ids (cerebras.modelzoo.data.nlp.gpt).
"""

from __future__ import annotations

from cerebras.modelzoo.data.nlp.gpt import REDUCED_VOCAB
from cerebras.modelzoo.layers.reduced import (
    CausalLM,
    lm_metrics,
    nominal_workload,
    transformer_parameters,
)


def nominal_parameters(model: dict) -> tuple[int, int]:
    return transformer_parameters(
        vocab=int(model.get("vocab_size", 32000)), hidden=int(model["hidden_size"]),
        layers=int(model["num_hidden_layers"]), ffn=int(model["filter_size"]),
        attention_bias=False, ffn_bias=False, gated=True, norm_bias=False,
        tied=bool(model.get("share_embedding_weights", False)))


class LlamaModel(CausalLM):
    def __init__(self, params: dict):
        model = params["model"]
        super().__init__(REDUCED_VOCAB, tied=bool(model.get("share_embedding_weights", False)),
                         eps=float(model.get("layer_norm_epsilon", 1e-5)), norm_type="rmsnorm",
                         mlp="swiglu", bias=False, use_rotary=True)

    eval_metrics = staticmethod(lm_metrics)

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        return nominal_workload("llama", params, nominal_parameters, 4096)
