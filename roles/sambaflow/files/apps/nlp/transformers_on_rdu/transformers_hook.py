#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""Transformers on RDU: GPT-2 pre-training (causal language modelling) with SambaFlow.

    transformers_hook.py compile --module_name gpt2_pretrain --task_name clm \
        --max_seq_length 1024 -b 16 --config_name gpt2_config_xl_50260.json \
        --num-tiles 4 --pef-name=gpt15 --output-folder=DIR [--data-parallel -ws 2] ...
    transformers_hook.py run -b 16 --module_name gpt2_pretrain --task_name clm \
        --max_seq_length 1024 --config_name ... --data_dir /data/ANL/ss1024 \
        --logging_steps 1 --max_steps 900000 --learning_rate 0.00025 \
        --steps_this_run 100 --pef=DIR/gpt15/gpt15.pef [--data-parallel --reduce-on-rdu]

`run` trains for `--steps_this_run` steps (all of `--max_steps` without it) on the
pre-tokenised corpus in `--data_dir` (`train_*.npy`: sequences of 1,024 token ids),
logs every `--logging_steps` steps, shows a progress bar, and ends with

    {'e2e_train_time': <s>, 'training_sequences_per_second': <r>, 'final_loss': <loss>}

where the time is device time, the rate counts the tokens of every instance per
second (instances x steps x batch x sequence length / time, as SambaNova's tool
does) and the loss is the last step's, averaged over the instances.

Emulator scale: see gpt2_reduced.py. The nominal model (the configuration file's)
times the PEF; a reduced GPT-2 trains for real on consecutive windows of 32
tokens of the corpus's 1,024-token sequences.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # shared CPUs: never spin (before torch)

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(1, str(Path(__file__).resolve().parent))
import gpt2_reduced  # noqa: E402

MODULES = {"gpt2_pretrain": "clm"}
NOMINAL_SEQUENCE = 1024


def str2bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "y", "t"):
        return True
    if value.lower() in ("0", "false", "no", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"a boolean is expected, not {value!r}")


def add_args(parser: argparse.ArgumentParser) -> None:
    """Hugging Face's training arguments and the SambaNova ones the ALCF scripts pass."""
    add = parser.add_argument
    add("--module_name", type=str, default="gpt2_pretrain", help="The task module")
    add("--task_name", type=str, default="clm", help="clm: causal language modelling")
    add("--max_seq_length", type=int, default=1024, help="Sequence length (default: 1024)")
    add("--model_name", "--model_name_or_path", dest="model_name", type=str, default="gpt2")
    add("--config_name", type=str, default=None, help="The model's configuration (JSON)")
    add("--tokenizer_name", type=str, default="gpt2")
    add("--cache", "--cache_dir", dest="cache", type=str, default=None,
        help="Directory for cached data indexes")
    add("--output_dir", type=str, default=None, help="Where the training results go")
    add("--overwrite_output_dir", action="store_true",
        help="Use --output_dir even when it is not empty")
    add("--do_train", action="store_true")
    add("--do_eval", action="store_true")
    add("--per_device_train_batch_size", type=int, default=None)
    add("--per_device_eval_batch_size", type=int, default=None)
    add("--non_split_head", action="store_true")
    add("--skip_broadcast_patch", action="store_true")
    add("--no_index_select_patch", action="store_true")
    add("--enable-stochastic-rounding", action="store_true")
    add("--weight_decay", type=float, default=0.0)
    add("--max_grad_norm_clip", type=float, default=1.0)
    add("--learning_rate", type=float, default=5e-5)
    add("--warmup_steps", type=int, default=0)
    add("--seed", type=int, default=42)
    add("--data_dir", type=str, default=None, help="The pre-tokenised corpus")
    add("--logging_steps", type=int, default=500)
    add("--max_steps", type=int, default=-1, help="Steps of the learning-rate schedule")
    add("--steps_this_run", type=int, default=None, help="Steps to train in this run")
    add("--skip_checkpoint", action="store_true", help="Save no checkpoint at the end")
    add("--min_throughput", type=float, default=None, help="Expected (not enforced)")
    add("--max_throughput", type=float, default=None, help="Expected (not enforced)")


def fail(message: str) -> None:
    sys.stdout.flush()
    print(f"transformers_hook.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def check_json(path: str | None, flag: str) -> None:
    if path is None:
        return
    try:
        json.loads(Path(path).read_text())
    except FileNotFoundError:
        fail(f"{flag} {path}: no such file")
    except (OSError, json.JSONDecodeError) as err:
        fail(f"{flag} {path}: not a JSON file: {err}")


def setup(args: argparse.Namespace):
    """The nominal and reduced configurations, the model, its compile inputs, the optimizer."""
    from sambaflow import samba

    if MODULES.get(args.module_name) != args.task_name:
        fail(f"--module_name {args.module_name} --task_name {args.task_name}: this app runs "
             "--module_name gpt2_pretrain --task_name clm")
    if args.config_name is None:
        fail("--config_name is required (e.g. customer_specific/mv/configs/"
             "gpt2_config_xl_50260.json)")
    if args.max_seq_length < 2:
        fail(f"--max_seq_length must be at least 2, not {args.max_seq_length}")
    if args.per_device_train_batch_size not in (None, args.batch_size):
        fail(f"--per_device_train_batch_size {args.per_device_train_batch_size} differs from "
             f"-b {args.batch_size}")
    try:
        nominal = gpt2_reduced.GPT2Config.from_file(args.config_name)
    except gpt2_reduced.ConfigError as err:
        fail(str(err))
    if args.max_seq_length > nominal.n_positions:
        fail(f"--max_seq_length {args.max_seq_length} exceeds the model's n_positions "
             f"{nominal.n_positions}")
    config = nominal.reduced(args.max_seq_length)
    model = gpt2_reduced.GPT2LMHeadModel(config)
    samba.from_torch_model_(model)
    batch, length = args.batch_size, config.n_positions
    ids = samba.randint(config.vocab_size, (batch, length), name="input_ids", batch_dim=0)
    labels = samba.from_torch_tensor(ids.clone(), name="labels", batch_dim=0)
    optimizer = None if args.inference else samba.optim.AdamW(
        model.parameters(), lr=args.learning_rate * gpt2_reduced.LR_SCALE,
        weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm_clip)
    return nominal, config, model, (ids, labels), optimizer


def pef_metadata(args, model, nominal) -> dict:
    from sambaflow.samba.utils.pef_utils import get_pefmeta

    meta = get_pefmeta(args, model)
    meta["aitestbed_timing"] = {"kind": "gpt2", "seq_len": args.max_seq_length,
                                "parameters": nominal.parameters()}
    meta["gpt2"] = {"config": args.config_name, "nominal_parameters": nominal.parameters(),
                    "mac_human_decision": args.mac_human_decision,
                    "compiler_configs_file": args.compiler_configs_file}
    return meta


# --------------------------------------------------------------------------- data


def load_corpus(data_dir: str, vocab_size: int) -> np.ndarray:
    """Every training sequence of the corpus: (sequences, 1024) token ids."""
    root = Path(data_dir)
    if not root.is_dir():
        fail(f"--data_dir {data_dir}: no such directory")
    shards = sorted(root.glob("train_*.npy"))
    if not shards:
        fail(f"--data_dir {data_dir}: no train_*.npy shards (sequences of token ids)")
    try:
        arrays = [np.load(shard, mmap_mode="r") for shard in shards]
    except (OSError, ValueError) as err:
        fail(f"--data_dir {data_dir}: cannot read a shard: {err}")
    corpus = np.concatenate([np.asarray(a) for a in arrays])
    if corpus.ndim != 2:
        fail(f"--data_dir {data_dir}: the shards are not (sequences, length) arrays")
    if int(corpus.max()) >= vocab_size:
        fail(f"--data_dir {data_dir}: token id {int(corpus.max())} is beyond the model's "
             f"vocabulary ({vocab_size})")
    return corpus


def windows(corpus: np.ndarray, length: int) -> torch.Tensor:
    """The training samples: consecutive windows of `length` tokens of every sequence."""
    per_sequence = corpus.shape[1] // length
    trimmed = corpus[:, :per_sequence * length]
    return torch.from_numpy(trimmed.reshape(-1, length).astype(np.int64))


def write_cache_index(cache: str | None, data_dir: str, samples: int, length: int) -> None:
    if not cache:
        return
    try:
        Path(cache).mkdir(parents=True, exist_ok=True)
        (Path(cache) / "ss1024_index.json").write_text(json.dumps(
            {"data_dir": str(Path(data_dir).resolve()), "samples": samples,
             "sample_length": length}, indent=1) + "\n")
    except OSError:
        pass


# --------------------------------------------------------------------------- train


def check_output_dir(args: argparse.Namespace) -> None:
    out = args.output_dir
    if out and Path(out).is_dir() and any(Path(out).iterdir()) and not args.overwrite_output_dir:
        fail(f"Output directory ({out}) already exists and is not empty. Use "
             "--overwrite_output_dir to overcome.")


def train(args: argparse.Namespace, model, config) -> None:
    from sambaflow import samba
    from tqdm import tqdm

    session = samba.session
    world, rank = (session.world_size, session.rank) if args.data_parallel else (1, 0)
    leader = rank == 0
    corpus = load_corpus(args.data_dir, config.vocab_size)
    samples = windows(corpus, config.n_positions)
    if leader:
        write_cache_index(args.cache, args.data_dir, len(samples), config.n_positions)
    steps = args.steps_this_run if args.steps_this_run is not None else args.max_steps
    if steps is None or steps < 1:
        fail("nothing to train: give --steps_this_run or --max_steps")
    schedule = args.max_steps if args.max_steps and args.max_steps > 0 else steps
    batch = args.batch_size
    per_step = batch * world
    generator = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(samples), generator=generator)
    epoch_length = len(samples) // per_step
    if epoch_length < 1:
        fail(f"--data_dir {args.data_dir}: {len(samples)} samples, fewer than one step of "
             f"{per_step}")
    if leader:
        print(f"***** Running training *****\n  Num examples = {len(corpus)} sequences of "
              f"{corpus.shape[1]} tokens\n  Instances = {world}\n  Batch size per instance = "
              f"{batch}\n  Total optimization steps = {schedule}\n  Steps this run = {steps}\n"
              f"  (trained at reduced scale: {config.n_layer} layers, width {config.n_embd}, "
              f"{config.n_head} heads, sequences of {config.n_positions}, vocabulary "
              f"{config.vocab_size})")
        sys.stdout.flush()
    bar = tqdm(total=steps, disable=not leader, file=sys.stdout, dynamic_ncols=False,
               ncols=100, mininterval=0)
    start = session.device_time()
    history = []
    loss_value = float("nan")
    for step in range(steps):
        position = step % epoch_length
        if position == 0 and step:
            order = torch.randperm(len(samples), generator=generator)
        first = position * per_step + rank * batch
        ids = samples[order[first:first + batch]]
        lr = args.learning_rate * max(0.0, 1.0 - step / schedule)
        warm = args.warmup_steps
        if warm and step < warm:
            lr = args.learning_rate * (step + 1) / warm
        hyperparams = {"lr": lr * gpt2_reduced.LR_SCALE, "weight_decay": args.weight_decay}
        loss, _ = session.run(
            input_tensors=[samba.from_torch_tensor(ids, name="input_ids", batch_dim=0),
                           samba.from_torch_tensor(ids, name="labels", batch_dim=0)],
            output_tensors=model.output_tensors, hyperparam_dict=hyperparams,
            data_parallel=args.data_parallel, reduce_on_rdu=args.reduce_on_rdu)
        loss_value = float(samba.to_torch(loss))
        bar.update(1)
        if args.logging_steps > 0 and (step + 1) % args.logging_steps == 0:
            record = {"loss": round(loss_value, 4), "learning_rate": lr,
                      "epoch": round((step + 1) / epoch_length, 2)}
            history.append({**record, "step": step + 1})
            if leader:
                bar.write(str(record), file=sys.stdout)
    seconds = session.device_time() - start
    bar.close()
    final_loss = loss_value
    if world > 1:
        import torch.distributed as dist

        total = torch.tensor([loss_value], dtype=torch.float64)
        dist.all_reduce(total)
        final_loss = float(total.item() / world)
    tokens = world * steps * batch * args.max_seq_length
    summary = {"e2e_train_time": seconds,
               "training_sequences_per_second": tokens / seconds if seconds else 0.0,
               "final_loss": final_loss}
    if leader:
        print(summary)
        sys.stdout.flush()
        write_results(args, summary, history, model)


def write_results(args, summary: dict, history: list, model) -> None:
    if not args.output_dir:
        return
    out = Path(args.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_results.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "trainer_state.json").write_text(json.dumps({"log_history": history},
                                                           indent=1) + "\n")
        if not args.skip_checkpoint:
            from sambaflow import samba

            samba.session.to_cpu(model)
            torch.save(model.state_dict(), out / "pytorch_model.bin")
    except OSError as err:
        print(f"transformers_hook.py: cannot write the results to {out}: {err}",
              file=sys.stderr)


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> None:
    from sambaflow import samba
    from sambaflow.samba import utils
    from sambaflow.samba.utils.argparser import parse_app_args

    args = parse_app_args(argv=argv, dev_mode=True, common_parser_fn=add_args,
                          prog="transformers_hook.py")
    check_json(args.mac_human_decision, "--mac-human-decision")
    check_json(args.compiler_configs_file, "--compiler-configs-file")
    utils.set_seed(args.seed)
    nominal, config, model, inputs, optimizer = setup(args)
    if args.command == "compile":
        samba.session.compile(model, inputs, optimizer, name="gpt2", squeeze_bs_dim=False,
                              app_dir=utils.get_file_dir(__file__), config_dict=vars(args),
                              pef_metadata=pef_metadata(args, model, nominal))
    elif args.command == "run":
        if args.inference:
            fail("run trains the model: compile and run without --inference")
        if args.data_dir is None or not Path(args.data_dir).is_dir():
            fail(f"run needs --data_dir, the pre-tokenised corpus (e.g. /data/ANL/ss1024): "
                 f"{args.data_dir} is not a directory")
        check_output_dir(args)
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        train(args, model, config)
    elif args.command == "test":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        gold = model(*inputs)
        outputs = samba.session.run(input_tensors=list(inputs),
                                    output_tensors=model.output_tensors)
        utils.assert_close(outputs[0], gold[0], "loss", threshold=5e-2)
        print("Test passed: the RDU's results match the CPU's")
    else:
        utils.common_app_driver(args, model, inputs, optimizer, name="gpt2",
                                app_dir=utils.get_file_dir(__file__),
                                pef_metadata=pef_metadata(args, model, nominal))


if __name__ == "__main__":
    main(sys.argv[1:])
