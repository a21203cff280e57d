"""samba.optim: the optimizers SambaFlow runs on the RDU (its optimizer section).

They are torch's, taking the same hyper-parameters; SambaFlow's extra options are
kept in `samba_options` (`max_grad_norm` clips the gradients before each step).
Per run, the session's `hyperparam_dict` ({'lr': ..., 'momentum': ..., 'weight_decay':
...}) sets them on the RDU's copy of the optimizer.
"""

from __future__ import annotations

from typing import Any

import torch

_TORCH_ARGS = {
    "SGD": {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach",
            "differentiable"},
    "Adam": {"lr", "betas", "eps", "weight_decay", "amsgrad", "foreach", "maximize",
             "capturable", "differentiable", "fused"},
    "AdamW": {"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
              "capturable", "differentiable", "fused"},
}


def _split(kind: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    known = {k: v for k, v in kwargs.items() if k in _TORCH_ARGS[kind]}
    extra = {k: v for k, v in kwargs.items() if k not in _TORCH_ARGS[kind]}
    if "beta1" in extra or "beta2" in extra:
        betas = known.get("betas", (0.9, 0.999))
        known["betas"] = (extra.pop("beta1", betas[0]), extra.pop("beta2", betas[1]))
    # One multi-tensor update instead of a Python loop over the parameters: the steps of
    # small models at batch 1 are mostly such overhead.
    known.setdefault("foreach", True)
    return known, extra


class SGD(torch.optim.SGD):
    def __init__(self, params: Any, lr: float = 0.01, momentum: float = 0.0,
                 weight_decay: float = 0.0, **kwargs: Any) -> None:
        known, self.samba_options = _split("SGD", kwargs)
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay, **known)


class Adam(torch.optim.Adam):
    def __init__(self, params: Any, lr: float = 1e-3, **kwargs: Any) -> None:
        known, self.samba_options = _split("Adam", kwargs)
        super().__init__(params, lr=lr, **known)


class AdamW(torch.optim.AdamW):
    def __init__(self, params: Any, lr: float = 1e-3, weight_decay: float = 0.01,
                 **kwargs: Any) -> None:
        known, self.samba_options = _split("AdamW", kwargs)
        super().__init__(params, lr=lr, weight_decay=weight_decay, **known)


__all__ = ["SGD", "Adam", "AdamW"]
