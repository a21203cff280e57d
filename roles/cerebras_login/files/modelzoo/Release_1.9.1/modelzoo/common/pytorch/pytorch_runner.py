"""The Release 1.9.1 training and evaluation loops, written once for CPU and CSX.

run_pytorch_flow(params, model_fn, train_data_fn, eval_data_fn) runs where the model
trains: on this machine for CPU, on the appliance's worker for CSX (see
cerebras_pytorch.appliance.run_program). It logs as R1.9's PyTorch runners did:

    | Train Device=xla:0, Step=N, Loss=x, Rate=r samples/sec, GlobalRate=g samples/sec
    | Train Device=cpu, Step=N, Loss=x, Time=HH:MM:SS
    Saving checkpoint at global step N / Saving step N in dataloader checkpoint /
    Saved checkpoint at global step: N
    Training Complete. Completed S sample(s) in T seconds.

and returns {"samples": S, "seconds": T}, as the appliance's execute job does.
Checkpoints are model_dir/checkpoint_<step>.mdl; there is no autoloading (a run
starts from --checkpoint_path, or from scratch). The loss of each logged training step
goes to TensorBoard event files in model_dir/train (`tensorboard --logdir <model_dir>`).
"""

from __future__ import annotations

import logging
import math
import os
import time

import cerebras_pytorch as cstorch
import torch

CSX_DEVICE, CPU_DEVICE = "xla:0", "cpu"


class RunError(Exception):
    """A run that cannot proceed as configured."""


def device_name(backend: cstorch.Backend) -> str:
    return CSX_DEVICE if backend.is_csx else CPU_DEVICE


def total_steps(runconfig: dict, steps_per_epoch_default: int) -> int:
    """num_steps, else min(num_epochs x steps_per_epoch, max_steps), or whichever is given."""
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
    return cstorch.backend(runconfig.get("target_device", "CPU"),
                           artifact_dir=os.path.join(runconfig["model_dir"], "cerebras_logs"),
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


def _load_checkpoint(runconfig: dict, model, optimizer=None, grad_scaler=None) -> int:
    """Restore --checkpoint_path, if given; the global step to continue from."""
    path = runconfig.get("checkpoint_path")
    if not path:
        return 0
    logging.info(f"Loading weights from checkpoint {path}")
    state = cstorch.load(path)
    model.load_state_dict(state["model"])
    if runconfig.get("is_pretrained_checkpoint"):
        return 0
    if optimizer is not None and state.get("optimizer"):
        optimizer.load_state_dict(state["optimizer"])
    if grad_scaler is not None and state.get("grad_scaler"):
        grad_scaler.load_state_dict(state["grad_scaler"])
    return int(state.get("global_step", 0))


def _check_loss(loss: float) -> None:
    if not math.isfinite(loss):
        raise cstorch.appliance.ApplianceNanError(
            "NaN loss detected. Please try a different learning rate or loss scaling.")


def _elapsed(start: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(time.monotonic() - start))


def run_pytorch_train(params: dict, model_fn, train_data_fn) -> dict:
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    device = device_name(backend)
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
    writer = cstorch.utils.tensorboard.SummaryWriter(
        log_dir=os.path.join(runconfig["model_dir"], "train"))
    executor = cstorch.utils.data.DataExecutor(
        dataloader, num_steps=steps - global_step, checkpoint_steps=checkpoint_steps,
        cs_config=_cs_config(runconfig), writer=writer)
    max_gradient_norm = params.get("optimizer", {}).get("max_gradient_norm")
    started = time.monotonic()

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
        if not (step % log_steps == 0 or executor.on_final_iteration):
            return
        writer.add_scalar("loss", value, step)
        if backend.is_csx:
            logging.info(f"| Train Device={device}, Step={step}, Loss={value:.5f}, "
                         f"Rate={executor.profiler.rate():.2f} samples/sec, "
                         f"GlobalRate={executor.profiler.global_rate():.2f} samples/sec")
        else:
            logging.info(f"| Train Device={device}, Step={step}, Loss={value:.5f}, "
                         f"Time={_elapsed(started)}")

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        logging.info(f"Saving checkpoint at global step {step}")
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "grad_scaler": grad_scaler.state_dict() if grad_scaler else None,
                 "global_step": step}
        logging.info(f"Saving step {step} in dataloader checkpoint")
        state["dataloader"] = {"samples_streamed": executor.profiler.total_samples}
        cstorch.save(state, os.path.join(runconfig["model_dir"], f"checkpoint_{step}.mdl"))
        logging.info(f"Saved checkpoint at global step: {step}")

    model.train()
    step = global_step
    for batch in executor:
        step += 1
        loss = training_step(batch)
        post_training_step(step, loss)
        if step % checkpoint_steps == 0 or executor.on_final_iteration:
            save_checkpoint(step)
    samples, seconds = executor.profiler.total_samples, executor.profiler.total_time
    logging.info(f"Training Complete. Completed {samples} sample(s) in {seconds} seconds.")
    return {"samples": samples, "seconds": seconds}


def run_pytorch_eval(params: dict, model_fn, eval_data_fn) -> dict:
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    device = device_name(backend)
    torch.manual_seed(int(runconfig.get("seed") or 0))
    model = model_fn(params)
    compiled_model = cstorch.compile(model, backend)
    _load_checkpoint(runconfig, model)
    dataloader = cstorch.utils.data.DataLoader(eval_data_fn, params)
    steps = int(runconfig.get("eval_steps") or len(dataloader))
    log_steps = int(runconfig.get("log_steps") or 1)
    executor = cstorch.utils.data.DataExecutor(dataloader, num_steps=steps,
                                               cs_config=_cs_config(runconfig))
    losses: list[float] = []
    started = time.monotonic()

    @cstorch.trace
    @torch.no_grad()
    def eval_step(batch):
        return compiled_model(batch)

    @cstorch.step_closure
    def post_eval_step(step, loss):
        losses.append(float(loss))
        _check_loss(losses[-1])
        if not (step % log_steps == 0 or executor.on_final_iteration):
            return
        if backend.is_csx:
            logging.info(f"| Eval Device={device}, Step={step}, Loss={losses[-1]:.5f}, "
                         f"Rate={executor.profiler.rate():.2f} samples/sec, "
                         f"GlobalRate={executor.profiler.global_rate():.2f} samples/sec")
        else:
            logging.info(f"| Eval Device={device}, Step={step}, Loss={losses[-1]:.5f}, "
                         f"Time={_elapsed(started)}")

    model.eval()
    for step, batch in enumerate(executor, start=1):
        post_eval_step(step, eval_step(batch))
    samples, seconds = executor.profiler.total_samples, executor.profiler.total_time
    logging.info(f"Avg Eval Loss: {sum(losses) / len(losses)}")
    logging.info(f"Evaluation Complete. Completed {samples} sample(s) in {seconds} seconds.")
    return {"samples": samples, "seconds": seconds}


def run_pytorch_flow(params: dict, model_fn, train_data_fn=None, eval_data_fn=None) -> dict:
    mode = params["runconfig"].get("mode", "train")
    if mode == "train":
        if train_data_fn is None:
            raise RunError("Training needs a train_data_fn.")
        return run_pytorch_train(params, model_fn, train_data_fn)
    if mode == "eval":
        if eval_data_fn is None:
            raise RunError("Evaluation needs an eval_data_fn.")
        return run_pytorch_eval(params, model_fn, eval_data_fn)
    raise RunError(f"Mode {mode!r} is run by run.py, one train or eval run at a time.")
