"""poptorch.optim: PyTorch's optimizers with the IPU-specific arguments PopTorch adds.

The extra arguments (loss_scaling, velocity_scaling, accum_type, ...) are
accepted and kept; loss scaling only changes fp16 numerics, which the CPU
computes in fp32, so the updates are the torch optimizers' own. LAMB has no
torch counterpart and is implemented here.
"""

from __future__ import annotations

from typing import Any

import torch

_IPU_ARGUMENTS = ("loss_scaling", "velocity_scaling", "use_combined_accum", "accum_type",
                  "first_order_momentum_accum_type", "second_order_momentum_accum_type",
                  "max_grad_norm", "bias_correction", "max_weight_norm")


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ipu = {k: kwargs.pop(k) for k in list(kwargs) if k in _IPU_ARGUMENTS}
    return kwargs, ipu


class SGD(torch.optim.SGD):
    def __init__(self, params, lr: float, **kwargs: Any):
        kwargs, self.ipu_options = _split(kwargs)
        super().__init__(params, lr=lr, **kwargs)


class Adam(torch.optim.Adam):
    def __init__(self, params, lr: float = 1e-3, **kwargs: Any):
        kwargs, self.ipu_options = _split(kwargs)
        super().__init__(params, lr=lr, **kwargs)


class AdamW(torch.optim.AdamW):
    def __init__(self, params, lr: float = 1e-3, **kwargs: Any):
        kwargs, self.ipu_options = _split(kwargs)
        super().__init__(params, lr=lr, **kwargs)


class RMSprop(torch.optim.RMSprop):
    def __init__(self, params, lr: float = 1e-2, **kwargs: Any):
        kwargs, self.ipu_options = _split(kwargs)
        super().__init__(params, lr=lr, **kwargs)


class LAMB(torch.optim.Optimizer):
    """Layer-wise Adaptive Moments (You et al., 2019), with bias correction."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, bias_correction: bool = True,
                 max_weight_norm: float | None = None, **kwargs: Any):
        _, self.ipu_options = _split(kwargs)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction,
                                      max_weight_norm=max_weight_norm))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m, v = exp_avg, exp_avg_sq
                if group["bias_correction"]:
                    m = m / (1 - beta1 ** state["step"])
                    v = v / (1 - beta2 ** state["step"])
                update = m / (v.sqrt() + group["eps"]) + group["weight_decay"] * p
                weight_norm = p.norm()
                if group["max_weight_norm"] is not None:
                    weight_norm = weight_norm.clamp(max=group["max_weight_norm"])
                update_norm = update.norm()
                trust = weight_norm / update_norm if weight_norm > 0 and update_norm > 0 \
                    else torch.tensor(1.0)
                p.add_(update, alpha=-group["lr"] * float(trust))
        return loss


class VariableAttributes:
    """Which optimizer attributes are constant (PopTorch compiles constants in)."""

    def __init__(self, *names: str):
        self.constants: set[str] = set()

    def markAsConstant(self, name: str) -> None:  # noqa: N802
        self.constants.add(name)

    def markAsVariable(self, name: str) -> None:  # noqa: N802
        self.constants.discard(name)

    def isConstant(self, name: str) -> bool:  # noqa: N802
        return name in self.constants


