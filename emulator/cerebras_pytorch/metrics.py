"""cstorch.metrics: metrics accumulated over an evaluation run.

A metric is called on each step's tensors and accumulates; compute() gives its
value over everything seen; compute_all_metrics() gives every registered metric's
value by name (and is what the modelzoo logs as "Metric: <name> = <value>").
"""

from __future__ import annotations

import torch

_registry: dict[str, Metric] = {}


class Metric:
    def __init__(self, name: str):
        if not name:
            raise ValueError("A metric needs a name.")
        base, index = name, 1
        while name in _registry:
            name = f"{base}_{index}"
            index += 1
        self.name = name
        _registry[name] = self
        self.reset()

    def reset(self) -> None:
        raise NotImplementedError

    def update(self, *args, **kwargs) -> None:
        raise NotImplementedError

    def compute(self) -> float:
        raise NotImplementedError

    def __call__(self, *args, **kwargs) -> None:
        with torch.no_grad():
            self.update(*args, **kwargs)


class AccuracyMetric(Metric):
    """The fraction of predictions equal to their labels (weighted, if weights are given)."""

    def reset(self) -> None:
        self.correct = 0.0
        self.total = 0.0

    def update(self, labels: torch.Tensor, predictions: torch.Tensor,
               weights: torch.Tensor | None = None, dtype=None) -> None:
        if labels.shape != predictions.shape:
            raise ValueError(f"labels {tuple(labels.shape)} and predictions "
                             f"{tuple(predictions.shape)} must have the same shape")
        hits = (labels.long() == predictions.long()).float()
        w = torch.ones_like(hits) if weights is None else weights.float()
        self.correct += float((hits * w).sum())
        self.total += float(w.sum())

    def compute(self) -> float:
        return self.correct / self.total if self.total else 0.0


class MeanMetric(Metric):
    """The (weighted) mean of the values seen."""

    def reset(self) -> None:
        self.sum = 0.0
        self.count = 0.0

    def update(self, values: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        values = torch.as_tensor(values).float()
        w = torch.ones_like(values) if weights is None else torch.as_tensor(weights).float()
        self.sum += float((values * w).sum())
        self.count += float(w.sum())

    def compute(self) -> float:
        return self.sum / self.count if self.count else 0.0


class PerplexityMetric(MeanMetric):
    """exp of the mean loss per token."""

    def update(self, labels: torch.Tensor, loss: torch.Tensor,
               weights: torch.Tensor | None = None, dtype=None) -> None:
        tokens = labels.numel() if weights is None else float(weights.float().sum())
        self.sum += float(loss) * (tokens if loss.dim() == 0 else 1)
        self.count += tokens

    def compute(self) -> float:
        import math

        return math.exp(super().compute())


def get_all_metrics() -> dict[str, Metric]:
    return dict(_registry)


def compute_all_metrics() -> dict[str, float]:
    return {name: metric.compute() for name, metric in _registry.items()}


def reset_all_metrics() -> None:
    for metric in _registry.values():
        metric.reset()


__all__ = ["AccuracyMetric", "MeanMetric", "Metric", "PerplexityMetric",
           "compute_all_metrics", "get_all_metrics", "reset_all_metrics"]
