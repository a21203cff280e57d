"""Train UNet: python run.py {CPU,GPU,CSX} -p configs/params_severstal_binary_rawds.yaml."""

import os
import sys

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../..")))

from modelzoo.common.pytorch.run_utils import run  # noqa: E402
from modelzoo.vision.pytorch.unet.data import (  # noqa: E402
    get_eval_dataloader,
    get_train_dataloader,
)
from modelzoo.vision.pytorch.unet.model import UNetModel  # noqa: E402


def main():
    run(UNetModel, get_train_dataloader, get_eval_dataloader)


if __name__ == "__main__":
    main()
