"""A training script of our own in the shape of the 2.1.1 modelzoo's cstorch loop (backend,
compile, DataExecutor, traced step, step and checkpoint closures): python cstorch_loop.py
DEVICE MODEL_DIR MOUNT..."""

import logging
import sys

import cerebras_pytorch as cstorch
import torch
from cerebras_appliance.errors import ApplianceNanError


def data(params):
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    y = x.sum(1, keepdim=True)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                       batch_size=params["train_input"]["batch_size"])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, batch):
        return torch.nn.functional.mse_loss(self.linear(batch[0]), batch[1])


def main(device, model_dir, mounts):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    torch.manual_seed(1)
    params = {"train_input": {"batch_size": 8}}
    backend = cstorch.backend(device, artifact_dir=model_dir)
    with backend.device:
        model = Model()
    compiled = cstorch.compile(model, backend)
    compiled.train()
    logging.info("set-up done")
    groups = cstorch.optim.configure_param_groups(model, {})
    schedule = [{"scheduler": "Linear", "initial_learning_rate": 0.1,
                 "end_learning_rate": 0.01, "total_iters": 30}]
    optimizer = cstorch.optim.configure_optimizer("SGD", groups, learning_rate=schedule)
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, schedule)
    dataloader = cstorch.utils.data.DataLoader(data, params)
    writer = cstorch.utils.tensorboard.SummaryWriter(log_dir=model_dir + "/train")
    executor = cstorch.utils.data.DataExecutor(
        dataloader, num_steps=cstorch.utils.data.compute_num_steps(dataloader, max_steps=30,
                                                                   num_epochs=10),
        checkpoint_steps=20, writer=writer,
        cs_config=cstorch.utils.CSConfig(mount_dirs=mounts, python_paths=mounts))

    @cstorch.trace
    def training_step(batch):
        loss = compiled(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        return loss

    @cstorch.step_closure
    def post_training_step(loss, step):
        if torch.isnan(loss).any():
            raise ApplianceNanError("NaN loss detected.")
        writer.add_scalar("loss", loss.item(), step)
        if step == 1 or executor.on_final_iteration:
            logging.info(f"| Train Device={backend.device}, Step={step}, Loss={loss.item():.5f}")

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        cstorch.save({"model": model.state_dict(), "global_step": step},
                     f"{model_dir}/checkpoint_{step}.mdl")
        logging.info(f"Saved checkpoint at step {step}")

    for step, batch in enumerate(executor, start=1):
        loss = training_step(batch)
        post_training_step(loss, step)
        save_checkpoint(step)
    logging.info(f"Processed {executor.profiler.rate_tracker.total_samples} sample(s)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
