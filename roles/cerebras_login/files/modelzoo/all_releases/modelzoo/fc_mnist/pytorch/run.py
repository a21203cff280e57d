"""Train or evaluate fc_mnist: python run.py {CPU,GPU,CSX} -p configs/params.yaml -m train."""

import os
import sys

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))

from modelzoo.common.pytorch.run_utils import run  # noqa: E402
from modelzoo.fc_mnist.pytorch.data import get_eval_dataloader, get_train_dataloader  # noqa: E402
from modelzoo.fc_mnist.pytorch.model import MNISTModel  # noqa: E402


def main():
    run(MNISTModel, get_train_dataloader, get_eval_dataloader)


if __name__ == "__main__":
    main()
