"""How fast Metis answers: time to first token, tokens per second, cold start.

Device time only (aitestbed.devices.clock): the gateway advances a VirtualClock by
these figures while it streams, so with AITESTBED_TIME_SCALE=1 a stream arrives at
the documented pace, and with 0 (the default) as fast as the CPU computes it.

Published figures (SambaNova SN40L, 16 RDUs a rack, as at ALCF):
- gpt-oss-120b: 737.9 output tokens/s, SambaNova's figure on Artificial Analysis'
  providers page for gpt-oss-120B (low):
  https://artificialanalysis.ai/models/gpt-oss-120b-low/providers
  (the same page's 4.31 s "time to first answer token" counts the model's reasoning,
  which our small model does not do, so it is not our time to first token).
- Llama 3.1 Instruct 8B 1,042, 70B 457 and 405B 129 output tokens/s/user, 16-bit,
  SambaNova's blog of 2024-09-10 (figures from artificialanalysis.ai):
  https://sambanova.ai/blog/sn40l-chip-best-inference-solution
- DeepSeek-R1 671B at 198 tokens/s on one rack of 16 SN40L RDUs, SambaNova's DAC 2025
  talk "SambaNova SN40L: Unleashing Agentic AI with Dataflow":
  https://62dac.conference-program.com/presentation/?id=SSSN027&sess=sess258
- Time to first token: SambaNova's Llama 3.3 70B measured at 290 ms p50 (streamed,
  ~700-token prompt, a third party's measurement through OpenRouter, proxy time taken
  off): https://krabarena.org/claims/592e1fd1-27a7-4326-8c0f-b0de58f6ef54

Derived (no published SN40L figure for these two; said plainly):
- Mistral-Large-3-675B-Instruct-2512 (a mixture of experts, 41 B active): DeepSeek-R1's
  198 tokens/s (37 B active) scaled by active parameters: 198 x 37 / 41 = 178.7.
- gemma-4-31B-it (taken as a dense 31 B model): log-log between the Llama 3.1 8B and
  70B figures at 31 B: 623 tokens/s.

Ours (no figure published, chosen to be plausible):
- Time to first token = 0.2 s (request, queue, first step) + the prompt's tokens at a
  prefill rate; for a dense 70 B model 7,800 prompt tokens/s, so that a 700-token
  prompt takes the measured 0.29 s; other models scale it by active parameters.
- Cold start (Offline -> Queued -> Starting -> Live, the docs' states): 1 s queued
  (a free node among the racks), then 2 s plus the checkpoint read into the node's
  DDR at 100 GB/s (weights: gpt-oss-120b MXFP4 ~63 GB, Mistral Large 3 FP8 ~675 GB
  assumed, gemma-4-31B bf16 ~62 GB). SambaNova hot-swaps models already in a node's
  memory in milliseconds (https://sambanova.ai/blog/sambanova-model-bundling-
  unlocking-efficiency-for-ai-inference-and-agentic-workflows); these figures are
  for a model that is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

FIRST_TOKEN_OVERHEAD = 0.2  # ours
DENSE_70B_PREFILL = 7800.0  # prompt tokens/s of a dense 70 B model (ours, fitted to 0.29 s)
QUEUED_SECONDS = 1.0  # ours
LOAD_OVERHEAD_SECONDS = 2.0  # ours
CHECKPOINT_READ_BYTES_PER_SECOND = 100e9  # ours

LLAMA_8B, LLAMA_70B = (8.0, 1042.0), (70.0, 457.0)  # (B parameters, tokens/s), published


def dense_tokens_per_second(billions: float) -> float:
    """Decode speed of a dense model, log-log through the published Llama 3.1 figures."""
    (x0, y0), (x1, y1) = LLAMA_8B, LLAMA_70B
    slope = math.log(y1 / y0) / math.log(x1 / x0)
    return y0 * (billions / x0) ** slope


@dataclass(frozen=True)
class ModelTiming:
    tokens_per_second: float
    active_billions: float  # parameters used per token (prefill cost)
    weight_bytes: float  # what a cold start reads
    source: str

    def first_token_seconds(self, prompt_tokens: int) -> float:
        prefill = DENSE_70B_PREFILL * 70.0 / self.active_billions
        return FIRST_TOKEN_OVERHEAD + max(0, prompt_tokens) / prefill

    def token_seconds(self) -> float:
        """Device seconds between two streamed tokens."""
        return 1.0 / self.tokens_per_second

    def queued_seconds(self) -> float:
        return QUEUED_SECONDS

    def starting_seconds(self) -> float:
        return LOAD_OVERHEAD_SECONDS + self.weight_bytes / CHECKPOINT_READ_BYTES_PER_SECOND

    def cold_start_seconds(self) -> float:
        return self.queued_seconds() + self.starting_seconds()

    def with_(self, **changes) -> ModelTiming:
        return replace(self, **changes)


TIMINGS = {
    "gpt-oss-120b": ModelTiming(737.9, 5.1, 63e9, "published (Artificial Analysis)"),
    "Mistral-Large-3-675B-Instruct-2512": ModelTiming(
        198.0 * 37 / 41, 41.0, 675e9, "derived from DeepSeek-R1 671B at 198 tokens/s"),
    "gemma-4-31B-it": ModelTiming(dense_tokens_per_second(31.0), 31.0, 62e9,
                                  "derived from Llama 3.1 8B and 70B"),
}


def timing_for(model: str, overrides: dict | None = None) -> ModelTiming:
    """The timing of a served name (another name: gpt-oss-120b's), with the config's
    overrides (tokens_per_second, active_billions, weight_bytes)."""
    base = TIMINGS.get(model, TIMINGS["gpt-oss-120b"])
    if not overrides:
        return base
    allowed = {"tokens_per_second", "active_billions", "weight_bytes"}
    unknown = set(overrides) - allowed
    if unknown:
        raise ValueError(f"unknown timing keys {sorted(unknown)}: use {sorted(allowed)}")
    values = {k: float(v) for k, v in overrides.items()}
    if any(not v > 0 for v in values.values()):
        raise ValueError("timing values must be positive numbers")
    return replace(base, **values, source="the gateway's configuration")
