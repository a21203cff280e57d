"""GPT samples from .npy files (GptNpyDataProcessor).

data_dir holds *.npy arrays of shape (sequences, 3, max_sequence_length): input_ids,
attention_mask and labels (at ALCF: /software/cerebras/dataset/gptj/msl2048/train).
The reduced model trains on windows of REDUCED_CONTEXT tokens cut from them,
TRAIN_BATCH windows a step; token ids must be below its vocabulary of 512.
"""

from __future__ import annotations

import numpy as np
import torch

from modelzoo.common.pytorch.input_utils import DictDataset, data_files, reduced_loader
from modelzoo.transformers.pytorch.gptj.model import REDUCED, REDUCED_CONTEXT

FIELDS = ("input_ids", "attention_mask", "labels")
TRAIN_BATCH = 4


def read_windows(data_dir: str, max_sequence_length: int) -> dict[str, torch.Tensor]:
    arrays = [np.load(path) for path in data_files(data_dir, ".npy", "GPT data")]
    data = np.concatenate(arrays).astype(np.int64)
    if data.ndim != 3 or data.shape[1:] != (len(FIELDS), max_sequence_length):
        raise ValueError(f"The arrays in {data_dir!r} have shape {data.shape[1:]} per "
                         f"sequence, expected ({len(FIELDS)}, {max_sequence_length}).")
    if int(data[:, 0].max()) >= REDUCED["vocab_size"]:
        raise ValueError(f"Token ids in {data_dir!r} exceed the emulated model's reduced "
                         f"vocabulary of {REDUCED['vocab_size']} ids.")
    windows = max_sequence_length // REDUCED_CONTEXT
    cut = data[:, :, :windows * REDUCED_CONTEXT].reshape(len(data), len(FIELDS), windows,
                                                          REDUCED_CONTEXT)
    cut = cut.transpose(0, 2, 1, 3).reshape(-1, len(FIELDS), REDUCED_CONTEXT)
    return {name: torch.from_numpy(np.ascontiguousarray(cut[:, i]))
            for i, name in enumerate(FIELDS)}


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    input_params = params[section]
    windows = read_windows(str(input_params["data_dir"]),
                           int(input_params.get("max_sequence_length", 2048)))
    return reduced_loader(DictDataset(windows), params, section, TRAIN_BATCH, train)


def get_train_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def get_eval_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
