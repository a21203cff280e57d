"""Run a data set on the GroqChip and on the CPU and print the documented comparison table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from demo_helpers.table import render

SCORE_LABELS = {"classification": "Accuracy",
                "sentence_similarity": "Spearman Rank Correlation Coefficient",
                "qa": "F1 Score", "regression": "MSE", "segmentation": "Mean IoU",
                "object_detection": "mAP @ 0.5:0.95"}


@dataclass
class Dataset:
    """Inputs (`x`: one dict of tensors per sample), targets and how to score predictions."""
    x: list[dict]
    y: np.ndarray
    postprocess: callable = lambda preds: preds  # noqa: E731
    score: callable = None
    extra: dict = field(default_factory=dict)


@dataclass
class PerformanceResult:
    name: str
    predictions: list
    on_chip_latency_ms: float | None = None
    end_to_end_latency_ms: float | None = None
    batch_size: int = 1

    @property
    def on_chip_ips(self):
        return 1000.0 / self.on_chip_latency_ms * self.batch_size \
            if self.on_chip_latency_ms else None

    @property
    def end_to_end_ips(self):
        return 1000.0 / self.end_to_end_latency_ms * self.batch_size


def _first(out):
    if isinstance(out, tuple | list):
        return out[0]
    return out


def groq_inference(dataset: Dataset, model) -> list:
    print("Running inference on GroqChip.")
    preds = model.run_abunch(dataset.x)
    if isinstance(preds, torch.Tensor):
        preds = [preds]
    return [_first(p) for p in preds]


def pytorch_inference(dataset: Dataset, model) -> list:
    print("Running inference using PyTorch model (CPU).")
    preds = []
    with torch.no_grad():
        for inputs in tqdm(dataset.x):
            preds.append(_first(model(**inputs)))
    return preds


def compute_performance(groq_model, pytorch_model, dataset: Dataset, task: str):
    print("Preprocessing data.")
    on_chip_ms = groq_model.estimate_performance().compute_latency * 1000
    groq_e2e_ms = groq_model.benchmark().latency * 1000
    groq = PerformanceResult("groq", groq_inference(dataset, groq_model), on_chip_ms,
                             groq_e2e_ms)
    start = time.perf_counter()
    cpu_preds = pytorch_inference(dataset, pytorch_model)
    cpu_ms = (time.perf_counter() - start) / len(dataset.x) * 1000
    cpu = PerformanceResult("cpu", cpu_preds, None, cpu_ms)
    rows = []
    for result in (cpu, groq):
        score = dataset.score(dataset.postprocess(result.predictions), dataset.y)
        rows.append((result.name, score, f"{result.end_to_end_latency_ms:.2f}",
                     f"{result.end_to_end_ips:.2f}",
                     f"{result.on_chip_latency_ms:.2f}" if result.on_chip_latency_ms else "--",
                     f"{result.on_chip_ips:.2f}" if result.on_chip_ips else "--"))
    print(render(["Source", SCORE_LABELS[task], "end-to-end latency (ms)", "end-to-end IPS",
                  "on-chip latency (ms)", "on-chip IPS"], rows))
    return rows
