"""Pre-train BERT: python run.py {CPU,GPU,CSX} -p configs/bert_large_MSL128_sampleds.yaml."""

import os
import sys

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../..")))

from modelzoo.common.pytorch.run_utils import run  # noqa: E402
from modelzoo.transformers.pytorch.bert.data import (  # noqa: E402
    get_eval_dataloader,
    get_train_dataloader,
)
from modelzoo.transformers.pytorch.bert.model import BertPretrainModel  # noqa: E402


def main():
    run(BertPretrainModel, get_train_dataloader, get_eval_dataloader)


if __name__ == "__main__":
    main()
