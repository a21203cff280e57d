"""BERT pre-training samples from CSV files (BertCSVDataProcessor).

data_dir holds *.csv files with the columns of COLUMNS, statically masked samples
of max_sequence_length tokens whose list columns are space-separated integers (at
ALCF: /software/cerebras/dataset/bert_large/msl128/train). The reduced model reads
TRAIN_BATCH samples a step; token ids must be below its vocabulary of 512.
"""

from __future__ import annotations

import csv

import torch

from modelzoo.common.pytorch.input_utils import DictDataset, data_files, reduced_loader
from modelzoo.transformers.pytorch.bert.model import REDUCED

COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "masked_lm_positions",
           "masked_lm_ids", "masked_lm_weights", "next_sentence_label")
TRAIN_BATCH = 4


def read_samples(data_dir: str, max_sequence_length: int) -> dict[str, torch.Tensor]:
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for path in data_files(data_dir, ".csv", "BERT CSV data"):
        with open(path, newline="") as stream:
            for row in csv.DictReader(stream):
                for name in COLUMNS:
                    columns[name].append([int(value) for value in row[name].split()])
    tensors = {name: torch.tensor(values) for name, values in columns.items()}
    tensors["next_sentence_label"] = tensors["next_sentence_label"].flatten()
    length = tensors["input_ids"].shape[1]
    if length != max_sequence_length:
        raise ValueError(f"The samples in {data_dir!r} have {length} tokens, but "
                         f"max_sequence_length is {max_sequence_length}.")
    if int(tensors["input_ids"].max()) >= REDUCED["vocab_size"]:
        raise ValueError(f"Token ids in {data_dir!r} exceed the emulated model's reduced "
                         f"vocabulary of {REDUCED['vocab_size']} ids.")
    return tensors


def _loader(params: dict, section: str, train: bool) -> torch.utils.data.DataLoader:
    input_params = params[section]
    samples = read_samples(str(input_params["data_dir"]),
                           int(input_params.get("max_sequence_length", 128)))
    return reduced_loader(DictDataset(samples), params, section, TRAIN_BATCH, train)


def get_train_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "train_input", train=True)


def get_eval_dataloader(params: dict) -> torch.utils.data.DataLoader:
    return _loader(params, "eval_input", train=False)
