"""UNet (Ronneberger et al. 2015) for segmentation: encoder, bottleneck, decoder with skips.

The params' model section is the nominal model (encoder_filters [64, 128, 256, 512],
decoder_filters [256, 128, 64], two 3x3 convolutions a block, on image_shape
256x256): the emulated wafer compiles and times that (aitestbed_workload, the
generic kind: its FLOPs a sample from the convolutions at each resolution). The
network that really trains is the same architecture with REDUCTION (8) times fewer
filters, on images REDUCTION times smaller (see data.py), so that 1,000 steps take
well under two minutes. Its loss (binary cross entropy of the defect mask, "bce";
or cross entropy over num_classes, "ssce") really falls on the sample data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

from modelzoo.common.pytorch.input_utils import input_section

REDUCTION = 8
ACTIVATIONS = {"relu": nn.ReLU, "leakyrelu": nn.LeakyReLU, "gelu": nn.GELU}


def _kernels(model_params: dict) -> list[int]:
    return [int(str(kernel).split("_")[0]) for kernel in
            model_params.get("convs_per_block", ["3_3", "3_3"])]


def _output_channels(model_params: dict, params: dict) -> int:
    binary = str(model_params.get("loss", "bce")).lower() == "bce"
    return 1 if binary else int(input_section(params).get("num_classes", 2))


def conv_layers(model_params: dict, in_channels: int, out_channels: int, scale: int = 1
                ) -> list[tuple[int, int, int, int]]:
    """(in, out, kernel, resolution level) of every convolution of the network."""
    kernels = _kernels(model_params)
    encoder = [int(f) // scale for f in model_params["encoder_filters"]]
    decoder = [int(f) // scale for f in model_params["decoder_filters"]]
    layers, channels = [], in_channels
    for level, filters in enumerate(encoder):
        for kernel in kernels:
            layers.append((channels, filters, kernel, level))
            channels = filters
    for index, filters in enumerate(decoder):
        level = len(encoder) - 2 - index
        layers.append((channels, filters, 2, level))  # transposed 2x2 upsampling
        skip = encoder[level] if model_params.get("skip_connect", True) else 0
        channels = filters + skip
        for kernel in kernels:
            layers.append((channels, filters, kernel, level))
            channels = filters
    layers.append((channels, out_channels, 1, 0))
    return layers


class UNet(nn.Module):
    def __init__(self, model_params: dict, in_channels: int, out_channels: int, scale: int):
        super().__init__()
        activation = ACTIVATIONS[str(model_params.get("nonlinearity", "ReLU")).lower()]
        bias = bool(model_params.get("enable_bias", True))
        self.skip_connect = bool(model_params.get("skip_connect", True))
        self.levels = len(model_params["encoder_filters"])
        self.blocks = nn.ModuleList()
        # blocks: one a resolution of the encoder, then (upsampling, block) pairs
        block: list[nn.Module] = []
        current = 0
        *layers, (final_channels, _, _, _) = conv_layers(model_params, in_channels,
                                                         out_channels, scale)
        for fan_in, fan_out, kernel, level in layers:
            if kernel == 2 or (level != current and block):
                self.blocks.append(nn.Sequential(*block))
                block = []
            if kernel == 2:
                self.blocks.append(nn.ConvTranspose2d(fan_in, fan_out, 2, stride=2, bias=bias))
            else:
                block += [nn.Conv2d(fan_in, fan_out, kernel, padding=kernel // 2, bias=bias),
                          activation()]
            current = level
        self.blocks.append(nn.Sequential(*block))
        self.classifier = nn.Conv2d(final_channels, out_channels, 1)
        gain = float((model_params.get("initializer") or {}).get("gain", 1.0))
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.ConvTranspose2d):
                nn.init.xavier_uniform_(module.weight, gain=gain)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        encoder, rest = self.blocks[:self.levels], self.blocks[self.levels:]
        skips = []
        for level, block in enumerate(encoder):
            x = block(x)
            if level < self.levels - 1:
                skips.append(x)
                x = F.max_pool2d(x, 2)
        for upsample, block in zip(rest[::2], rest[1::2], strict=True):
            x = upsample(x)
            skip = skips.pop()
            x = block(torch.cat([x, skip], dim=1) if self.skip_connect else x)
        return self.classifier(x)


class UNetModel(nn.Module):
    """Called on a batch (images, masks), returns the loss."""

    def __init__(self, params: dict):
        super().__init__()
        model_params = params["model"]
        self.binary = _output_channels(model_params, params) == 1
        channels = int(input_section(params).get("image_shape", [256, 256, 1])[-1])
        self.model = UNet(model_params, channels, _output_channels(model_params, params),
                          REDUCTION)

    def forward(self, batch) -> torch.Tensor:
        images, masks = batch
        logits = self.model(images)
        if self.binary:
            return F.binary_cross_entropy_with_logits(logits[:, 0], masks.float())
        return F.cross_entropy(logits, masks.long())

    @classmethod
    def aitestbed_workload(cls, params: dict) -> dict:
        """The emulated wafer's view of the full-size model.

        seq_len is the pixels a parameter is applied at, on average (layers at lower
        resolutions see fewer), so that 6 x parameters x seq_len is the training FLOPs
        a sample; hidden_size is the first encoder block's width.
        """
        model_params = params["model"]
        height, width, channels = (int(v) for v in input_section(params).get(
            "image_shape", [256, 256, 1]))
        layers = conv_layers(model_params, channels, _output_channels(model_params, params))
        sizes = [fan_in * fan_out * kernel * kernel + fan_out
                 for fan_in, fan_out, kernel, _ in layers]
        pixels = [height * width // 4 ** level for *_, level in layers]
        parameters = sum(sizes)
        applied = sum(size * count for size, count in zip(sizes, pixels, strict=True))
        return {"kind": "generic", "parameters": parameters,
                "largest_layer_parameters": max(sizes),
                "hidden_size": int(model_params["encoder_filters"][0]),
                "seq_len": max(1, round(applied / parameters))}
