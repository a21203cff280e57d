"""ImageNet latents for the diffusion transformer (DiTLatentDataProcessor).

data_dir (/software/cerebras/dataset/dit/train) holds latents.npy, the VAE latents of
the images, (images, 4, size, size) float16 scaled by the VAE's 0.18215, and
labels.npy (images,) their classes. A sample is a latent with its class; the model
draws the diffusion timestep and the noise.
"""

from __future__ import annotations

import os

import numpy as np
import torch


class DiTLatentDataProcessor(torch.utils.data.Dataset):
    def __init__(self, config: dict, params: dict):
        directory = str(config["data_dir"])
        try:
            latents = np.load(os.path.join(directory, "latents.npy"))
            labels = np.load(os.path.join(directory, "labels.npy"))
        except FileNotFoundError:
            raise FileNotFoundError(
                2, f"No DiT latents (latents.npy, labels.npy) in {directory!r}: set data_dir "
                "to the preprocessed dataset, e.g. /software/cerebras/dataset/dit/train",
                directory) from None
        channels = int(params["model"].get("latent_channels", 4))
        if latents.ndim != 4 or latents.shape[1] != channels or len(latents) != len(labels):
            raise ValueError(f"{directory!r}: expected latents (N, {channels}, H, W) and N "
                             "labels")
        self.latents = torch.from_numpy(latents.astype(np.float32))
        self.labels = torch.from_numpy(labels.astype(np.int64))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        return {"latents": self.latents[index], "labels": self.labels[index]}
