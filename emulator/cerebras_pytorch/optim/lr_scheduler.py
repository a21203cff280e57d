"""cstorch.optim.lr_scheduler: the learning-rate schedules the modelzoo configures.

Each scheduler gives an absolute learning rate for a step (lr_at); param groups
with an "adjust_learning_rate" factor get that rate times the factor. Schedules
are stepped once per optimizer step; last_epoch is the step count.
"""

from __future__ import annotations

import math

import torch

_Base = getattr(torch.optim.lr_scheduler, "LRScheduler", torch.optim.lr_scheduler._LRScheduler)


class LRScheduler(_Base):
    total_iters: int | None = None

    def __init__(self, optimizer: torch.optim.Optimizer, total_iters: int | None = None):
        if total_iters is not None and int(total_iters) < 1:
            raise ValueError(f"total_iters must be positive, got {total_iters}")
        self.total_iters = None if total_iters is None else int(total_iters)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        rate = self.lr_at(int(self.last_epoch))
        return [rate * group.get("adjust_learning_rate", 1.0)
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return self.get_lr()


class ConstantLR(LRScheduler):
    def __init__(self, optimizer, learning_rate: float, total_iters: int | None = None):
        self.learning_rate = float(learning_rate)
        super().__init__(optimizer, total_iters)

    def lr_at(self, step: int) -> float:
        return self.learning_rate


class PolynomialLR(LRScheduler):
    """From initial to end over total_iters steps along (1 - t)^power, then end."""

    def __init__(self, optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int, power: float = 1.0, cycle: bool = False):
        self.initial, self.end = float(initial_learning_rate), float(end_learning_rate)
        self.power, self.cycle = float(power), bool(cycle)
        super().__init__(optimizer, total_iters)

    def lr_at(self, step: int) -> float:
        span = self.total_iters
        if self.cycle and step > 0:
            span = span * math.ceil(step / span)
        fraction = min(step, span) / span
        return (self.initial - self.end) * (1 - fraction) ** self.power + self.end


class LinearLR(PolynomialLR):
    def __init__(self, optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int, cycle: bool = False):
        super().__init__(optimizer, initial_learning_rate, end_learning_rate, total_iters,
                         1.0, cycle)


class ExponentialLR(LRScheduler):
    """initial * decay_rate^(step / total_iters) (floored steps when staircase)."""

    def __init__(self, optimizer, initial_learning_rate: float, total_iters: int,
                 decay_rate: float, staircase: bool = False):
        self.initial, self.decay_rate = float(initial_learning_rate), float(decay_rate)
        self.staircase = bool(staircase)
        super().__init__(optimizer, total_iters)

    def lr_at(self, step: int) -> float:
        power = step / self.total_iters
        return self.initial * self.decay_rate ** (math.floor(power) if self.staircase else power)


class CosineDecayLR(LRScheduler):
    def __init__(self, optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int):
        self.initial, self.end = float(initial_learning_rate), float(end_learning_rate)
        super().__init__(optimizer, total_iters)

    def lr_at(self, step: int) -> float:
        fraction = min(step, self.total_iters) / self.total_iters
        return self.end + (self.initial - self.end) * 0.5 * (1 + math.cos(math.pi * fraction))


class StepLR(LRScheduler):
    def __init__(self, optimizer, initial_learning_rate: float, step_size: int, gamma: float):
        self.initial, self.step_size, self.gamma = (float(initial_learning_rate),
                                                    int(step_size), float(gamma))
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        return self.initial * self.gamma ** (step // self.step_size)


class SequentialLR(LRScheduler):
    """Each scheduler for its total_iters steps, in turn (the last one to the end)."""

    def __init__(self, optimizer, schedulers: list[LRScheduler],
                 milestones: list[int] | None = None):
        if not schedulers:
            raise ValueError("SequentialLR needs at least one scheduler")
        if milestones is None:
            milestones, at = [], 0
            for scheduler in schedulers[:-1]:
                if not scheduler.total_iters:
                    raise ValueError("Every scheduler but the last of a sequence needs "
                                     "total_iters")
                at += scheduler.total_iters
                milestones.append(at)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("SequentialLR needs one milestone fewer than schedulers")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        start = 0
        for scheduler, milestone in zip(self._schedulers, [*self._milestones, None],
                                        strict=True):
            if milestone is None or step < milestone:
                return scheduler.lr_at(step - start)
            start = milestone
        raise AssertionError("unreachable")


class ChainedScheduler(LRScheduler):
    """The product of its schedulers' rates, relative to the first one's."""

    def __init__(self, optimizer, schedulers: list[LRScheduler]):
        if not schedulers:
            raise ValueError("ChainedScheduler needs at least one scheduler")
        self._schedulers = list(schedulers)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        return math.prod(scheduler.lr_at(step) for scheduler in self._schedulers)


class ScalePerParamLR(LRScheduler):
    """A scheduler whose rate each param group scales by its adjust_learning_rate."""

    def __init__(self, optimizer, scheduler: LRScheduler):
        self._scheduler_nested = scheduler
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        return self._scheduler_nested.lr_at(step)


SCHEDULERS = {
    "constant": ConstantLR, "constantlr": ConstantLR,
    "linear": LinearLR, "linearlr": LinearLR,
    "polynomial": PolynomialLR, "polynomiallr": PolynomialLR,
    "exponential": ExponentialLR, "exponentiallr": ExponentialLR,
    "cosinedecay": CosineDecayLR, "cosinedecaylr": CosineDecayLR,
    "step": StepLR, "steplr": StepLR,
}

__all__ = ["ChainedScheduler", "ConstantLR", "CosineDecayLR", "ExponentialLR", "LRScheduler",
           "LinearLR", "PolynomialLR", "SCHEDULERS", "ScalePerParamLR", "SequentialLR",
           "StepLR"]
