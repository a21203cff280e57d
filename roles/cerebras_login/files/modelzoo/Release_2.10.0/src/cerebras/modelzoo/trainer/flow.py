"""What `cszoo fit` and `cszoo validate` run, on the appliance for CSX (or here, for CPU).

fit: train to max_steps; every eval_frequency steps (and at the end) validate on
eval_steps batches; save a checkpoint every checkpoint.steps steps and at the end.
Log lines and checkpoint names are the release's; the rates are the appliance's
(device time on the emulated CS-3). Loss and rates go to TensorBoard event files in
<model_dir>/train and <model_dir>/validate.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import re

import cerebras.pytorch as cstorch
import torch

CHECKPOINT = re.compile(r"^checkpoint_(\d+)\.mdl$")
STATES = ("model", "optimizer", "lr_scheduler", "grad_scaler", "dataloader")


class RunError(Exception):
    pass


def _remaining(executor, steps_left: int) -> str:
    """The time the loop's remaining steps take at its pace so far, as h:mm:ss."""
    done = executor.user_iteration
    seconds = executor.profiler.total_time / done * steps_left if done else 0.0
    return str(datetime.timedelta(seconds=max(0, round(seconds))))


def _backend(runconfig: dict):
    return cstorch.backend(runconfig.get("target_device", "CPU"),
                           artifact_dir=os.path.join(runconfig["model_dir"], "cerebras_logs"),
                           compile_dir=runconfig.get("compile_dir"))


def _optimizer(params: dict, model: torch.nn.Module):
    spec = params.get("optimizer") or {"SGD": {"lr": 0.001}}
    if not isinstance(spec, dict) or len(spec) != 1:
        raise RunError("trainer.init.optimizer must name one optimizer, e.g. AdamW: {lr: ...}")
    (name, kwargs), = spec.items()
    kwargs = dict(kwargs or {})
    kwargs.setdefault("lr", 0.0)  # the schedulers set it
    kwargs.pop("correct_bias", None)
    cls = getattr(cstorch.optim, name, None)
    if cls is None:
        raise RunError(f"trainer.init.optimizer: unknown optimizer {name!r}")
    return cls(model.parameters(), **kwargs)


def _scheduler(params: dict, optimizer):
    built = []
    for item in params.get("schedulers") or []:
        (name, kwargs), = item.items()
        if name == "SequentialLR":
            inner = [_one(optimizer, *next(iter(s.items()))) for s in kwargs["schedulers"]]
            built.append(cstorch.optim.lr_scheduler.SequentialLR(optimizer, inner))
        else:
            built.append(_one(optimizer, name, kwargs))
    return built[0] if built else None


def _one(optimizer, name: str, kwargs: dict):
    cls = getattr(cstorch.optim.lr_scheduler, name, None)
    if cls is None:
        raise RunError(f"trainer.init.schedulers: unknown scheduler {name!r}")
    return cls(optimizer, **kwargs)


def _load(runconfig: dict, model, optimizer=None, scheduler=None) -> int:
    path = runconfig.get("checkpoint_path")
    if not path:
        model_dir = runconfig["model_dir"]
        found = sorted((int(m.group(1)), name) for name in
                       (os.listdir(model_dir) if os.path.isdir(model_dir) else [])
                       if (m := CHECKPOINT.match(name)))
        if not found:
            logging.info("No checkpoint was provided. Using randomly initialized model "
                         "parameters.")
            return 0
        path = os.path.join(model_dir, found[-1][1])
        logging.info(f"Found latest checkpoint at \"{path}\". This checkpoint will be loaded.")
    logging.info(f"Loading weights from checkpoint {path}")
    state = cstorch.load(path)
    wanted = runconfig.get("load_checkpoint_states")
    wanted = set(wanted.split(",")) if wanted else set(STATES)
    model.load_state_dict(state["model"])
    if "optimizer" in wanted and optimizer is not None and state.get("optimizer"):
        optimizer.load_state_dict(state["optimizer"])
    if "lr_scheduler" in wanted and scheduler is not None and state.get("lr_scheduler"):
        scheduler.load_state_dict(state["lr_scheduler"])
    return int(state.get("global_step", 0))


def _writer(runconfig: dict, name: str):
    return cstorch.utils.tensorboard.SummaryWriter(
        log_dir=os.path.join(runconfig["model_dir"], name))


def validate(params: dict, model, compiled, eval_data_fn, global_step: int, device: str,
             writer) -> float:
    runconfig = params["runconfig"]
    dataloader = cstorch.utils.data.DataLoader(eval_data_fn, params)
    steps = int(runconfig.get("eval_steps") or len(dataloader))
    log_steps = int(runconfig.get("log_steps") or 1)
    executor = cstorch.utils.data.DataExecutor(dataloader, num_steps=steps)
    losses, sums = [], {}

    @cstorch.trace
    @torch.no_grad()
    def eval_step(batch):
        return compiled(batch)

    @cstorch.step_closure
    def post_eval_step(step, loss, values):
        losses.append(float(loss))
        for name, value in values.items():
            sums[name] = sums.get(name, 0.0) + float(value)
        if step % log_steps == 0 or executor.on_final_iteration:
            left = _remaining(executor, steps - step)
            logging.info(f"| Eval Device={device}, GlobalStep={global_step}, Batch={step}, "
                         f"Loss={losses[-1]:.5f}, Rate={executor.profiler.rate():.2f} "
                         f"samples/sec, GlobalRate={executor.profiler.global_rate():.2f} "
                         f"samples/sec, LoopTimeRemaining={left}, TimeRemaining={left}")

    model.eval()
    for step, batch in enumerate(executor, start=1):
        loss, values = eval_step(batch)
        post_eval_step(step, loss, values)
    average = sum(losses) / len(losses)
    logging.info(f"Avg Eval Loss: {average}")
    averages = {name: total / len(losses) for name, total in sums.items()}
    metrics = type(model).eval_metrics(average, averages)
    logging.info("Evaluation metrics:")
    for name, value in metrics.items():
        logging.info(f"  - {name} = {value}")
        writer.add_scalar(name, value, global_step)
    writer.add_scalar("loss", average, global_step)
    writer.flush()
    logging.info("Evaluation completed successfully!")
    model.train()
    return average


def fit(params: dict, model_fn, train_data_fn, eval_data_fn=None) -> None:
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    device = backend.device if hasattr(backend, "device") else runconfig["target_device"]
    torch.manual_seed(int(runconfig.get("seed") or 0))
    model = model_fn(params)
    compiled = cstorch.compile(model, backend)
    optimizer = _optimizer(params, model)
    scheduler = _scheduler(params, optimizer)
    global_step = _load(runconfig, model, optimizer, scheduler)
    max_steps = int(runconfig["max_steps"])
    if global_step >= max_steps:
        raise RunError(f"Global step {global_step} already exceeds max step {max_steps}. "
                       "Raise max_steps in the config (trainer.init.loop) to train further.")
    steps = max_steps - global_step
    checkpoint_steps = int(runconfig.get("checkpoint_steps") or max_steps)
    eval_frequency = int(runconfig.get("eval_frequency") or 0)
    log_steps = int(runconfig.get("log_steps") or 1)
    max_norm = (params.get("precision") or {}).get("max_gradient_norm")
    train_writer, eval_writer = _writer(runconfig, "train"), _writer(runconfig, "validate")
    dataloader = cstorch.utils.data.DataLoader(train_data_fn, params)
    executor = cstorch.utils.data.DataExecutor(dataloader, num_steps=steps,
                                               checkpoint_steps=checkpoint_steps,
                                               writer=train_writer)

    @cstorch.trace
    def training_step(batch_):
        optimizer.zero_grad()
        loss = compiled(batch_)
        loss.backward()
        if max_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(max_norm))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return loss

    @cstorch.step_closure
    def post_training_step(step, loss):
        value = float(loss)
        if not math.isfinite(value):
            raise cstorch.appliance.ApplianceNanError(
                "NaN loss detected. Please try a different learning rate or loss scaling.")
        if step % log_steps == 0 or step == max_steps:
            rate = executor.profiler.global_rate()
            left = _remaining(executor, max_steps - step)
            logging.info(f"| Train Device={device}, Step={step}, Loss={value:.5f}, "
                         f"Rate={executor.profiler.rate():.2f} samples/sec, "
                         f"GlobalRate={rate:.2f} samples/sec, "
                         f"LoopTimeRemaining={left}, TimeRemaining={left}")
            train_writer.add_scalar("loss", value, step)
            train_writer.add_scalar("avg_samples_per_sec", rate, step)

    @cstorch.checkpoint_closure
    def save(step):
        logging.info(f"Saving checkpoint at step {step}")
        path = os.path.join(runconfig["model_dir"], f"checkpoint_{step}.mdl")
        cstorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "lr_scheduler": scheduler.state_dict() if scheduler else None,
                      "global_step": step}, path)
        logging.info(f"Saved checkpoint {runconfig['model_dir_shown']}/checkpoint_{step}.mdl")

    def evaluating(step: int) -> bool:
        return bool(eval_data_fn is not None and params.get("eval_input") and eval_frequency
                    and (step % eval_frequency == 0 or step == max_steps))

    model.train()
    step = global_step
    batches = iter(executor)
    for batch_ in batches:
        step += 1
        post_training_step(step, training_step(batch_))
        if step == max_steps:
            break  # the last step's checkpoint and validation follow the loop
        if step % checkpoint_steps == 0:
            save(step)
        if evaluating(step):
            validate(params, model, compiled, eval_data_fn, step, device, eval_writer)
    for _ in batches:  # resumes the executor: it counts the last step, then ends
        pass
    save(step)
    if evaluating(step):
        validate(params, model, compiled, eval_data_fn, step, device, eval_writer)
    # the run's time so far: its steps, checkpoints and validations, as the release counts
    samples, seconds = executor.profiler.total_samples, executor.profiler.total_time
    train_writer.flush()
    logging.info("Training completed successfully!")
    logging.info(f"Processed {samples} training sample(s) in {seconds} seconds.")


def evaluate(params: dict, model_fn, eval_data_fn) -> None:
    """cszoo validate: the checkpoint's model on eval_steps batches."""
    runconfig = params["runconfig"]
    backend = _backend(runconfig)
    device = backend.device if hasattr(backend, "device") else runconfig["target_device"]
    model = model_fn(params)
    compiled = cstorch.compile(model, backend)
    step = _load(runconfig, model)
    validate(params, model, compiled, eval_data_fn, step, device, _writer(runconfig, "validate"))
