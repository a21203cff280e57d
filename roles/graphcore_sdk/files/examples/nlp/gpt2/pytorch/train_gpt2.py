#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not Graphcore's code).
"""Train a GPT-2 language model on IPUs with PopTorch, pipelined over several IPUs.

The embedding and the language-model head sit on IPU 0 and the transformer
layers on the IPUs that --layers-per-ipu gives them; replicas of this pipeline
train data parallel.

Emulator scale: the configuration of the chosen model is printed as
documented, but the model trained has narrower layers, shorter sequences and a
smaller vocabulary (see REDUCED and the README), keeping the number of layers
and every batch, step and learning-rate setting, so that a run on generated
data trains on a CPU, with real numerics, in a fraction of a minute to a minute.
The token embedding is initialised with the spread the documented width would
give it, so that the loss starts as far above log(vocabulary) as in the
full-size model.
"""

import argparse
import json
import math
import os
import sys
import time

import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F

# Documented model configurations (Hugging Face GPT-2 sizes, vocabulary padded to 50272).
MODELS = {
    "gpt2": {"n_embd": 768, "n_head": 12, "n_layer": 12},
    "gpt2-medium": {"n_embd": 1024, "n_head": 16, "n_layer": 24},
    "gpt2-large": {"n_embd": 1280, "n_head": 20, "n_layer": 36},
    "gpt2-xl": {"n_embd": 1600, "n_head": 25, "n_layer": 48},
}
VOCAB_SIZE = 50272

# What the emulator trains instead: n_layer is kept, the rest is reduced.
REDUCED = {"n_embd": 8, "n_head": 2, "max_len": 4, "vocab_size": 512}
# Generated data: this many steps per epoch.
GENERATED_STEPS_PER_EPOCH = 4


def str_to_bool(value):
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError("Boolean value expected.")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="GPT-2 training on IPUs with PopTorch (aitestbed emulator, reduced scale)")
    add = parser.add_argument
    # Model
    add("--model", type=str, default="gpt2", choices=sorted(MODELS), help="model size")
    add("--max-len", type=int, default=1024, help="sequence length")
    add("--layers-per-ipu", type=int, nargs="+", default=[0, 4, 4, 4],
        help="transformer layers on each IPU of a replica")
    add("--matmul-proportion", type=float, nargs="+", default=[0.15, 0.15, 0.15, 0.15],
        help="available memory proportion for matmuls, per IPU")
    add("--remap-logit", type=str_to_bool, default=False, help="remap the logits' tile layout")
    add("--enable-sequence-serialized", type=str_to_bool, default=False,
        help="serialise the attention over the sequence")
    add("--serialized-seq-len", type=int, default=128, help="length of a serialised chunk")
    add("--embedding-serialization-factor", type=int, default=1,
        help="split the embedding and LM-head matmul into this many parts")
    add("--recompute-checkpoint-every-layer", type=str_to_bool, default=False,
        help="recomputation checkpoint after every layer")
    add("--recompute-checkpoint-layers", type=int, nargs="+", default=None,
        help="layers to put a recomputation checkpoint after")
    add("--enable-half-partials", type=str_to_bool, default=False,
        help="float16 partials for matmuls and convolutions")
    add("--custom-ops", type=str_to_bool, default=True, help="use the custom operations")
    # Execution
    add("--ipus-per-replica", type=int, default=4, help="IPUs in one pipeline")
    add("--replication-factor", type=int, default=1, help="number of replicas")
    add("--gradient-accumulation", type=int, default=1, help="micro batches per weight update")
    add("--device-iterations", type=int, default=1, help="weight updates per step")
    add("--batch-size", type=int, default=1, help="micro batch size")
    add("--replicated-tensor-sharding", type=str_to_bool, default=False,
        help="shard the optimizer state over the replicas")
    add("--optimizer-state-offchip", type=str_to_bool, default=True,
        help="keep the optimizer state in streaming memory")
    add("--executable-cache-dir", type=str, default=None, help="directory for compiled executables")
    add("--compile-only", type=str_to_bool, nargs="?", const=True, default=False,
        help="compile the model and exit")
    add("--use-popdist", type=str_to_bool, default=False, help="distributed with poprun")
    add("--async-dataloader", type=str_to_bool, default=False, help="asynchronous data loader")
    add("--num-workers", type=int, default=4, help="data loader workers")
    add("--seed", type=int, default=1234, help="random seed")
    # Optimisation
    add("--optimizer", type=str, default="AdamW", choices=["AdamW", "SGD"], help="optimizer")
    add("--learning-rate", type=float, default=0.00015, help="peak learning rate")
    add("--weight-decay", type=float, default=0.0, help="weight decay")
    add("--loss-scaling", type=float, default=50000.0, help="loss scaling")
    add("--auto-loss-scaling", type=str_to_bool, default=False, help="automatic loss scaling")
    add("--lr-schedule", type=str, default="constant", choices=["constant", "linear", "cosine"],
        help="learning rate schedule")
    add("--lr-warmup", type=float, default=0.0, help="warm-up, as a fraction of the steps")
    add("--lr-warmup-steps", type=int, default=None, help="warm-up steps (overrides --lr-warmup)")
    add("--lr-decay-steps", type=int, default=None, help="steps to decay over")
    add("--epochs", type=int, default=1, help="epochs")
    add("--training-steps", type=int, default=10000, help="maximum number of steps")
    # Data
    add("--dataset", type=str, default="generated", choices=["generated", "mmap", "tfrecord"],
        help="generated random tokens, or prepared files (--input-files)")
    add("--input-files", type=str, nargs="+", default=None, help="prepared data files")
    add("--stride", type=int, default=128, help="stride between samples of a document")
    add("--val-num", type=int, default=0, help="samples kept for validation")
    # Logging and checkpoints
    add("--log-steps", type=int, default=1, help="print every this many steps")
    add("--use-wandb", type=str_to_bool, default=False, help="log to Weights & Biases")
    add("--checkpoint-input-dir", type=str, default="", help="checkpoint to start from")
    add("--resume-training-from-checkpoint", type=str_to_bool, default=False,
        help="also restore the optimizer and step from the checkpoint")
    add("--checkpoint-output-dir", type=str, default=None, help="where to save checkpoints")
    add("--save-per-epochs", type=int, default=1, help="save every this many epochs")
    add("--save-per-steps", type=int, default=None, help="save every this many steps")
    return parser.parse_args(argv)


def format_arguments(args):
    """The arguments as `Namespace(...)`, sorted by name."""
    items = ", ".join(f"{key}={value!r}" for key, value in sorted(vars(args).items()))
    return f"Namespace({items})"


class GPT2Config:
    """The model configuration, printed like a Hugging Face configuration."""

    def __init__(self, model, max_len):
        sizes = MODELS[model]
        self.values = {
            "activation_function": "gelu",
            "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.1,
            "bos_token_id": VOCAB_SIZE,
            "embd_pdrop": 0.1,
            "eos_token_id": VOCAB_SIZE,
            "gradient_checkpointing": False,
            "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05,
            "model_type": "gpt2",
            "n_ctx": max_len,
            "n_embd": sizes["n_embd"],
            "n_head": sizes["n_head"],
            "n_inner": None,
            "n_layer": sizes["n_layer"],
            "n_positions": max_len,
            "output_past": True,
            "reorder_and_upcast_attn": False,
            "resid_pdrop": 0.1,
            "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True,
            "summary_activation": None,
            "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True,
            "summary_type": "cls_index",
            "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 400}},
            "transformers_version": "4.26.1",
            "use_cache": True,
            "vocab_size": VOCAB_SIZE,
        }

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return f"GPT2Config {json.dumps(self.values, indent=2, sort_keys=True)}\n"

    def parameters(self):
        """Parameters of the documented model: embeddings, layers, final layer norm."""
        width, layers = self.n_embd, self.n_layer
        return ((self.vocab_size + self.n_positions) * width
                + layers * (12 * width * width + 13 * width) + 2 * width)

    def reduced(self):
        """The configuration the emulator trains."""
        reduced = GPT2Config.__new__(GPT2Config)
        reduced.values = dict(self.values)
        length = min(self.n_positions, REDUCED["max_len"])
        reduced.values.update(n_embd=REDUCED["n_embd"], n_head=REDUCED["n_head"],
                              n_ctx=length, n_positions=length,
                              vocab_size=REDUCED["vocab_size"])
        return reduced


# --------------------------------------------------------------------------- model


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        positions = config.n_positions
        mask = torch.full((positions, positions), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        batch, length, width = x.shape
        head = width // self.n_head
        qkv = self.c_attn(x).view(batch, length, 3, self.n_head, head).permute(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = query @ key.transpose(-1, -2) / math.sqrt(head) + self.mask[:length, :length]
        weights = self.attn_dropout(torch.softmax(scores, dim=-1))
        out = (weights @ value).transpose(1, 2).reshape(batch, length, width)
        return self.resid_dropout(self.c_proj(out))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """One transformer layer: pre-norm attention and MLP with residual connections."""

    def __init__(self, config, checkpoint_output=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)
        self.checkpoint_output = checkpoint_output

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        if self.checkpoint_output:
            x = poptorch.recomputationCheckpoint(x)
        return x


class Embedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], dtype=torch.long)
        return self.drop(self.wte(input_ids) + self.wpe(positions))


class LMHead(nn.Module):
    """Final layer norm, logits against the (tied) token embedding, loss and accuracy."""

    def __init__(self, config, wte, serialization_factor):
        super().__init__()
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.wte = wte
        self.serialization_factor = max(1, serialization_factor)

    def forward(self, hidden, labels):
        hidden = self.ln_f(hidden)
        # The vocabulary is split into serialization_factor matmuls (same result).
        parts = torch.chunk(self.wte.weight, self.serialization_factor, dim=0)
        logits = torch.cat([hidden @ part.t() for part in parts], dim=-1)
        logits = logits.reshape(-1, logits.shape[-1])
        labels = labels.reshape(-1)
        loss = F.cross_entropy(logits, labels)
        acc = torch.eq(torch.argmax(logits, dim=-1), labels).float().mean()
        return poptorch.identity_loss(loss, reduction="none"), acc


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config, args, documented_width):
        super().__init__()
        checkpoints = set(args.recompute_checkpoint_layers or [])
        self.embedding = Embedding(config)
        self.layers = nn.ModuleList([
            Block(config, args.recompute_checkpoint_every_layer or index in checkpoints)
            for index in range(config.n_layer)
        ])
        self.lm_head = LMHead(config, self.embedding.wte, args.embedding_serialization_factor)
        self.apply(self._init_weights)
        # The token embedding (tied to the LM head) gets the spread of the documented width,
        # so that the logits start as spread out as in the full-size model.
        nn.init.normal_(self.embedding.wte.weight, 0.0,
                        config.initializer_range * math.sqrt(documented_width / config.n_embd))
        # GPT-2 scales the residual projections by the depth.
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, 0.0, config.initializer_range
                                / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def place(self, layers_per_ipu):
        """Put the embedding and head on IPU 0, and the layers as layers_per_ipu says."""
        print("-------------------- Device Allocation --------------------")
        print("Embedding  --> IPU 0")
        self.embedding = poptorch.BeginBlock(self.embedding, "embedding", ipu_id=0)
        layer = 0
        for ipu, count in enumerate(layers_per_ipu):
            for _ in range(count):
                print(f"Layer {layer:<2} --> IPU {ipu}")
                self.layers[layer] = poptorch.BeginBlock(self.layers[layer], f"layer{layer}",
                                                         ipu_id=ipu)
                layer += 1
        print("LM_head --> IPU 0")
        self.lm_head = poptorch.BeginBlock(self.lm_head, "lm_head", ipu_id=0)

    def forward(self, input_ids, labels):
        hidden = self.embedding(input_ids)
        for layer in self.layers:
            hidden = layer(hidden)
        return self.lm_head(hidden, labels)


# --------------------------------------------------------------------------- data


class GeneratedDataset(torch.utils.data.Dataset):
    """Uniformly random tokens: next-token targets are the inputs shifted by one."""

    def __init__(self, samples, length, vocab_size, seed):
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab_size, (samples, length + 1), generator=generator)

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        sample = self.tokens[index]
        return sample[:-1], sample[1:]


def worker_count(requested):
    """Data loader workers: as requested, but no more than the CPUs this process may use."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(0, min(requested, cpus))


# --------------------------------------------------------------------------- IPU options


def build_options(args):
    if args.use_popdist:
        import popdist
        import popdist.poptorch

        popdist.init()
        opts = popdist.poptorch.Options(ipus_per_replica=args.ipus_per_replica)
    else:
        opts = poptorch.Options()
        opts.replicationFactor(args.replication_factor)
    opts.deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    opts.outputMode(poptorch.OutputMode.All)
    opts.randomSeed(args.seed)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.setAvailableMemoryProportion(
        {f"IPU{ipu}": proportion for ipu, proportion in enumerate(args.matmul_proportion)})
    if args.enable_half_partials:
        opts.Precision.setPartialsType(torch.half)
    if args.auto_loss_scaling:
        opts.Training.setAutomaticLossScaling(True)
    if args.optimizer_state_offchip:
        opts.TensorLocations.setOptimizerLocation(
            poptorch.TensorLocationSettings()
            .useOnChipStorage(False)
            .useReplicatedTensorSharding(args.replicated_tensor_sharding))
    if args.executable_cache_dir:
        opts.enableExecutableCaching(args.executable_cache_dir)
    if args.compile_only:  # compile without IPUs; the executable goes to the cache
        opts.useOfflineIpuTarget()
    return opts


def make_optimizer(args, model):
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim <= 1 or "ln_" in name else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    loss_scaling = None if args.auto_loss_scaling else args.loss_scaling
    if args.optimizer == "SGD":
        return poptorch.optim.SGD(groups, lr=args.learning_rate, momentum=0.9,
                                  loss_scaling=loss_scaling)
    return poptorch.optim.AdamW(groups, lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6,
                                weight_decay=args.weight_decay, bias_correction=False,
                                loss_scaling=loss_scaling)


def lr_lambda(args, total_steps):
    """Multiplier of the peak learning rate at a step: linear warm-up, then the schedule."""
    warmup = args.lr_warmup_steps
    if warmup is None:
        warmup = int(args.lr_warmup * total_steps)
    decay = args.lr_decay_steps or total_steps

    def factor(step):
        if step < warmup:
            return step / max(1, warmup)
        progress = (step - warmup) / max(1, decay - warmup)
        if args.lr_schedule == "cosine":
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))
        if args.lr_schedule == "linear":
            return max(0.0, 1.0 - progress)
        return 1.0

    return factor


def step_duration(executor):
    """Device seconds of the executor's last run (first input to last output), or None."""
    counters = executor.getPerfCounters()
    starts = [times[0] for times in counters.get("input", []) if len(times)]
    ends = [times[-1] for times in counters.get("output_complete", []) if len(times)]
    if not starts or not ends:
        return None
    return max(float(max(ends)) - float(min(starts)), 1e-9)


def save_checkpoint(args, training_model, model, optimizer, step, name):
    path = os.path.join(args.checkpoint_output_dir, name)
    os.makedirs(path, exist_ok=True)
    training_model.copyWeightsToHost()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
               os.path.join(path, "checkpoint.pt"))
    print(f"Saved checkpoint to {path}")


def main(argv=None):
    args = parse_args(argv)
    config = GPT2Config(args.model, args.max_len)
    if sum(args.layers_per_ipu) != config.n_layer:
        sys.exit(f"--layers-per-ipu {' '.join(map(str, args.layers_per_ipu))} places "
                 f"{sum(args.layers_per_ipu)} layers, but {args.model} has {config.n_layer}")
    if len(args.layers_per_ipu) != args.ipus_per_replica:
        sys.exit(f"--layers-per-ipu gives {len(args.layers_per_ipu)} IPUs, but "
                 f"--ipus-per-replica is {args.ipus_per_replica}")
    if args.dataset != "generated":
        sys.exit(f"--dataset {args.dataset} needs data prepared with the GPT-2 tokenizer, which "
                 "the emulated cluster does not have: use --dataset generated")
    torch.manual_seed(args.seed)

    if args.custom_ops:
        print("Building (if necessary) and loading remap_tensor_ce.")
        print("Building (if necessary) and loading residual_add_inplace_pattern.")
    print("Model initializing")
    reduced = config.reduced()
    model = GPT2LMHeadModel(reduced, args, config.n_embd)
    # The emulator's IPU timing model uses the size of the documented model.
    model.aitestbed_nominal_parameters = config.parameters()
    model.place(args.layers_per_ipu)
    print(f"Arguments: {format_arguments(args)}")
    print(f"Model config: {config}")
    print(f"Emulator: trained at reduced scale: n_embd {config.n_embd} -> {reduced.n_embd}, "
          f"n_head {config.n_head} -> {reduced.n_head}, max_len {args.max_len} -> "
          f"{reduced.n_positions}, vocab_size {config.vocab_size} -> {reduced.vocab_size} "
          f"(n_layer {config.n_layer} and the batch and step settings unchanged; token "
          f"embedding initialised with the spread of n_embd {config.n_embd})")
    if args.use_wandb:
        print("Weights & Biases is not available on the emulated cluster: --use-wandb ignored")

    opts = build_options(args)
    replicas = args.replication_factor
    if args.use_popdist:
        import popdist

        replicas = popdist.getNumTotalReplicas()
    samples_per_step = (args.batch_size * args.gradient_accumulation * replicas
                        * args.device_iterations)

    print("------------------- Data Loading Started ------------------")
    start_loading = time.perf_counter()
    print("loading training dataset and validating dataset")
    dataset = GeneratedDataset(GENERATED_STEPS_PER_EPOCH * samples_per_step,
                               reduced.n_positions, reduced.vocab_size, args.seed)
    loader_options = {"mode": poptorch.DataLoaderMode.Async} if args.async_dataloader else {}
    loader = poptorch.DataLoader(opts, dataset, batch_size=args.batch_size, shuffle=True,
                                 drop_last=True, num_workers=worker_count(args.num_workers),
                                 **loader_options)
    steps_per_epoch = len(loader)
    print(f"Samples per epoch: {len(dataset)}")
    print(f"Steps per epoch: {steps_per_epoch}")
    print(f"Data loaded in {time.perf_counter() - start_loading} secs")
    print("-----------------------------------------------------------")

    total_steps = min(args.training_steps, args.epochs * steps_per_epoch)
    optimizer = make_optimizer(args, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(args, total_steps))
    step = 0
    if args.checkpoint_input_dir:
        state = torch.load(os.path.join(args.checkpoint_input_dir, "checkpoint.pt"))
        model.load_state_dict(state["model"])
        if args.resume_training_from_checkpoint:
            optimizer.load_state_dict(state["optimizer"])
            step = state["step"]
            for _ in range(step):
                scheduler.step()
    model.train()
    training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)

    print("--------------------- Training Started --------------------")
    if args.compile_only:
        input_ids, labels = next(iter(loader))
        training_model.compile(input_ids, labels)
        print("Compilation finished")
        return 0

    for epoch in range(args.epochs):
        if step >= total_steps:
            break
        for input_ids, labels in loader:
            if step >= total_steps:
                break
            start = time.perf_counter()
            losses, accs = training_model(input_ids, labels)
            wall = time.perf_counter() - start
            scheduler.step()
            training_model.setOptimizer(optimizer)
            duration = step_duration(training_model) or wall
            if step % args.log_steps == 0:
                print(f"step {step % steps_per_epoch} of epoch {epoch}, "
                      f"loss: {losses.float().mean().item()}, "
                      f"acc: {accs.float().mean().item()}, "
                      f"lr: {scheduler.get_last_lr()[0]}, "
                      f"throughput: {samples_per_step / duration} samples/sec")
            step += 1
            if (args.checkpoint_output_dir and args.save_per_steps
                    and step % args.save_per_steps == 0):
                save_checkpoint(args, training_model, model, optimizer, step, f"step_{step}")
        if (args.checkpoint_output_dir and args.save_per_epochs
                and (epoch + 1) % args.save_per_epochs == 0):
            save_checkpoint(args, training_model, model, optimizer, step, f"epoch_{epoch + 1}")
    training_model.detachFromDevice()
    return 0


if __name__ == "__main__":
    sys.exit(main())
