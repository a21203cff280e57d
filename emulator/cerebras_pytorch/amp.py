"""cstorch.amp: loss scaling for mixed precision.

The CPU computes in fp32, so nothing underflows; the scaler still really scales
the loss, unscales the gradients, skips steps whose gradients are not finite and,
when dynamic, adapts its scale, so checkpoints carry a real grad_scaler state.
"""

from __future__ import annotations

import math

import torch


class GradScaler:
    def __init__(self, loss_scale: float | str = 1.0, init_scale: float = 2.0 ** 15,
                 steps_per_increase: int = 2000, min_loss_scale: float = 1.0,
                 max_loss_scale: float = 2.0 ** 31):
        self.dynamic = loss_scale == "dynamic"
        self.scale_value = float(init_scale if self.dynamic else loss_scale)
        self.steps_per_increase = steps_per_increase
        self.min_loss_scale, self.max_loss_scale = min_loss_scale, max_loss_scale
        self._good_steps = 0
        self._unscaled: dict[int, bool] = {}

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale_value

    def unscale_(self, optimizer: torch.optim.Optimizer) -> bool:
        """Divide the gradients by the scale; True if they are all finite."""
        finite = True
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is not None:
                        param.grad.div_(self.scale_value)
                        finite = finite and bool(torch.isfinite(param.grad).all())
        self._unscaled[id(optimizer)] = finite
        return finite

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        finite = self._unscaled.pop(id(optimizer))
        if finite:
            optimizer.step()
        self._good_steps = self._good_steps + 1 if finite else -1

    def update(self) -> None:
        if not self.dynamic:
            return
        if self._good_steps < 0:
            self.scale_value = max(self.min_loss_scale, self.scale_value / 2)
            self._good_steps = 0
        elif self._good_steps >= self.steps_per_increase:
            self.scale_value = min(self.max_loss_scale, self.scale_value * 2)
            self._good_steps = 0

    def state_dict(self) -> dict:
        return {"scale": self.scale_value, "dynamic": self.dynamic,
                "good_steps": self._good_steps}

    def load_state_dict(self, state: dict) -> None:
        scale = float(state["scale"])
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"invalid loss scale {scale!r} in the grad_scaler state")
        self.scale_value, self._good_steps = scale, int(state.get("good_steps", 0))
