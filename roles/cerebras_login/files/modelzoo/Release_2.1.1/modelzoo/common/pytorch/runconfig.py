"""The runconfig section of params.yaml: its schema and a validator for it.

The schema is JSON Schema (additionalProperties: false); the validator covers the
keywords it uses and words its errors as the jsonschema package does.
"""

from __future__ import annotations

INTEGER, NUMBER, STRING, BOOLEAN = "integer", "number", "string", "boolean"
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


class ValidationError(ValueError):
    pass


def _is(value, kind: str) -> bool:
    if kind == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {STRING: str, BOOLEAN: bool, ARRAY: list, NULL: type(None),
                              "object": dict}[kind])


def validate(instance, schema: dict = RUNCONFIG_SCHEMA) -> None:
    """Raise ValidationError with jsonschema's wording for the first problem found."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(instance, kind) for kind in kinds):
            wanted = kinds[0] if len(kinds) == 1 else kinds
            raise ValidationError(f"{instance!r} is not of type {wanted!r}")
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    if schema.get("additionalProperties") is False:
        extra = [key for key in instance if key not in properties]
        if extra:
            listed = ", ".join(repr(key) for key in extra)
            verb = "was" if len(extra) == 1 else "were"
            raise ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)")
    for key, value in instance.items():
        if key in properties:
            validate(value, properties[key])
