"""GPT samples from .npy files (GptNpyDataProcessor), for the reduced-scale GPT models.

data_dir holds *.npy arrays of shape (sequences, 3, max_sequence_length): input_ids,
attention_mask and labels (the sample sets: /software/cerebras/dataset/OWT/Pytorch,
/software/cerebras/dataset/gptj, /software/datasets/llama_data_32K). The reduced
models train on windows of REDUCED_CONTEXT tokens cut from them, 4 windows a step,
each step standing for the dataloader's batch_size sequences (the appliance times
the nominal batch). Token ids must be below the reduced vocabulary.
"""

from __future__ import annotations

import numpy as np
import torch
from cerebras.modelzoo.data.common import data_files

FIELDS = ("input_ids", "attention_mask", "labels")
REDUCED_CONTEXT = 64
REDUCED_VOCAB = 512


class GptNpyDataProcessor(torch.utils.data.Dataset):
    def __init__(self, config: dict, params: dict):
        data_dir = str(config["data_dir"])
        max_sequence_length = int(config.get("max_sequence_length")
                                  or params["model"].get("max_position_embeddings", 2048))
        names = data_files(data_dir, ".npy", "GPT data")
        data = np.concatenate([np.load(name) for name in names]).astype(np.int64)
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

