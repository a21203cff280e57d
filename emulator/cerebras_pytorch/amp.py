"""cstorch.amp: loss scaling for mixed precision.

The CPU computes in fp32, so nothing underflows; the scaler still really scales
the loss, unscales the gradients, skips steps whose gradients are not finite and,
when dynamic, adapts its scale, so checkpoints carry a real grad_scaler state.
"""

from __future__ import annotations

import contextlib
import math

import torch

HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16,
               # cbfloat16 is the wafer's own 16-bit format; models see it as float16
               "cbfloat16": torch.float16}
_half_dtype = torch.float16
_half_name = "float16"


def set_half_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Choose the 16-bit type of mixed precision; returns the dtype models should use."""
    global _half_dtype, _half_name
    if isinstance(dtype, torch.dtype):
        names = {v: k for k, v in HALF_DTYPES.items() if k != "cbfloat16"}
        if dtype not in names:
            raise ValueError(f"Invalid half dtype {dtype}: expected torch.float16 or "
                             "torch.bfloat16")
        dtype = names[dtype]
    if dtype not in HALF_DTYPES:
        raise ValueError(f"Invalid half dtype {dtype!r}: expected one of "
                         f"{', '.join(HALF_DTYPES)}")
    _half_name, _half_dtype = dtype, HALF_DTYPES[dtype]
    return _half_dtype


def get_half_dtype() -> torch.dtype:
    return _half_dtype


def get_half_dtype_str() -> str:
    return _half_name


@contextlib.contextmanager
def autocast(enabled: bool = True):
    """Mixed-precision region. The CPU that stands for the wafer computes in fp32, so
    values inside are what they would be at full precision."""
    yield


def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                   grad_scaler: GradScaler, max_gradient_norm: float | None = None,
                   max_gradient_value: float | None = None) -> None:
    """backward on the scaled loss, unscale, clip (by norm or by value), step, zero."""
    if max_gradient_norm is not None and max_gradient_value is not None:
        raise ValueError("Gradients can be clipped by norm or by value, not both: set only "
                         "one of max_gradient_norm and max_gradient_value.")
    for name, limit in (("max_gradient_norm", max_gradient_norm),
                        ("max_gradient_value", max_gradient_value)):
        if limit is not None and limit <= 0:
            raise ValueError(f"{name} must be positive, got {limit}")
    grad_scaler.scale(loss).backward()
    grad_scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if max_gradient_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_gradient_norm)
    elif max_gradient_value is not None:
        torch.nn.utils.clip_grad_value_(params, max_gradient_value)
    grad_scaler.step(optimizer)
    grad_scaler.update()
    optimizer.zero_grad()


class GradScaler:
    def __init__(self, loss_scale: float | str | None = 1.0, init_scale: float | None = 2.0 ** 15,
                 steps_per_increase: int | None = 2000, min_loss_scale: float | None = 1.0,
                 max_loss_scale: float | None = 2.0 ** 31):
        # None (a key the params leave out) means the default
        loss_scale = 1.0 if loss_scale is None else loss_scale
        init_scale = 2.0 ** 15 if init_scale is None else init_scale
        steps_per_increase = 2000 if steps_per_increase is None else steps_per_increase
        min_loss_scale = 1.0 if min_loss_scale is None else min_loss_scale
        max_loss_scale = 2.0 ** 31 if max_loss_scale is None else max_loss_scale
        if loss_scale != "dynamic" and not isinstance(loss_scale, int | float):
            raise ValueError(f"loss_scale must be a number or \"dynamic\", got {loss_scale!r}")
        self.dynamic = loss_scale == "dynamic"
        self.scale_value = float(init_scale if self.dynamic else loss_scale)
        self.steps_per_increase = steps_per_increase
        self.min_loss_scale, self.max_loss_scale = min_loss_scale, max_loss_scale
        self._good_steps = 0
        self._unscaled: dict[int, bool] = {}

    def get_scale(self) -> float:
        return self.scale_value

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
