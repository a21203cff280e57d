"""GPT samples from .npy files (GptNpyDataProcessor), for the reduced-scale GPT models.

data_dir holds *.npy arrays of shape (sequences, 3, max_sequence_length): input_ids,
attention_mask and labels (the sample set: /software/cerebras/dataset/OWT/Pytorch).
The reduced model trains on windows of REDUCED_CONTEXT tokens cut from them,
TRAIN_BATCH windows a step, each step standing for the dataloader's batch_size
sequences (the appliance times the nominal batch). Token ids must be below the
reduced vocabulary. Nothing is downloaded: the input workers have no internet.
"""

from __future__ import annotations

import errno
import os

import numpy as np
import torch

FIELDS = ("input_ids", "attention_mask", "labels")
REDUCED_CONTEXT = 64
REDUCED_VOCAB = 512
TRAIN_BATCH = 4


class GptNpyDataProcessor(torch.utils.data.Dataset):
    def __init__(self, data_dir: str, max_sequence_length: int = 2048):
        try:
            names = sorted(n for n in os.listdir(data_dir) if n.endswith(".npy"))
        except (FileNotFoundError, NotADirectoryError):
            names = []
        if not names:
            raise FileNotFoundError(
                errno.ENOENT, f"No GPT data (.npy files) in data_dir {data_dir!r}: set it to the "
                "absolute path of a prepared dataset, e.g. under /software/cerebras/dataset",
                data_dir)
        data = np.concatenate([np.load(os.path.join(data_dir, n)) for n in names]).astype(np.int64)
        if data.ndim != 3 or data.shape[1:] != (len(FIELDS), max_sequence_length):
            raise ValueError(f"The arrays in {data_dir!r} have shape {data.shape[1:]} per "
                             f"sequence, expected ({len(FIELDS)}, {max_sequence_length}).")
        if int(data[:, 0].max()) >= REDUCED_VOCAB:
            raise ValueError(f"Token ids in {data_dir!r} exceed the emulated model's reduced "
                             f"vocabulary of {REDUCED_VOCAB} ids.")
        windows = max_sequence_length // REDUCED_CONTEXT
        cut = data[:, :, :windows * REDUCED_CONTEXT].reshape(len(data), len(FIELDS), windows,
                                                              REDUCED_CONTEXT)
        cut = cut.transpose(0, 2, 1, 3).reshape(-1, len(FIELDS), REDUCED_CONTEXT)
        self.tensors = {name: torch.from_numpy(np.ascontiguousarray(cut[:, i]))
                        for i, name in enumerate(FIELDS)}

    def __len__(self) -> int:
        return len(self.tensors["input_ids"])

    def __getitem__(self, index: int) -> dict:
        return {name: tensor[index] for name, tensor in self.tensors.items()}


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    config = params[section]
    max_length = int(config.get("max_sequence_length")
                     or params["model"].get("max_position_embeddings", 2048))
    dataset = GptNpyDataProcessor(str(config["data_dir"]), max_length)
    generator = torch.Generator()
    generator.manual_seed(int(config.get("shuffle_seed") or 0))
    loader = torch.utils.data.DataLoader(dataset, batch_size=TRAIN_BATCH,
                                         shuffle=bool(config.get("shuffle", train)),
                                         drop_last=True, generator=generator)
    loader.aitestbed_samples_per_batch = int(config.get("batch_size", TRAIN_BATCH))
    return loader


def train_input_fn(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def eval_input_fn(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
