"""GPT-J: a decoder-only transformer with rotary positions and attention and MLP side
by side (EleutherAI's 6B).

The config's model section is the nominal model (GPT-J 6B: hidden 4096, 28 layers,
16 heads, filter 16384, vocabulary 50400): the emulated wafer compiles and times
that (aitestbed_workload). The network that really trains is the same architecture
at reduced size (cerebras.modelzoo.layers.reduced) on windows of 64 tokens with 512
token ids (cerebras.modelzoo.data.nlp.gpt).
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
    vocab = int(model.get("vocab_size", 50400))
    return transformer_parameters(
        vocab=vocab, hidden=int(model["hidden_size"]), layers=int(model["num_hidden_layers"]),
        ffn=int(model["filter_size"]), attention_bias=False, norms=1,
        tied=bool(model.get("share_embedding_weights", False)),
        extra=vocab if model.get("use_bias_in_output", True) else 0)


class GptjModel(CausalLM):
    def __init__(self, params: dict):
        model = params["model"]
        super().__init__(REDUCED_VOCAB, tied=bool(model.get("share_embedding_weights", False)),
                         eps=float(model.get("layer_norm_epsilon", 1e-5)), layout="parallel",
                         bias=False, use_rotary=True)

    eval_metrics = staticmethod(lm_metrics)

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model."""
        return nominal_workload("gptj", params, nominal_parameters, 2048)
