# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""A 2-D UNet for binary segmentation (brain MRI slices -> tumour masks).

The classic encoder/decoder (Ronneberger et al.; the kaggle_3m model of Buda et
al.): four levels of two 3x3 convolutions with normalisation and ReLU, max-pool
down, transposed convolution up, skip connections by concatenation, a 1x1
convolution and a sigmoid. The loss is binary cross-entropy plus soft Dice.

Emulator scale: the command line gives the nominal sizes (`--in-width 256
--init-features 32`), which the PEF records and the timing model uses; the
tensors trained are smaller (see `reduced`): images of at most 32x32 pixels
(the synthetic kaggle_3m is stored at 32x32) and an eighth of the features
(32 -> 4: 4/8/16/32 channels and a 64-channel bottleneck). GroupNorm stands
in for BatchNorm: it has no running statistics, so the model is the same on the
RDU and on the CPU and across data-parallel instances.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812 - torch's convention

DEPTH = 4  # pooling levels: the side must be a multiple of 2**DEPTH
MAX_SIDE = 32  # the stored images' side
FEATURE_DIVISOR = 8
# The output layer starts predicting "no tumour" (most pixels are not tumour).
OUTPUT_BIAS = -3.0


@dataclass(frozen=True)
class Sizes:
    """Nominal (documented) and reduced (trained) sizes of one UNet."""

    in_channels: int
    nominal_side: int
    nominal_features: int
    side: int
    features: int


def reduced(in_channels: int, width: int, height: int, init_features: int) -> Sizes:
    """The sizes actually trained for the nominal ones of the command line."""
    if width != height:
        raise ValueError(f"the images are square: --in-width {width} and --in-height {height}")
    step = 2 ** DEPTH
    if width < step or width % step:
        raise ValueError(f"--in-width must be a multiple of {step} (the UNet pools "
                         f"{DEPTH} times), not {width}")
    if init_features < 1:
        raise ValueError(f"--init-features must be positive, not {init_features}")
    side = min(width, MAX_SIDE)
    return Sizes(in_channels=in_channels, nominal_side=width, nominal_features=init_features,
                 side=side, features=max(1, init_features // FEATURE_DIVISOR))


def _groups(channels: int) -> int:
    return 4 if channels >= 8 and channels % 4 == 0 else (2 if channels % 2 == 0 else 1)


class Float32GroupNorm(nn.GroupNorm):
    """GroupNorm computed in float32, also when the convolutions run in bfloat16 (the
    RDU side of `test` runs under autocast, which torch's CPU group_norm refuses)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float())


def _block(in_channels: int, features: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, features, kernel_size=3, padding=1, bias=False),
        Float32GroupNorm(_groups(features), features),
        nn.ReLU(inplace=True),
        nn.Conv2d(features, features, kernel_size=3, padding=1, bias=False),
        Float32GroupNorm(_groups(features), features),
        nn.ReLU(inplace=True),
    )


class UNet2d(nn.Module):
    def __init__(self, in_channels: int = 3, out_channels: int = 1, init_features: int = 4,
                 depth: int = DEPTH):
        super().__init__()
        widths = [init_features * 2 ** level for level in range(depth)]
        self.encoders = nn.ModuleList()
        channels = in_channels
        for width in widths:
            self.encoders.append(_block(channels, width))
            channels = width
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.bottleneck = _block(channels, channels * 2)
        channels *= 2
        self.upconvs = nn.ModuleList()
        self.decoders = nn.ModuleList()
        for width in reversed(widths):
            self.upconvs.append(nn.ConvTranspose2d(channels, width, kernel_size=2, stride=2))
            self.decoders.append(_block(width * 2, width))
            channels = width
        self.conv = nn.Conv2d(channels, out_channels, kernel_size=1)
        nn.init.constant_(self.conv.bias, OUTPUT_BIAS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for encoder in self.encoders:
            x = encoder(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for upconv, decoder, skip in zip(self.upconvs, self.decoders, reversed(skips),
                                         strict=True):
            x = decoder(torch.cat((upconv(x), skip), dim=1))
        return torch.sigmoid(self.conv(x))


def soft_dice_loss(prediction: torch.Tensor, target: torch.Tensor,
                   smooth: float = 1.0) -> torch.Tensor:
    intersection = (prediction * target).sum()
    return 1.0 - (2.0 * intersection + smooth) / (prediction.sum() + target.sum() + smooth)


class UNetWithLoss(nn.Module):
    """What is compiled into the PEF: forward(image, mask) -> (loss, prediction)."""

    def __init__(self, sizes: Sizes):
        super().__init__()
        self.sizes = sizes
        self.unet = UNet2d(sizes.in_channels, 1, sizes.features)

    def forward(self, image: torch.Tensor, mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        prediction = self.unet(image).float()
        return segmentation_loss(prediction, mask), prediction


def segmentation_loss(prediction: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy plus soft Dice."""
    return F.binary_cross_entropy(prediction, mask) + soft_dice_loss(prediction, mask)


@torch.no_grad()
def loss(prediction: torch.Tensor, mask: torch.Tensor) -> float:
    return float(segmentation_loss(prediction.float(), mask))


@torch.no_grad()
def dice_score(prediction: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """(intersection x 2, predicted + true pixels) at threshold 0.5: sums, so instances
    can add theirs before dividing."""
    predicted = (prediction > 0.5).float()
    return float(2.0 * (predicted * target).sum()), float(predicted.sum() + target.sum())
