"""The runconfig section of params.yaml and its JSON Schema (additionalProperties: false)."""

from __future__ import annotations

import jsonschema

INTEGER, STRING, BOOLEAN = "integer", "string", "boolean"
ARRAY, NULL = "array", "null"

RUNCONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "target_device": {"type": STRING}, "mode": {"type": STRING},
        "model_dir": {"type": STRING}, "checkpoint_path": {"type": [STRING, NULL]},
        "logging": {"type": [STRING, NULL]}, "max_steps": {"type": [INTEGER, NULL]},
        "eval_steps": {"type": [INTEGER, NULL]}, "num_epochs": {"type": [INTEGER, NULL]},
        "num_steps": {"type": [INTEGER, NULL]}, "steps_per_epoch": {"type": [INTEGER, NULL]},
        "log_steps": {"type": INTEGER}, "checkpoint_steps": {"type": [INTEGER, NULL]},
        "save_initial_checkpoint": {"type": BOOLEAN}, "save_losses": {"type": BOOLEAN},
        "seed": {"type": [INTEGER, NULL]}, "autoload_last_checkpoint": {"type": BOOLEAN},
        "check_loss_values": {"type": BOOLEAN},
        "disable_strict_checkpoint_loading": {"type": [BOOLEAN, NULL]},
        "load_checkpoint_states": {"type": [STRING, NULL]},
        "wsc_log_level": {"type": [ARRAY, NULL]},
        "compile_only": {"type": [BOOLEAN, NULL]}, "validate_only": {"type": [BOOLEAN, NULL]},
        "num_workers_per_csx": {"type": INTEGER}, "compile_dir": {"type": [STRING, NULL]},
        "job_labels": {"type": ARRAY}, "mount_dirs": {"type": ARRAY},
        "python_paths": {"type": ARRAY}, "debug_args_path": {"type": [STRING, NULL]},
        "credentials_path": {"type": [STRING, NULL]}, "mgmt_address": {"type": [STRING, NULL]},
        "job_time_sec": {"type": [INTEGER, NULL]},
        "disable_version_check": {"type": [BOOLEAN, NULL]}, "num_csx": {"type": INTEGER},
        "num_wgt_servers": {"type": [INTEGER, NULL]},
        "num_act_servers": {"type": [INTEGER, NULL]},
    },
}


OBJECT = "object"
MODE_SECTIONS = {"train": ("train_input",), "eval": ("eval_input",),
                 "eval_all": ("eval_input",), "train_and_eval": ("train_input", "eval_input")}


def params_schema(mode: str) -> dict:
    """The sections a run in `mode` reads: model and the mode's input(s), each a mapping."""
    required = ["model", *MODE_SECTIONS.get(mode, ())]
    return {"type": OBJECT, "required": required,
            "properties": {name: {"type": OBJECT} for name in required}}


class ValidationError(ValueError):
    pass


def validate(instance, schema: dict = RUNCONFIG_SCHEMA) -> None:
    """Raise ValidationError with jsonschema's message for the first problem found."""
    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError as err:
        raise ValidationError(err.message) from None
