"""cstorch.optim: PyTorch's optimizers under the names the modelzoo configures, and
the helpers that build the optimizer, its param groups and its LR schedule from the
params' `optimizer` section."""

from __future__ import annotations

import inspect
import logging
import re

import torch

from . import lr_scheduler

Optimizer = torch.optim.Optimizer


class SGD(torch.optim.SGD):
    pass


class Adam(torch.optim.Adam):
    pass


class AdamW(torch.optim.AdamW):
    pass


class Adagrad(torch.optim.Adagrad):
    pass


class Adamax(torch.optim.Adamax):
    pass


class ASGD(torch.optim.ASGD):
    pass


class NAdam(torch.optim.NAdam):
    pass


class RAdam(torch.optim.RAdam):
    pass


class RMSprop(torch.optim.RMSprop):
    pass


class Rprop(torch.optim.Rprop):
    pass


OPTIMIZERS = {cls.__name__.lower(): cls
              for cls in (SGD, Adam, AdamW, Adagrad, Adamax, ASGD, NAdam, RAdam, RMSprop, Rprop)}
log = logging.getLogger("cerebras_pytorch.optim")


def _initial_rate(learning_rate) -> float:
    """The rate at step 0 of a learning_rate setting (a number or a schedule)."""
    if isinstance(learning_rate, int | float) and not isinstance(learning_rate, bool):
        return float(learning_rate)
    first = learning_rate[0] if isinstance(learning_rate, list) and learning_rate \
        else learning_rate
    if isinstance(first, dict):
        for key in ("initial_learning_rate", "learning_rate"):
            if key in first:
                return float(first[key])
    raise ValueError(f"Invalid learning_rate {learning_rate!r}: a number or a schedule")


def configure_optimizer(optimizer_type: str, params, **kwargs) -> torch.optim.Optimizer:
    """The optimizer named optimizer_type (case-insensitive) over params.

    learning_rate (a number, or a schedule whose first rate is used until the LR
    scheduler sets it) becomes lr; keys the optimizer does not take are left out with
    a warning.
    """
    cls = OPTIMIZERS.get(str(optimizer_type).lower())
    if cls is None:
        raise ValueError(f"Unsupported optimizer type {optimizer_type!r}: one of "
                         f"{', '.join(c.__name__ for c in OPTIMIZERS.values())}")
    if "learning_rate" in kwargs:
        kwargs["lr"] = _initial_rate(kwargs.pop("learning_rate"))
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "params"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        log.warning(f"{cls.__name__} does not take {', '.join(unknown)}: ignored.")
    options = {key: (tuple(value) if isinstance(value, list) else value)
               for key, value in kwargs.items() if key in accepted}
    return cls(params, **options)


def configure_param_groups(model: torch.nn.Module, optimizer_params: dict) -> list[dict]:
    """The model's trainable parameters in groups.

    Parameters whose names match a pattern of optimizer_params["adjust_learning_rate"]
    ({pattern: factor}) form a group with that factor; with weight_decay set, biases
    and norm layers' weights go to groups without weight decay when
    exclude_bias_and_norm_from_weight_decay (or "exclude_from_weight_decay" patterns)
    says so. The rest are one group.
    """
    adjust = optimizer_params.get("adjust_learning_rate") or {}
    excluded_patterns = list(optimizer_params.get("exclude_from_weight_decay") or [])
    if optimizer_params.get("exclude_bias_and_norm_from_weight_decay"):
        excluded_patterns += ["bias", "norm", "ln_", "layernorm"]
    norm_types = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.modules.batchnorm._NormBase)
    norm_params = {id(p) for m in model.modules() if isinstance(m, norm_types)
                   for p in m.parameters(recurse=False)}
    groups: dict[tuple, dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        factor = 1.0
        for pattern, value in adjust.items():
            if re.search(pattern, name):
                factor = float(value)
                break
        no_decay = bool(excluded_patterns) and (
            id(param) in norm_params or any(p in name.lower() for p in excluded_patterns))
        group = groups.setdefault((factor, no_decay), {"params": []})
        group["params"].append(param)
        if factor != 1.0:
            group["adjust_learning_rate"] = factor
        if no_decay:
            group["weight_decay"] = 0.0
    return list(groups.values()) or [{"params": []}]


def _scheduler(optimizer, spec: dict) -> lr_scheduler.LRScheduler:
    spec = dict(spec)
    name = str(spec.pop("scheduler", "")).replace("_", "").lower()
    cls = lr_scheduler.SCHEDULERS.get(name)
    if cls is None:
        raise ValueError(f"Unsupported learning rate scheduler {name!r}: one of Constant, "
                         "Linear, Polynomial, Exponential, CosineDecay, Step")
    if "steps" in spec and "total_iters" not in spec:
        spec["total_iters"] = spec.pop("steps")
    if "decay_steps" in spec and "total_iters" not in spec:
        spec["total_iters"] = spec.pop("decay_steps")
    spec.pop("main_scheduler", None)
    try:
        return cls(optimizer, **spec)
    except TypeError as err:
        raise ValueError(f"Invalid settings for the {name} scheduler: {err}") from err


def configure_lr_scheduler(optimizer, learning_rate, adjust_learning_rate=None):
    """The LR scheduler of a learning_rate setting; None for a constant number."""
    if learning_rate is None or (isinstance(learning_rate, int | float)
                                 and not isinstance(learning_rate, bool)):
        return None
    specs = learning_rate if isinstance(learning_rate, list) else [learning_rate]
    if not specs or not all(isinstance(spec, dict) for spec in specs):
        raise ValueError(f"Invalid learning_rate {learning_rate!r}: a number, a schedule "
                         "or a list of schedules")
    schedulers = [_scheduler(optimizer, spec) for spec in specs]
    if len(schedulers) == 1:
        return schedulers[0]
    return lr_scheduler.SequentialLR(optimizer, schedulers)


__all__ = ["OPTIMIZERS", "Optimizer", *(cls.__name__ for cls in OPTIMIZERS.values()),
           "configure_lr_scheduler", "configure_optimizer", "configure_param_groups",
           "lr_scheduler"]
