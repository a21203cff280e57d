"""The modes a run can be started in (runconfig.mode)."""

TRAIN = "train"
EVAL = "eval"
EVAL_ALL = "eval_all"
TRAIN_AND_EVAL = "train_and_eval"
INFERENCE = "inference"

VALID_MODES = [TRAIN, EVAL, EVAL_ALL, TRAIN_AND_EVAL, INFERENCE]


def is_valid(mode: str) -> bool:
    return mode in VALID_MODES


def get_modes() -> list[str]:
    return list(VALID_MODES)
