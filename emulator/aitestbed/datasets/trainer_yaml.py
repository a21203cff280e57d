"""Sections of the Cerebras modelzoo's trainer YAML (Release 2.x) that the sample configs share.

The sample configs (aitestbed.datasets.cerebras_samples' GPT-3 111M,
aitestbed.datasets.cerebras_r210's BERT, GPT-J, Llama-2, ESM-2, ViT and DiT) are text
templates; these functions write the sections they have in common, at the indentation
they have under `trainer.init`, so that each config states only its own values.
"""

from __future__ import annotations

INIT = """\
trainer:
  init:
    backend:
      backend_type: CSX
"""


def adamw(betas: str, weight_decay: str, eps: str = "") -> str:
    """The optimizer section: AdamW with these betas, eps (if any) and weight decay."""
    return ("    optimizer:\n      AdamW:\n"
            f"        betas: {betas}\n" + (f"        eps: {eps}\n" if eps else "")
            + f"        weight_decay: {weight_decay}\n")


def _linear(indent: str, start: float, end: float, iters: int) -> str:
    return (f"{indent}- LinearLR:\n{indent}    initial_learning_rate: {start}\n"
            f"{indent}    end_learning_rate: {end}\n{indent}    total_iters: {iters}\n")


def schedulers(*phases: tuple[float, float, int]) -> str:
    """The schedulers section: one LinearLR (start, end, iterations), or a SequentialLR of
    several."""
    if len(phases) == 1:
        return "    schedulers:\n" + _linear("    ", *phases[0])
    return ("    schedulers:\n    - SequentialLR:\n        schedulers:\n"
            + "".join(_linear("        ", *phase) for phase in phases))


def warmup_then_decay(peak: float, warmup: int, decay: int) -> str:
    """A linear warm-up from 0 to peak, then a linear decay to a tenth of it."""
    return schedulers((0.0, peak, warmup), (peak, round(peak / 10, 10), decay))


def precision(fp16_type: str) -> str:
    """Mixed precision of this half type, gradients clipped at norm 1."""
    return (f"    precision:\n      enabled: true\n      fp16_type: {fp16_type}\n"
            "      max_gradient_norm: 1.0\n")


def loop(max_steps: int, eval_steps: int, checkpoint_steps: int, log_steps: int) -> str:
    """The loop (evaluated at its end), checkpoint and logging sections."""
    return (f"    loop:\n      max_steps: {max_steps}\n      eval_frequency: {max_steps}\n"
            f"      eval_steps: {eval_steps}\n    checkpoint:\n      steps: {checkpoint_steps}\n"
            f"    logging:\n      log_steps: {log_steps}\n")


def fit(train: str, val: str = "", *, workers: int, commented: bool = False) -> str:
    """The seed, then the fit section: the training dataloader of these fields (its
    data_processor to batch_size), shuffled; the validation one of `val` (none if empty)
    and the validate section, or both commented out (without num_workers) as the docs
    ship the configs whose validation would lengthen the run."""
    text = ("    seed: 1\n  fit:\n    train_dataloader:\n" + train
            + f"      shuffle: true\n      shuffle_seed: 1\n      num_workers: {workers}\n")
    if not val:
        return text
    validation = ("    val_dataloader: &val_dataloader\n" + val + "      shuffle: false\n"
                  + ("" if commented else f"      num_workers: {workers}\n")
                  + "  validate:\n    val_dataloader: *val_dataloader\n")
    if not commented:
        return text + validation
    return (text + "# Validation is commented out to shorten the run; to validate, uncomment:\n"
            + "".join(f"#{line}\n" for line in validation.splitlines()))
