"""The trainer YAML of Release 2.10 and the params the run flows take.

    trainer:
      init:
        backend: {backend_type: CSX, cluster_config: {num_csx: 1, job_time_sec: 3600}}
        model: {name: gpt3, hidden_size: 768, ...}
        optimizer: {AdamW: {lr: ..., betas: [...], weight_decay: ...}}
        schedulers: [{LinearLR: {initial_learning_rate: ..., end_learning_rate: ...,
                      total_iters: ...}}]
        precision: {enabled: true, fp16_type: bfloat16, max_gradient_norm: 1.0}
        loop: {max_steps: 400, eval_frequency: 400, eval_steps: 100}
        checkpoint: {steps: 400}
        logging: {log_steps: 20}
        seed: 1
      fit: {train_dataloader: {...}, val_dataloader: {...}}
      validate: {val_dataloader: {...}}

Unknown keys are errors, as in the release's pydantic configs ("Extra inputs are
not permitted"); the message names the key's path.
"""

from __future__ import annotations

import os

import yaml

MODELS = {
    "gpt3": "cerebras.modelzoo.models.nlp.gpt3.model:Gpt3Model",
    "gptj": "cerebras.modelzoo.models.nlp.gptj.model:GptjModel",
    "llama": "cerebras.modelzoo.models.nlp.llama.model:LlamaModel",
    "bert": "cerebras.modelzoo.models.nlp.bert.model:BertPretrainModel",
    "esm2": "cerebras.modelzoo.models.nlp.esm2.model:Esm2Model",
    "vision_transformer":
        "cerebras.modelzoo.models.vision.vision_transformer.model:ViTClassificationModel",
    "dit": "cerebras.modelzoo.models.vision.dit.model:DiTModel",
}
DATA_PROCESSORS = {
    "GptNpyDataProcessor": "cerebras.modelzoo.data.nlp.gpt:GptNpyDataProcessor",
    "BertCSVDataProcessor": "cerebras.modelzoo.data.nlp.bert:BertCSVDataProcessor",
    "ESM2NpyDataProcessor": "cerebras.modelzoo.data.nlp.esm2:ESM2NpyDataProcessor",
    "ImageNetNpyDataProcessor":
        "cerebras.modelzoo.data.vision.imagenet:ImageNetNpyDataProcessor",
    "DiTLatentDataProcessor": "cerebras.modelzoo.data.vision.dit:DiTLatentDataProcessor",
}
INIT_KEYS = {"backend", "model", "optimizer", "schedulers", "precision", "loop", "checkpoint",
             "logging", "seed", "callbacks", "model_dir"}
SECTIONS = {
    "backend": {"backend_type", "cluster_config"},
    "cluster_config": {"num_csx", "job_time_sec", "mount_dirs", "python_paths",
                       "num_workers_per_csx", "max_wgt_servers", "max_act_per_csx"},
    "precision": {"enabled", "fp16_type", "precision_opt_level", "max_gradient_norm",
                  "log_loss_scale", "loss_scaling_factor"},
    "loop": {"max_steps", "num_steps", "eval_frequency", "eval_steps"},
    "checkpoint": {"steps", "save_initial_checkpoint", "disable_strict_checkpoint_loading"},
    "logging": {"log_steps", "log_level"},
    "dataloader": {"data_processor", "data_dir", "batch_size", "shuffle", "shuffle_seed",
                   "num_workers", "prefetch_factor", "persistent_workers",
                   "max_sequence_length", "vocab_size", "vocab_file", "max_predictions_per_seq",
                   "mlm_fraction", "split", "augment", "image_size", "num_classes",
                   "micro_batch_size"},
}


class ConfigError(ValueError):
    pass


def _extra(path: str, mapping, allowed: set[str]) -> None:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{path}: Input should be a valid dictionary")
    for key in mapping:
        if key not in allowed:
            raise ConfigError(f"{path}.{key}: Extra inputs are not permitted")


def load(path: str) -> dict:
    try:
        with open(path) as stream:
            config = yaml.safe_load(stream)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(config, dict) or "trainer" not in config:
        raise ConfigError(f"{path}: a trainer config needs a top-level `trainer:` section "
                          "(init, fit, validate)")
    trainer = config["trainer"]
    _extra("trainer", trainer, {"init", "fit", "validate", "validate_all"})
    init = trainer.get("init")
    _extra("trainer.init", init, INIT_KEYS)
    for name in ("backend", "precision", "loop", "checkpoint", "logging"):
        if name in init:
            _extra(f"trainer.init.{name}", init[name], SECTIONS[name])
    if "cluster_config" in init.get("backend", {}):
        _extra("trainer.init.backend.cluster_config", init["backend"]["cluster_config"],
               SECTIONS["cluster_config"])
    model = init.get("model")
    if not isinstance(model, dict) or model.get("name") not in MODELS:
        raise ConfigError(f"trainer.init.model.name: {(model or {}).get('name')!r} is not a "
                          f"model of this modelzoo (emulated: {', '.join(MODELS)})")
    for mode in ("fit", "validate"):
        for key, loader in (trainer.get(mode) or {}).items():
            _extra(f"trainer.{mode}.{key}", loader, SECTIONS["dataloader"])
            if loader.get("data_processor") not in DATA_PROCESSORS:
                raise ConfigError(f"trainer.{mode}.{key}.data_processor: "
                                  f"{loader.get('data_processor')!r} is not a data processor "
                                  f"of this modelzoo (emulated: {', '.join(DATA_PROCESSORS)})")
    return config


def _int(value, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{path}: Input should be a non-negative integer, got {value!r}")
    return value


def to_params(config: dict, args) -> dict:
    """The params of the flow (trainer.flow): model, the inputs, runconfig and the rest."""
    trainer = config["trainer"]
    init = trainer["init"]
    backend = init.get("backend") or {}
    cluster = backend.get("cluster_config") or {}
    loop = init.get("loop") or {}
    fitting = args.mode == "train_and_eval"
    section = trainer.get("fit" if fitting else "validate") or {}
    if fitting and "train_dataloader" not in section:
        raise ConfigError("trainer.fit.train_dataloader: Field required (cszoo fit trains)")
    val = section.get("val_dataloader") or (trainer.get("validate") or {}).get("val_dataloader")
    if not fitting and not val:
        raise ConfigError("trainer.validate.val_dataloader: Field required (cszoo validate)")
    if args.num_csx is not None and args.num_csx < 1:
        raise ConfigError(f"--num_csx must be at least 1, got {args.num_csx}")
    model_dir = args.model_dir
    runconfig = {
        "mode": args.mode,
        "model_dir": os.path.abspath(model_dir), "model_dir_shown": model_dir.rstrip("/"),
        "checkpoint_path": os.path.abspath(args.checkpoint_path) if args.checkpoint_path
        else None,
        "load_checkpoint_states": args.load_checkpoint_states,
        "max_steps": _int(loop.get("max_steps"), "trainer.init.loop.max_steps"),
        "eval_frequency": _int(loop.get("eval_frequency"), "trainer.init.loop.eval_frequency"),
        "eval_steps": _int(loop.get("eval_steps"), "trainer.init.loop.eval_steps"),
        "checkpoint_steps": _int((init.get("checkpoint") or {}).get("steps"),
                                 "trainer.init.checkpoint.steps"),
        "log_steps": _int((init.get("logging") or {}).get("log_steps"),
                          "trainer.init.logging.log_steps") or 1,
        "seed": init.get("seed", 1),
        "num_csx": args.num_csx or cluster.get("num_csx") or 1,
        "job_time_sec": cluster.get("job_time_sec"),
    }
    if fitting and not runconfig["max_steps"]:
        raise ConfigError("trainer.init.loop.max_steps: Field required")
    return {"model": dict(init["model"]), "optimizer": init.get("optimizer") or {},
            "schedulers": init.get("schedulers") or [], "precision": init.get("precision") or {},
            "train_input": dict(section["train_dataloader"]) if fitting else None,
            "eval_input": dict(val) if val else None, "runconfig": runconfig}
