"""Train GPT-J: python run.py CSX --num_csx=2 -p configs/params_gptj_6B_sampleds.yaml -m train."""

import os
import sys

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../..")))

from modelzoo.common.pytorch.run_utils import run  # noqa: E402
from modelzoo.transformers.pytorch.gptj.data import (  # noqa: E402
    get_eval_dataloader,
    get_train_dataloader,
)
from modelzoo.transformers.pytorch.gptj.model import GptjModel  # noqa: E402


def main():
    run(GptjModel, get_train_dataloader, get_eval_dataloader)


if __name__ == "__main__":
    main()
