# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""The UNet app: compile, test, run (train) and measure-performance, with SambaFlow.

    compile.py compile --mac-v2 --in-channels=3 --in-width=256 --in-height=256 \
        --batch-size=256 --enable-conv-tiling --num-tiles=4 --pef-name=NAME --output-folder=DIR
    hook.py run --data-dir kaggle_3m --in-channels=3 --in-width=256 --in-height=256 \
        --init-features 32 --batch-size=256 --epochs 10 --pef=DIR/NAME/NAME.pef \
        [--data-parallel --reduce-on-rdu]

`run` trains for real on kaggle_3m, prints each epoch's training loss and the
validation loss and Dice, and at the end, on every instance, the line the ALCF
guide reads its performance from:

  inner train loop time : T for E epochs, number of global steps: N, e2e samples_per_sec: R

The time is device time (the emulated RDU's, from the PEF's timing), summed over
the training steps; the rate counts the samples of all instances.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from . import data as kaggle
from . import model as unet

DEFAULT_LR = 3e-3
SEED = 256


# --------------------------------------------------------------------------- arguments


def add_common_args(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--in-channels", type=int, default=3, help="Image channels (default: 3)")
    add("--in-width", type=int, default=256, help="Image width (default: 256)")
    add("--in-height", type=int, default=256, help="Image height (default: 256)")
    add("--init-features", type=int, default=32,
        help="Features of the first level, doubled at every level (default: 32)")
    add("--num-classes", type=int, default=2, help="Classes, background included (default: 2)")
    add("--num-flexible-classes", type=int, default=1, help="Output channels (default: 1)")
    add("--enable-stoc-rounding", action="store_true", help="Stochastic rounding (bf16)")
    add("--lr", "--learning-rate", dest="lr", type=float, default=DEFAULT_LR,
        help=f"Learning rate (default: {DEFAULT_LR})")
    add("--weight-decay", type=float, default=0.0, help="Weight decay (default: 0)")
    add("--seed", type=int, default=SEED, help=f"Random seed (default: {SEED})")


def add_run_args(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--data-dir", "--data-path", dest="data_dir", type=str,
        default="/software/sambanova/dataset/kaggle_3m", help="The kaggle_3m dataset")
    add("--data-cache", type=str, default=None,
        help="Directory to keep the decoded dataset in, for the next runs")
    add("--data-in-memory", action="store_true", help="Keep the dataset in memory (always)")
    add("--num-workers", type=int, default=0, help="Data loader workers")
    add("--enable-tiling", action="store_true", help="Tile the images (large images)")
    add("--min-throughput", type=float, default=0.0,
        help="Expected minimum samples/s (recorded, not enforced)")
    add("--epochs", "--max-epochs", dest="epochs", type=int, default=10,
        help="Epochs (default: 10)")
    add("--log-dir", type=str, default=None, help="Directory for the training log")
    add("--do-train", action="store_true", help="Train (run always trains)")
    add("--use-sambaloader", action="store_true", help="SambaFlow's data loader")
    add("--max-steps", type=int, default=0,
        help="Stop each epoch after this many steps (0: the whole epoch)")


def add_measure_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--num-iterations", type=int, default=100,
                        help="Steps to time (default: 100)")


# --------------------------------------------------------------------------- the model


def build(args: argparse.Namespace):
    """The model (with its loss), the compile inputs, the optimizer and the sizes."""
    from sambaflow import samba

    sizes = unet.reduced(args.in_channels, args.in_width, args.in_height, args.init_features)
    model = unet.UNetWithLoss(sizes)
    samba.from_torch_model_(model)
    side, batch = sizes.side, args.batch_size
    images = samba.randn(batch, sizes.in_channels, side, side, name="image", batch_dim=0)
    masks = samba.from_torch_tensor((torch.rand(batch, 1, side, side) > 0.9).float(),
                                    name="mask", batch_dim=0)
    optimizer = None if args.inference else samba.optim.Adam(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    return model, (images, masks), optimizer, sizes


def pef_metadata(args: argparse.Namespace, model, sizes: unet.Sizes) -> dict:
    from sambaflow.samba.utils.pef_utils import get_pefmeta

    meta = get_pefmeta(args, model)
    # Time the PEF as the documented UNet (its nominal image size), not the reduced graph.
    meta["aitestbed_timing"] = {"kind": "unet2d", "image_size": sizes.nominal_side}
    meta["unet"] = {"nominal_side": sizes.nominal_side,
                    "nominal_features": sizes.nominal_features,
                    "trained_side": sizes.side, "trained_features": sizes.features}
    return meta


# --------------------------------------------------------------------------- run


def _all_reduce(values: list[float], distributed: bool) -> list[float]:
    if not distributed:
        return values
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return tensor.tolist()


def _padded(indices: torch.Tensor, batch: int) -> list[tuple[torch.Tensor, int]]:
    """Batches of exactly `batch` (the PEF's) indices, the last one filled by repeating the
    first slices; with the number of real slices in each."""
    out = []
    for start in range(0, len(indices), batch):
        chunk = indices[start:start + batch]
        real = len(chunk)
        if real < batch:
            chunk = torch.cat([chunk, indices[:batch - real].repeat(
                -(-(batch - real) // max(1, len(indices))))[:batch - real]])
        out.append((chunk, real))
    return out


def train(args: argparse.Namespace, model, sizes: unet.Sizes) -> None:
    from sambaflow import samba

    session = samba.session
    world, rank = (session.world_size, session.rank) if args.data_parallel else (1, 0)
    distributed = world > 1
    leader = rank == 0
    try:
        dataset = kaggle.load(args.data_dir, sizes.side, sizes.in_channels, args.data_cache)
    except kaggle.DataError as err:
        sys.exit(f"unet: {err}")
    batch = args.batch_size
    steps = kaggle.steps_per_epoch(len(dataset.train), batch, world)
    wrap = steps == 0  # fewer slices per instance than one batch: repeat them to fill it
    if wrap:
        steps = 1
    if args.max_steps:
        steps = min(steps, args.max_steps)
    if leader:
        print(f"kaggle_3m: {len(dataset.images)} slices from {args.data_dir}: "
              f"{len(dataset.train)} for training, {len(dataset.val)} for validation; "
              f"{world} instance(s), {steps} global step(s) of {batch * world} per epoch")
        print(f"UNet2d: {sizes.nominal_side}x{sizes.nominal_side} images, "
              f"{sizes.nominal_features} initial features (trained at {sizes.side}x{sizes.side}, "
              f"{sizes.features} features)")
        sys.stdout.flush()
    hyperparams = {"lr": args.lr, "weight_decay": args.weight_decay}
    log_rows = []
    loop_seconds = 0.0
    global_steps = 0
    val_indices = dataset.val[rank::world]
    for epoch in range(args.epochs):
        batches = kaggle.epoch_batches(dataset.train, batch, epoch, rank, world, args.seed)
        if wrap:
            mine = dataset.train[rank::world]
            batches = [mine.repeat(-(-batch // max(1, len(mine))))[:batch]]
        batches = batches[:steps]
        loss_sum = 0.0
        start = session.device_time()
        for index in batches:
            loss, _ = session.run(
                input_tensors=[samba.from_torch_tensor(dataset.images[index], name="image",
                                                       batch_dim=0),
                               samba.from_torch_tensor(dataset.masks[index], name="mask",
                                                       batch_dim=0)],
                output_tensors=model.output_tensors, hyperparam_dict=hyperparams,
                data_parallel=args.data_parallel, reduce_on_rdu=args.reduce_on_rdu)
            loss_sum += float(samba.to_torch(loss))
        loop_seconds += session.device_time() - start
        global_steps += len(batches)
        # Validation: forward only, on the RDU, every instance on its share.
        val_loss = dice_num = dice_den = 0.0
        for index, real in _padded(val_indices, batch):
            _, prediction = session.run(
                input_tensors=[samba.from_torch_tensor(dataset.images[index], name="image",
                                                       batch_dim=0),
                               samba.from_torch_tensor(dataset.masks[index], name="mask",
                                                       batch_dim=0)],
                output_tensors=model.output_tensors, section_types=["fwd"],
                data_parallel=args.data_parallel, reduce_on_rdu=args.reduce_on_rdu)
            prediction = samba.to_torch(prediction)[:real]  # the padding left out
            target = dataset.masks[index][:real]
            val_loss += unet.loss(prediction, target) * real
            num, den = unet.dice_score(prediction, target)
            dice_num, dice_den = dice_num + num, dice_den + den
        totals = _all_reduce([loss_sum, float(len(batches)), val_loss, float(len(val_indices)),
                              dice_num, dice_den], distributed)
        train_loss = totals[0] / max(1.0, totals[1])
        mean_val_loss = totals[2] / max(1.0, totals[3])
        dice = totals[4] / totals[5] if totals[5] > 0 else 1.0
        if leader:
            print(f"Epoch [{epoch + 1}/{args.epochs}], train loss: {train_loss:.4f}, "
                  f"validation loss: {mean_val_loss:.4f}, validation Dice: {dice:.4f}")
            sys.stdout.flush()
        log_rows.append((epoch + 1, train_loss, mean_val_loss, dice, loop_seconds))
    samples_per_second = global_steps * batch * world / loop_seconds if loop_seconds else 0.0
    print(f"inner train loop time : {loop_seconds} for {args.epochs} epochs, "
          f"number of global steps: {global_steps}, e2e samples_per_sec: {samples_per_second}")
    sys.stdout.flush()
    if leader and args.log_dir:
        _write_log(Path(args.log_dir), log_rows)


def _write_log(log_dir: Path, rows: list[tuple]) -> None:
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        lines = ["epoch,train_loss,validation_loss,validation_dice,device_seconds"]
        lines += [f"{e},{t:.6f},{v:.6f},{d:.6f},{s:.3f}" for e, t, v, d, s in rows]
        (log_dir / "training.csv").write_text("\n".join(lines) + "\n")
    except OSError as err:
        print(f"unet: cannot write the training log in {log_dir}: {err}", file=sys.stderr)


# --------------------------------------------------------------------------- test


def test(model, inputs, threshold: float = 5e-2, grad_threshold: float = 0.3) -> None:
    """One step on the RDU against the same step on the CPU, from the same weights.

    The outputs are compared element-wise (bfloat16's scale); the gradients as one
    vector, by the norm of their difference: through the UNet's 20-odd layers in
    bfloat16 single small gradients lose their digits, their whole does not."""
    from sambaflow import samba
    from sambaflow.samba import utils

    gold = model(*inputs)
    outputs = samba.session.run(input_tensors=list(inputs), output_tensors=model.output_tensors)
    for i, (rdu_value, cpu_value) in enumerate(zip(outputs, gold, strict=False)):
        utils.assert_close(rdu_value, cpu_value, f"forward output #{i}", threshold=threshold)
    gold[0].backward()
    names, rdu_grads, cpu_grads = [], [], []
    for name, parameter in model.named_parameters():
        if parameter.sn_grad is None or parameter.grad is None:
            continue
        names.append(name)
        rdu_grads.append(parameter.sn_grad.detach().float().flatten())
        cpu_grads.append(parameter.grad.detach().float().flatten())
    rdu_all, cpu_all = torch.cat(rdu_grads), torch.cat(cpu_grads)
    error = float((rdu_all - cpu_all).norm() / cpu_all.norm().clamp(min=1e-12))
    verdict = "ok" if error <= grad_threshold else "MISMATCH"
    print(f"gradients of {len(names)} parameters: relative L2 error {error:.4e} "
          f"(threshold {grad_threshold:.1e}) {verdict}")
    if error > grad_threshold:
        sys.exit(f"test failed: the RDU's and the CPU's gradients differ (relative L2 error "
                 f"{error:.4e} > {grad_threshold:.1e})")
    print("Test passed: the RDU's results match the CPU's")


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None, prog: str, app_file: str) -> None:
    from sambaflow import samba
    from sambaflow.samba import utils
    from sambaflow.samba.utils.argparser import parse_app_args

    args = parse_app_args(argv=list(sys.argv[1:] if argv is None else argv), dev_mode=True,
                          common_parser_fn=add_common_args, run_parser_fn=add_run_args,
                          measure_perf_parser_fn=add_measure_args, prog=prog)
    utils.set_seed(args.seed)
    try:
        model, inputs, optimizer, sizes = build(args)
    except ValueError as err:
        sys.exit(f"{prog}: {err}")
    app_dir = utils.get_file_dir(app_file)
    if args.command == "compile":
        samba.session.compile(model, inputs, optimizer, name="unet2d", squeeze_bs_dim=False,
                              app_dir=app_dir, config_dict=vars(args),
                              pef_metadata=pef_metadata(args, model, sizes))
    elif args.command == "test":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        test(model, inputs)
    elif args.command == "run":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        if args.inference:
            sys.exit(f"{prog}: run trains the model: compile and run without --inference")
        train(args, model, sizes)
    elif args.command == "measure-performance":
        utils.common_app_driver(args, model, inputs, optimizer, name="unet2d", app_dir=app_dir,
                                pef_metadata=pef_metadata(args, model, sizes))

