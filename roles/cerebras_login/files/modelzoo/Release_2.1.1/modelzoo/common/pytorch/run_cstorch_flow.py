"""The training and evaluation loops, written once for CPU and CSX with cstorch.

run_cstorch_flow(params, model_fn, train_data_fn, eval_data_fn) runs where the
model trains: on this machine for CPU, on the appliance's worker for CSX (see
cerebras_pytorch.appliance.run_program). Paths in params are absolute by then.
The loss and the rates of each logged step go to TensorBoard event files in
<model_dir>/train (and the evaluation's in <model_dir>/eval), or runconfig's summary_dir:
`tensorboard --logdir <model_dir>` shows them.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time

import cerebras_pytorch as cstorch
import torch

CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)(_\d{8}_\d{6})?\.mdl$")
STATES = ("model", "optimizer", "lr_scheduler", "grad_scaler", "dataloader")


class RunError(Exception):
    """A run that cannot proceed as configured."""


def _latest_checkpoint(model_dir: str) -> str | None:
    try:
        names = os.listdir(model_dir)
    except FileNotFoundError:
        return None
    found = [(int(m.group(1)), m.group(2) or "", name) for name in names
             if (m := CHECKPOINT_PATTERN.match(name))]
    return os.path.join(model_dir, max(found)[2]) if found else None


def _find_checkpoint(runconfig: dict) -> str | None:
    if runconfig.get("checkpoint_path"):
        return runconfig["checkpoint_path"]
    model_dir = runconfig["model_dir"]
    logging.info("Checkpoint autoloading is enabled. Looking for latest checkpoint in "
                 f"\"{model_dir}\" directory with the following naming convention: "
                 "`checkpoint_(step)(_timestamp)?.mdl`.")
    path = _latest_checkpoint(model_dir)
    if path is None:
        logging.info(f"No checkpoints were found in \"{model_dir}\".")
    else:
        logging.info(f"Found latest checkpoint at \"{path}\". This checkpoint will be loaded.")
    return path


def _load_checkpoint(runconfig: dict, model, optimizer=None, grad_scaler=None) -> int:
    """Restore the states asked for; the global step the checkpoint was taken at (or 0)."""
    path = _find_checkpoint(runconfig)
    if path is None:
        logging.info("No checkpoint was provided. Using randomly initialized model parameters.")
        return 0
    logging.info(f"Loading weights from checkpoint {path}")
    state = cstorch.load(path)
    wanted = runconfig.get("load_checkpoint_states")
    wanted = set(wanted.split(",")) if wanted else set(STATES)
    strict = not runconfig.get("disable_strict_checkpoint_loading")
    if "model" in wanted:
        model.load_state_dict(state["model"], strict=strict)
    if "optimizer" in wanted and optimizer is not None and state.get("optimizer"):
        optimizer.load_state_dict(state["optimizer"])
    if "grad_scaler" in wanted and grad_scaler is not None and state.get("grad_scaler"):
        grad_scaler.load_state_dict(state["grad_scaler"])
    return int(state.get("global_step", 0))


def _checkpoint_path(model_dir: str, step: int) -> str:
    path = os.path.join(model_dir, f"checkpoint_{step}.mdl")
    if os.path.exists(path):
        path = os.path.join(model_dir, f"checkpoint_{step}_{time.strftime('%Y%m%d_%H%M%S')}.mdl")
    return path


def total_steps(runconfig: dict, steps_per_epoch_default: int) -> int:
    """min(num_epochs x steps_per_epoch, max_steps), or whichever of them is given."""
    if runconfig.get("num_steps"):
        return int(runconfig["num_steps"])
    max_steps = runconfig.get("max_steps")
    if runconfig.get("num_epochs"):
        per_epoch = runconfig.get("steps_per_epoch") or steps_per_epoch_default
        epochs = int(runconfig["num_epochs"]) * int(per_epoch)
        return min(epochs, int(max_steps)) if max_steps else epochs
    if max_steps:
        return int(max_steps)
    raise RunError("One of num_epochs, num_steps or max_steps must be set in the runconfig.")


def _backend(runconfig: dict) -> cstorch.Backend:
    device = runconfig.get("target_device", "CPU")
    return cstorch.backend(device, artifact_dir=os.path.join(runconfig["model_dir"],
                                                             "cerebras_logs"),
                           compile_dir=runconfig.get("compile_dir"),
                           compile_only=bool(runconfig.get("compile_only")),
                           validate_only=bool(runconfig.get("validate_only")))


def _cs_config(runconfig: dict) -> cstorch.utils.CSConfig:
    return cstorch.utils.CSConfig(num_csx=runconfig.get("num_csx", 1),
                                  mount_dirs=runconfig.get("mount_dirs", []),
                                  python_paths=runconfig.get("python_paths", []))


def _optimizer(params: dict, model: torch.nn.Module) -> torch.optim.Optimizer:
    config = params.get("optimizer", {})
    kwargs = {"lr": float(config.get("learning_rate", 0.001))}
    weight_decay = config.get("weight_decay", config.get("weight_decay_rate"))
    if weight_decay is not None:
        kwargs["weight_decay"] = float(weight_decay)
    optimizer_type = config.get("optimizer_type", "SGD")
    if str(optimizer_type).lower() == "sgd":
        kwargs["momentum"] = float(config.get("momentum", 0.0))
    return cstorch.optim.configure_optimizer(optimizer_type, model.parameters(), **kwargs)


def _check_loss(loss: float) -> None:
    if not math.isfinite(loss):
        raise cstorch.appliance.ApplianceNanError(
            "NaN loss detected. Please try a different learning rate or loss scaling.")


def _writer(runconfig: dict, mode: str):
    """The run's TensorBoard writer: <model_dir>/<mode>, or runconfig's summary_dir."""
    log_dir = runconfig.get("summary_dir") or os.path.join(runconfig["model_dir"], mode)
    return cstorch.utils.tensorboard.SummaryWriter(log_dir=log_dir)


def run_cstorch_train(params: dict, model_fn, train_data_fn) -> None:
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    torch.manual_seed(int(runconfig.get("seed") or 0))
    model = model_fn(params)
    compiled_model = cstorch.compile(model, backend)
    optimizer = _optimizer(params, model)
    grad_scaler = None
    if params.get("model", {}).get("mixed_precision"):
        grad_scaler = cstorch.amp.GradScaler(
            loss_scale=params.get("optimizer", {}).get("loss_scaling_factor", 1.0))
    global_step = _load_checkpoint(runconfig, model, optimizer, grad_scaler)

    dataloader = cstorch.utils.data.DataLoader(train_data_fn, params)
    steps = total_steps(runconfig, len(dataloader))
    if global_step >= steps:
        raise RunError(f"Global step {global_step} already exceeds max step {steps}.")
    log_steps = int(runconfig.get("log_steps") or 1)
    checkpoint_steps = min(int(runconfig.get("checkpoint_steps") or steps), steps)
    writer = _writer(runconfig, "train")
    executor = cstorch.utils.data.DataExecutor(
        dataloader, num_steps=steps - global_step, checkpoint_steps=checkpoint_steps,
        cs_config=_cs_config(runconfig), writer=writer)

    max_gradient_norm = params.get("optimizer", {}).get("max_gradient_norm")

    @cstorch.trace
    def training_step(batch):
        optimizer.zero_grad()
        loss = compiled_model(batch)
        if grad_scaler is None:
            loss.backward()
        else:
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
        if max_gradient_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(max_gradient_norm))
        if grad_scaler is None:
            optimizer.step()
        else:
            grad_scaler.step(optimizer)
            grad_scaler.update()
        return loss

    @cstorch.step_closure
    def post_training_step(step, loss):
        value = float(loss)
        _check_loss(value)
        if step % log_steps == 0 or executor.on_final_iteration:
            logging.info(f"| Train Device={backend.device}, Step={step}, Loss={value:.5f}, "
                         f"Rate={executor.profiler.rate():.2f} samples/sec, "
                         f"GlobalRate={executor.profiler.global_rate():.2f} samples/sec")
            writer.add_scalar("loss", value, step)
            writer.add_scalar("local_samples_per_sec", executor.profiler.rate(), step)
            writer.add_scalar("avg_samples_per_sec", executor.profiler.global_rate(), step)

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        logging.info(f"Saving checkpoint at step {step}")
        path = _checkpoint_path(runconfig["model_dir"], step)
        cstorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "lr_scheduler": None,
                      "grad_scaler": grad_scaler.state_dict() if grad_scaler else None,
                      "dataloader": {"samples_streamed": executor.profiler.total_samples},
                      "global_step": step}, path)
        logging.info(f"Saved checkpoint {path}")

    model.train()
    step = global_step
    for batch in executor:
        step += 1
        loss = training_step(batch)
        post_training_step(step, loss)
        if step % checkpoint_steps == 0 or executor.on_final_iteration:
            save_checkpoint(step)
    logging.info("Training completed successfully!")
    logging.info(f"Processed {executor.profiler.total_samples} sample(s) in "
                 f"{executor.profiler.total_time} seconds.")


def run_cstorch_eval(params: dict, model_fn, eval_data_fn) -> None:
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    torch.manual_seed(int(runconfig.get("seed") or 0))
    model = model_fn(params)
    compiled_model = cstorch.compile(model, backend)
    _load_checkpoint(runconfig, model)
    dataloader = cstorch.utils.data.DataLoader(eval_data_fn, params)
    steps = int(runconfig.get("eval_steps") or len(dataloader))
    log_steps = int(runconfig.get("log_steps") or 1)
    writer = _writer(runconfig, "eval")
    executor = cstorch.utils.data.DataExecutor(dataloader, num_steps=steps,
                                               cs_config=_cs_config(runconfig), writer=writer)
    losses: list[float] = []

    @cstorch.trace
    @torch.no_grad()
    def eval_step(batch):
        return compiled_model(batch)

    @cstorch.step_closure
    def post_eval_step(step, loss):
        losses.append(float(loss))
        _check_loss(losses[-1])
        if step % log_steps == 0 or executor.on_final_iteration:
            logging.info(f"| Eval Device={backend.device}, Step={step}, Loss={losses[-1]:.5f}, "
                         f"Rate={executor.profiler.rate():.2f} samples/sec, "
                         f"GlobalRate={executor.profiler.global_rate():.2f} samples/sec")

    model.eval()
    for step, batch in enumerate(executor, start=1):
        post_eval_step(step, eval_step(batch))
    logging.info(f"Avg Eval Loss: {sum(losses) / len(losses)}")
    writer.add_scalar("loss", sum(losses) / len(losses), len(losses))
    writer.flush()
    logging.info("Evaluation completed successfully!")
    logging.info(f"Processed {executor.profiler.total_samples} sample(s) in "
                 f"{executor.profiler.total_time} seconds.")


def run_cstorch_flow(params: dict, model_fn, train_data_fn=None, eval_data_fn=None) -> None:
    mode = params["runconfig"].get("mode", "train")
    if mode == "train":
        if train_data_fn is None:
            raise RunError("Training needs a train_data_fn.")
        run_cstorch_train(params, model_fn, train_data_fn)
    elif mode == "eval":
        if eval_data_fn is None:
            raise RunError("Evaluation needs an eval_data_fn.")
        run_cstorch_eval(params, model_fn, eval_data_fn)
    else:
        raise RunError(f"Mode {mode!r} is run by run.py, one train or eval run at a time.")
