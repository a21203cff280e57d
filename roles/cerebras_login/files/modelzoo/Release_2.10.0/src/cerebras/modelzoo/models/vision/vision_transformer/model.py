"""The vision transformer (ViT): image patches and a class token through a pre-norm
encoder, classified from the class token.

The config's model section is the nominal model (ViT-Base/16: 224 x 224 images in
patches of 16, hidden 768, 12 layers, 12 heads, filter 3072, 1000 classes): the
emulated wafer compiles and times that (aitestbed_workload). The network that really
trains is the same architecture at reduced size (cerebras.modelzoo.layers.reduced)
on the stored 32 x 32 images in patches of 8, with the config's num_classes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from cerebras.modelzoo.layers.reduced import REDUCED, blocks, initialize, transformer_parameters
from torch import nn

REDUCED_PATCH = 8
REDUCED_IMAGE = 32


def tokens(model: dict) -> int:
    image = model.get("image_size", [224, 224])
    height, width = (image, image) if isinstance(image, int) else image
    patch = model.get("patch_size", [16, 16])
    ph, pw = (patch, patch) if isinstance(patch, int) else patch
    return (int(height) // int(ph)) * (int(width) // int(pw)) + 1


def nominal_parameters(model: dict) -> tuple[int, int]:
    hidden, classes = int(model["hidden_size"]), int(model.get("num_classes", 1000))
    patch = model.get("patch_size", [16, 16])
    ph, pw = (patch, patch) if isinstance(patch, int) else patch
    channels = int(model.get("num_channels", 3))
    patch_embedding = int(ph) * int(pw) * channels * hidden + hidden
    return transformer_parameters(
        vocab=0, hidden=hidden, layers=int(model["num_hidden_layers"]),
        ffn=int(model["filter_size"]), positions=tokens(model) + 1,
        extra=patch_embedding + hidden * classes + classes)


class ViTClassificationModel(nn.Module):
    def __init__(self, params: dict):
        super().__init__()
        model = params["model"]
        hidden, eps = REDUCED["hidden_size"], float(model.get("layer_norm_epsilon", 1e-6))
        self.classes = int(model.get("num_classes", 1000))
        self.patches = nn.Conv2d(3, hidden, REDUCED_PATCH, stride=REDUCED_PATCH)
        self.cls = nn.Parameter(torch.zeros(1, 1, hidden))
        count = (REDUCED_IMAGE // REDUCED_PATCH) ** 2 + 1
        self.positions = nn.Parameter(torch.randn(1, count, hidden) * 0.02)
        self.blocks = blocks(eps=eps)
        self.final_norm = nn.LayerNorm(hidden, eps=eps)
        self.head = nn.Linear(hidden, self.classes)
        self.apply(initialize)

    def forward(self, batch: dict):
        images = batch["images"]
        if images.shape[-2:] != (REDUCED_IMAGE, REDUCED_IMAGE):
            images = F.interpolate(images, size=(REDUCED_IMAGE, REDUCED_IMAGE), mode="bilinear",
                                   align_corners=False)
        x = self.patches(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.positions
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x[:, 0]))
        loss = F.cross_entropy(logits, batch["labels"])
        if self.training:
            return loss
        return loss, {"accuracy": (logits.argmax(-1) == batch["labels"]).float().mean()}

    @staticmethod
    def eval_metrics(average_loss: float, averages: dict) -> dict:
        return {"eval/accuracy": averages["accuracy"]}

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        model = params["model"]
        parameters, largest = nominal_parameters(model)
        return {"kind": "vit", "parameters": parameters, "largest_layer_parameters": largest,
                "hidden_size": int(model["hidden_size"]), "seq_len": tokens(model)}
