"""fc_mnist: `depth` fully connected layers of `hidden_size` units on 28x28 digits."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

INPUT_SIZE = 28 * 28
NUM_CLASSES = 10
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}


def _layer_sizes(model_params: dict) -> list[tuple[int, int]]:
    depth = int(model_params.get("depth", 10))
    hidden = int(model_params.get("hidden_size", 50))
    if depth < 1 or hidden < 1:
        raise ValueError("model.depth and model.hidden_size must be at least 1")
    widths = [INPUT_SIZE] + [hidden] * depth + [NUM_CLASSES]
    return list(zip(widths, widths[1:], strict=False))


class FCMNIST(nn.Module):
    def __init__(self, model_params: dict):
        super().__init__()
        activation = str(model_params.get("activation_fn", "relu")).lower()
        if activation not in ACTIVATIONS:
            raise ValueError(f"Unsupported activation_fn {activation!r}: one of "
                             f"{', '.join(ACTIVATIONS)}")
        sizes = _layer_sizes(model_params)
        layers: list[nn.Module] = []
        for index, (fan_in, fan_out) in enumerate(sizes):
            layers.append(nn.Linear(fan_in, fan_out))
            if index < len(sizes) - 1:
                layers += [ACTIVATIONS[activation](),
                           nn.Dropout(float(model_params.get("dropout", 0.0)))]
        self.layers = nn.Sequential(*layers)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.layers(inputs.float().flatten(1))


class MNISTModel(nn.Module):
    """The network and its loss: called on a batch (images, labels), returns the loss."""

    def __init__(self, params: dict):
        super().__init__()
        self.model = FCMNIST(params["model"])
        self.loss_fn = nn.NLLLoss()

    def forward(self, batch) -> torch.Tensor:
        inputs, labels = batch
        return self.loss_fn(F.log_softmax(self.model(inputs), dim=1), labels)

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the model, without building it."""
        model_params = params["model"]
        layers = [fan_in * fan_out + fan_out for fan_in, fan_out in _layer_sizes(model_params)]
        return {"kind": "fc_mnist", "parameters": sum(layers),
                "largest_layer_parameters": max(layers),
                "hidden_size": int(model_params.get("hidden_size", 50))}
