"""BERT pre-training samples from CSV files (BertCSVDataProcessor).

data_dir holds *.csv files with the columns of COLUMNS: statically masked samples of
max_sequence_length tokens, list columns space-separated integers (the sample set:
/software/cerebras/dataset/bert_large/msl128/train). Token ids must be below the
reduced model's vocabulary of 512.
"""

from __future__ import annotations

import csv

import torch
from cerebras.modelzoo.data.common import data_files

COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "masked_lm_positions",
           "masked_lm_ids", "masked_lm_weights", "next_sentence_label")
REDUCED_VOCAB = 512


class BertCSVDataProcessor(torch.utils.data.Dataset):
    REDUCED_BATCH = 2  # 128 tokens a sample: the docs' 1,220 steps in well under a minute

    def __init__(self, config: dict, params: dict):
        data_dir = str(config["data_dir"])
        msl = int(config.get("max_sequence_length", 128))
        columns: dict[str, list] = {name: [] for name in COLUMNS}
        for path in data_files(data_dir, ".csv", "BERT CSV data"):
            with open(path, newline="") as stream:
                for row in csv.DictReader(stream):
                    missing = [name for name in COLUMNS if name not in row]
                    if missing:
                        raise ValueError(f"{path}: no column {missing[0]!r} (a BERT CSV file "
                                         f"has {', '.join(COLUMNS)})")
                    for name in COLUMNS:
                        columns[name].append([int(value) for value in row[name].split()])
        self.tensors = {name: torch.tensor(values) for name, values in columns.items()}
        self.tensors["next_sentence_label"] = self.tensors["next_sentence_label"].flatten()
        if self.tensors["input_ids"].shape[1] != msl:
            raise ValueError(f"The samples in {data_dir!r} have "
                             f"{self.tensors['input_ids'].shape[1]} tokens, but "
                             f"max_sequence_length is {msl}.")
        if int(self.tensors["input_ids"].max()) >= REDUCED_VOCAB:
            raise ValueError(f"Token ids in {data_dir!r} exceed the emulated model's reduced "
                             f"vocabulary of {REDUCED_VOCAB} ids.")

    def __len__(self) -> int:
        return len(self.tensors["input_ids"])

    def __getitem__(self, index: int) -> dict:
        return {name: tensor[index] for name, tensor in self.tensors.items()}
