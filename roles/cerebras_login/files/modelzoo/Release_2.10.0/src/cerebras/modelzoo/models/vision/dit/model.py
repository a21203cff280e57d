"""DiT, the diffusion transformer (Peebles and Xie): VAE latents in patches through
transformer blocks conditioned by adaptive layer norm on the timestep and the class,
trained to predict the noise a DDPM forward process added.

The config's model section is the nominal model (the docs' 2B, patch 2 x 2 on 32 x 32
latents of 4 channels: hidden 2048, 28 layers, 16 heads, filter 8192): the emulated
wafer compiles and times that (aitestbed_workload). The network that really trains
is the same architecture at reduced size (hidden 32, 2 layers) on the stored latents
(cerebras.modelzoo.data.vision.dit), with a linear beta schedule of
num_diffusion_steps (1000) steps; its loss is the MSE of the predicted noise.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from cerebras.modelzoo.layers.reduced import REDUCED, Block, initialize
from torch import nn

REDUCED_PATCH = 2


def _pair(value) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def tokens(model: dict) -> int:
    height, width = _pair(model.get("latent_size", [32, 32]))
    ph, pw = _pair(model.get("patch_size", [2, 2]))
    return (height // ph) * (width // pw)


def nominal_parameters(model: dict) -> tuple[int, int]:
    hidden, layers = int(model["hidden_size"]), int(model["num_hidden_layers"])
    ffn, channels = int(model["filter_size"]), int(model.get("latent_channels", 4))
    ph, pw = _pair(model.get("patch_size", [2, 2]))
    classes = int(model.get("num_classes", 1000))
    attention = 4 * hidden * hidden + 4 * hidden
    layer = attention + 2 * hidden * ffn + ffn + hidden + 6 * hidden * (hidden + 1)
    embed = ph * pw * channels * hidden + hidden + (classes + 1) * hidden + 256 * hidden + \
        hidden * hidden + 2 * hidden
    final = 2 * hidden * (hidden + 1) + hidden * ph * pw * channels * 2
    return embed + layers * layer + final, max(hidden * ffn, 6 * hidden * hidden)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half).float() / half)
    angles = t.float()[:, None] * freqs[None]
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


class AdaLNBlock(nn.Module):
    """A pre-norm block whose norms are shifted and scaled (and whose branches gated)
    by the conditioning: DiT's adaLN-Zero."""

    def __init__(self, hidden: int):
        super().__init__()
        self.block = Block(hidden=hidden, heads=REDUCED["num_heads"], ffn=REDUCED["filter_size"],
                           eps=1e-6)
        self.modulation = nn.Linear(hidden, 6 * hidden)

    def forward(self, x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = \
            self.modulation(F.silu(condition))[:, None].chunk(6, dim=-1)
        h = self.block.norm1(x) * (1 + scale1) + shift1
        x = x + gate1 * self.block.attention(h, None)
        h = self.block.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.block.mlp(h)


class DiTModel(nn.Module):
    def __init__(self, params: dict):
        super().__init__()
        model = params["model"]
        hidden = REDUCED["hidden_size"]
        self.channels = int(model.get("latent_channels", 4))
        self.steps = int(model.get("num_diffusion_steps", 1000))
        betas = torch.linspace(float(model.get("beta_start", 1e-4)),
                               float(model.get("beta_end", 0.02)), self.steps)
        self.register_buffer("alpha_bar", torch.cumprod(1 - betas, dim=0), persistent=False)
        self.patch = nn.Conv2d(self.channels, hidden, REDUCED_PATCH, stride=REDUCED_PATCH)
        self.time = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.label = nn.Embedding(int(model.get("num_classes", 1000)) + 1, hidden)
        self.blocks = nn.ModuleList(AdaLNBlock(hidden) for _ in range(REDUCED["num_hidden_layers"]))
        self.final_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.final_modulation = nn.Linear(hidden, 2 * hidden)
        self.out = nn.Linear(hidden, REDUCED_PATCH * REDUCED_PATCH * self.channels)
        self.apply(initialize)
        for zero in (*(b.modulation for b in self.blocks), self.final_modulation, self.out):
            nn.init.zeros_(zero.weight)
            nn.init.zeros_(zero.bias)
        self.generator = torch.Generator().manual_seed(int(params["runconfig"].get("seed") or 0))

    def predict(self, noisy: torch.Tensor, t: torch.Tensor, labels: torch.Tensor):
        batch, channels, height, width = noisy.shape
        x = self.patch(noisy).flatten(2).transpose(1, 2)
        positions = torch.arange(x.shape[1])
        x = x + timestep_embedding(positions, x.shape[-1])[None]
        condition = self.time(timestep_embedding(t, x.shape[-1])) + self.label(labels)
        for block in self.blocks:
            x = block(x, condition)
        shift, scale = self.final_modulation(F.silu(condition))[:, None].chunk(2, dim=-1)
        x = self.out(self.final_norm(x) * (1 + scale) + shift)
        grid_h, grid_w, p = height // REDUCED_PATCH, width // REDUCED_PATCH, REDUCED_PATCH
        x = x.view(batch, grid_h, grid_w, p, p, channels).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(batch, channels, height, width)

    def forward(self, batch: dict):
        latents, labels = batch["latents"], batch["labels"]
        t = torch.randint(0, self.steps, (len(latents),), generator=self.generator)
        noise = torch.randn(latents.shape, generator=self.generator)
        alpha = self.alpha_bar[t].view(-1, 1, 1, 1)
        noisy = alpha.sqrt() * latents + (1 - alpha).sqrt() * noise
        loss = F.mse_loss(self.predict(noisy, t, labels), noise)
        if self.training:
            return loss
        return loss, {}

    @staticmethod
    def eval_metrics(average_loss: float, averages: dict) -> dict:
        return {}

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        model = params["model"]
        parameters, largest = nominal_parameters(model)
        return {"kind": "dit", "parameters": parameters, "largest_layer_parameters": largest,
                "hidden_size": int(model["hidden_size"]), "seq_len": tokens(model)}
