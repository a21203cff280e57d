#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not Graphcore's code).
"""Train ResNet-50 for image classification on IPUs with PopTorch.

Run directly (`srun --ipus=4 python3 train.py --config resnet50-pod4 ...`) or
under poprun, in which case popdist supplies the replicas. The configurations
are in configs.yml; command-line options override them.

Emulator scale: the model keeps ResNet-50's topology (a 7x7 stem, then
bottleneck blocks 3-4-6-3, 1000 classes) with every layer's channel count
divided by WIDTH_DIVISOR and images of IMAGE_SIZE pixels instead of 224, so
that it trains in seconds on a CPU. Real ImageNet is used when
--imagenet-data-path is an image folder; otherwise a generated, deterministic
1000-class dataset stands in for it. The batch, replica and learning-rate
settings are the documented ones.
"""

import argparse
import datetime
import math
import os
import sys
import time
from pathlib import Path

import popdist
import popdist.poptorch
import poptorch
import torch
import torch.nn as nn
import torchvision
import yaml
from tqdm import tqdm

# Reduced scale for the emulator (see the module docstring).
WIDTH_DIVISOR = 16
IMAGE_SIZE = 16
NUM_CLASSES = 1000
# Generated stand-in for ImageNet: one global batch of the resnet50-pod4 config per epoch.
GENERATED_TRAIN_IMAGES = 16416
GENERATED_VALIDATION_IMAGES = 2000
# Parameters of the full-size ResNet-50: the emulator's IPU timing model uses this size.
NOMINAL_PARAMETERS = 25_557_032
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

CONFIG_FILE = Path(__file__).resolve().parent / "configs.yml"


def log(message):
    print(f"[INFO] {message}", flush=True)


def fail(message):
    print(f"[ERROR] {message}", file=sys.stderr, flush=True)
    sys.exit(1)


# --------------------------------------------------------------------------- configuration


def load_configs():
    try:
        with open(CONFIG_FILE) as stream:
            configs = yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as error:
        fail(f"Cannot read the configurations in {CONFIG_FILE}: {error}")
    if not isinstance(configs, dict) or not isinstance(configs.get("resnet50"), dict):
        fail(f"{CONFIG_FILE} has no resnet50 configuration")
    return configs


def parse_args(argv=None):
    configs = load_configs()
    parser = argparse.ArgumentParser(
        description="Train a CNN on IPUs with PopTorch (aitestbed emulator, reduced scale)")
    parser.add_argument("--config", choices=sorted(configs),
                        help="named configuration from configs.yml")
    parser.add_argument("--model", choices=["resnet50"], help="model to train")
    parser.add_argument("--data", choices=["imagenet", "generated"],
                        help="imagenet: read --imagenet-data-path (generated data when it is "
                             "missing); generated: always generated data")
    parser.add_argument("--imagenet-data-path", help="ImageNet folder with train/ and validation/")
    parser.add_argument("--epoch", type=int, help="number of epochs")
    parser.add_argument("--batch-size", "--micro-batch-size", dest="micro_batch_size", type=int,
                        help="micro batch size per replica")
    parser.add_argument("--gradient-accumulation", type=int,
                        help="micro batches accumulated per weight update")
    parser.add_argument("--device-iterations", type=int,
                        help="weight updates on the device per step")
    parser.add_argument("--replicas", type=int, help="number of replicas (without poprun)")
    parser.add_argument("--lr", type=float, help="learning rate")
    parser.add_argument("--momentum", type=float, help="SGD momentum")
    parser.add_argument("--weight-decay", type=float, help="weight decay")
    parser.add_argument("--label-smoothing", type=float, help="label smoothing")
    parser.add_argument("--loss-scaling", type=float, help="loss scaling")
    parser.add_argument("--lr-schedule", choices=["cosine", "step", "constant"],
                        help="learning rate schedule")
    parser.add_argument("--warmup-epoch", type=float, help="learning rate warm-up, in epochs")
    parser.add_argument("--seed", type=int, help="random seed")
    parser.add_argument("--validation-mode", choices=["none", "during", "after"],
                        help="validate after every epoch (during), at the end (after) or never")
    parser.add_argument("--dataloader-worker", type=int, help="data loader worker processes")
    parser.add_argument("--dataloader-rebatch-size", type=int,
                        help="samples each data loader worker prepares at a time")
    parser.add_argument("--available-memory-proportion", type=float, nargs="+",
                        help="proportion of IPU memory for matmul/convolution temporaries")
    parser.add_argument("--executable-cache-dir", help="directory for compiled executables")
    parser.add_argument("--compile-only", action="store_true",
                        help="compile the training model and exit")

    args = parser.parse_args(argv)
    # Command line over the named configuration over the base resnet50 one.
    config = dict.fromkeys(vars(args))
    config.update(configs["resnet50"])
    if args.config:
        config.update(configs[args.config])
    config.update({key: value for key, value in vars(args).items() if value is not None})
    return argparse.Namespace(**config)


# --------------------------------------------------------------------------- model


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided) and 1x1 expand convolutions with a residual connection."""

    expansion = 4

    def __init__(self, in_channels, width, stride):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, blocks=(3, 4, 6, 3), base_width=64, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, base_width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_channels = base_width
        for index, count in enumerate(blocks):
            width = base_width * 2 ** index
            layers = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                layers.append(Bottleneck(in_channels, width, stride))
                in_channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        # Start each residual branch at zero, as large-batch ResNet training does.
        for module in self.modules():
            if isinstance(module, Bottleneck):
                nn.init.zeros_(module.bn3.weight)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class NormalizeInput(nn.Module):
    """Turns 8-bit images into normalised floats on the IPU (eight_bit_io)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1) * 255.0)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1) * 255.0)

    def forward(self, images):
        return (images.float() - self.mean) / self.std


class ClassifierWithLoss(nn.Module):
    """Model, loss and accuracy in one graph: returns (loss, accuracy in %)."""

    def __init__(self, model, label_smoothing):
        super().__init__()
        self.normalize = NormalizeInput()
        self.model = model
        self.loss = nn.CrossEntropyLoss(label_smoothing=label_smoothing)

    def forward(self, images, labels=None):
        logits = self.model(self.normalize(images))
        if labels is None:
            return logits
        loss = poptorch.identity_loss(self.loss(logits, labels), reduction="none")
        correct = torch.eq(torch.argmax(logits, dim=1), labels).float()
        return loss, torch.mean(correct) * 100.0


# --------------------------------------------------------------------------- data


class GeneratedImages(torch.utils.data.Dataset):
    """Deterministic 8-bit images: a coloured pattern per class, shifted, with noise."""

    def __init__(self, count, seed, size=IMAGE_SIZE, classes=NUM_CLASSES):
        generator = torch.Generator().manual_seed(seed)
        patterns = torch.Generator().manual_seed(20230427)  # the same classes in every split
        coarse = torch.rand(classes, 3, 4, 4, generator=patterns)
        prototypes = nn.functional.interpolate(coarse, size=size + 8, mode="bilinear",
                                               align_corners=False)
        self.labels = torch.randint(0, classes, (count,), generator=generator)
        shifts = torch.randint(0, 9, (count, 2), generator=generator)
        images = torch.empty(count, 3, size, size, dtype=torch.uint8)
        for start in range(0, count, 4096):
            end = min(count, start + 4096)
            batch = torch.stack([
                prototypes[label, :, dy:dy + size, dx:dx + size]
                for label, (dy, dx) in zip(self.labels[start:end].tolist(),
                                           shifts[start:end].tolist(), strict=True)
            ])
            noise = torch.randn(batch.shape, generator=generator) * 0.15
            images[start:end] = ((batch + noise).clamp(0, 1) * 255).to(torch.uint8)
        self.images = images

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.images[index], int(self.labels[index])


def imagenet_split(root, split, train):
    folder = Path(root) / split
    if not folder.is_dir():
        return None
    steps = [torchvision.transforms.Resize(IMAGE_SIZE + IMAGE_SIZE // 7)]
    if train:
        steps += [torchvision.transforms.RandomResizedCrop(IMAGE_SIZE),
                  torchvision.transforms.RandomHorizontalFlip()]
    else:
        steps += [torchvision.transforms.CenterCrop(IMAGE_SIZE)]
    steps.append(torchvision.transforms.PILToTensor())
    return torchvision.datasets.ImageFolder(str(folder), torchvision.transforms.Compose(steps))


def load_datasets(args):
    """(train, validation, description) from ImageNet when present, else generated data."""
    path = args.imagenet_data_path
    if args.data == "imagenet" and path and Path(path).is_dir():
        if args.use_bbox_info:
            fail("use_bbox_info: true needs the ImageNet bounding-box annotations, which this "
                 "dataset does not have; set use_bbox_info: false in configs.yml")
        train = imagenet_split(path, "train", train=True)
        validation = imagenet_split(path, "validation", train=False)
        if train is None:
            fail(f"No train/ folder in the ImageNet data path {path}")
        return train, validation, f"ImageNet from {path}"
    if args.data == "imagenet":
        where = f"at {path}" if path else "(no --imagenet-data-path)"
        log(f"No ImageNet data {where}: using generated data instead")
    train = GeneratedImages(GENERATED_TRAIN_IMAGES, seed=args.seed)
    validation = GeneratedImages(GENERATED_VALIDATION_IMAGES, seed=args.seed + 1)
    description = (f"generated data: {len(train)} training and {len(validation)} validation "
                   f"images, {NUM_CLASSES} classes, {IMAGE_SIZE}x{IMAGE_SIZE}")
    return train, validation, description


def worker_count(requested, dataset):
    if isinstance(dataset, GeneratedImages):
        return 0  # already in memory: nothing for workers to decode
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(0, min(requested, cores))


# --------------------------------------------------------------------------- IPU options


def build_options(args):
    """PopTorch options, and the total number of replicas."""
    if popdist.isPopdistEnvSet():
        popdist.init()
        opts = popdist.poptorch.Options()
        replicas = popdist.getNumTotalReplicas()
    else:
        opts = poptorch.Options()
        replicas = args.replicas
        opts.replicationFactor(replicas)
    opts.deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    opts.outputMode(poptorch.OutputMode.All)
    opts.randomSeed(args.seed)
    if args.half_partial:
        opts.Precision.setPartialsType(torch.half)
    opts.Precision.enableStochasticRounding(bool(args.enable_stochastic_rounding))
    if args.available_memory_proportion:
        proportions = list(args.available_memory_proportion)
        ipus = args.ipus_per_replica
        proportions += proportions[-1:] * (ipus - len(proportions))
        opts.setAvailableMemoryProportion(
            {f"IPU{ipu}": proportions[ipu] for ipu in range(ipus)})
    if args.executable_cache_dir:
        opts.enableExecutableCaching(args.executable_cache_dir)
    return opts, replicas


def validation_options(args):
    if popdist.isPopdistEnvSet():
        opts = popdist.poptorch.Options()
    else:
        opts = poptorch.Options().replicationFactor(args.replicas)
    opts.deviceIterations(args.device_iterations)
    opts.randomSeed(args.seed)
    if args.executable_cache_dir:
        opts.enableExecutableCaching(args.executable_cache_dir)
    return opts


# --------------------------------------------------------------------------- training


def device_span(executor):
    """(first input, last output complete) of the executor's last run, in device seconds."""
    counters = executor.getPerfCounters()
    starts = [times[0] for times in counters.get("input", []) if len(times)]
    ends = [times[-1] for times in counters.get("output_complete", []) if len(times)]
    if not starts or not ends:
        return None
    return float(min(starts)), float(max(ends))


def learning_rate(args, progress):
    """Learning rate at `progress` epochs into training."""
    if args.warmup_epoch and progress < args.warmup_epoch:
        return args.lr * progress / args.warmup_epoch
    if args.lr_schedule == "cosine":
        span = max(args.epoch - args.warmup_epoch, 1e-9)
        done = min(max(progress - args.warmup_epoch, 0.0) / span, 1.0)
        return args.lr * 0.5 * (1.0 + math.cos(math.pi * done))
    if args.lr_schedule == "step":
        return args.lr * 0.1 ** int(3 * progress / max(args.epoch, 1))
    return args.lr


def make_optimizer(args, model, lr):
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim <= 1 or name.endswith(".bias") else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return poptorch.optim.SGD(groups, lr=lr, momentum=args.momentum,
                              loss_scaling=args.loss_scaling)


def validate(args, validation_model, loader):
    correct_sum, batches = 0.0, 0
    for images, labels in tqdm(loader, desc="Validation"):
        logits = validation_model(images)
        correct_sum += torch.eq(torch.argmax(logits, dim=1), labels).float().mean().item()
        batches += 1
    accuracy = 100.0 * correct_sum / max(batches, 1)
    log(f"Validation accuracy: {accuracy:.2f} %")
    return accuracy


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    opts, replicas = build_options(args)
    ipus = replicas * args.ipus_per_replica
    global_batch = args.micro_batch_size * args.gradient_accumulation * replicas
    samples_per_step = global_batch * args.device_iterations

    log(f"Emulator: ResNet-50 topology at reduced scale (channel widths /{WIDTH_DIVISOR}, "
        f"{IMAGE_SIZE}x{IMAGE_SIZE} images, computed in float32)")
    log(f"Total replicas: {replicas}")
    log(f"Global batch size: {global_batch}")
    log(f"Number of IPUs required: {ipus}")

    log("Loading the data")
    train_set, validation_set, description = load_datasets(args)
    log(f"Using {description}")
    workers = worker_count(args.dataloader_worker, train_set)
    rebatching = {}
    if workers and args.dataloader_rebatch_size:
        rebatching = {"mode": poptorch.DataLoaderMode.AsyncRebatched,
                      "rebatched_worker_size": args.dataloader_rebatch_size}
    train_loader = poptorch.DataLoader(
        opts, train_set, batch_size=args.micro_batch_size, shuffle=True, drop_last=True,
        num_workers=workers, **rebatching)
    steps_per_epoch = len(train_loader)
    if steps_per_epoch == 0:
        fail(f"The dataset has {len(train_set)} samples, fewer than one step "
             f"({samples_per_step} samples): use a smaller batch")

    network = ResNet(base_width=64 // WIDTH_DIVISOR)
    model = ClassifierWithLoss(network, args.label_smoothing)
    model.aitestbed_nominal_parameters = NOMINAL_PARAMETERS
    model.train()

    def step_lr(epoch, step):
        """Learning rate for a step: the schedule's value where the step ends."""
        return learning_rate(args, (epoch - 1) + (step + 1) / steps_per_epoch)

    optimizer = make_optimizer(args, network, step_lr(1, 0))
    training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)

    if args.compile_only:
        images, labels = next(iter(train_loader))
        training_model.compile(images, labels)
        log("Compilation finished")
        return 0

    validation_loader = None
    validation_opts = validation_options(args)
    if args.validation_mode != "none" and validation_set is not None:
        validation_loader = poptorch.DataLoader(
            validation_opts, validation_set, batch_size=args.micro_batch_size,
            shuffle=False, drop_last=True,
            num_workers=worker_count(args.dataloader_worker, validation_set))
    validation_model = None

    def run_validation():
        nonlocal validation_model
        training_model.detachFromDevice()
        model.eval()
        if validation_model is None:
            validation_model = poptorch.inferenceModel(model, validation_opts)
        else:
            validation_model.copyWeightsToDevice()
        validate(args, validation_model, validation_loader)
        validation_model.detachFromDevice()
        model.train()

    training_start, training_end = None, None
    wall_training_start = time.time()
    for epoch in range(1, args.epoch + 1):
        log(f"Epoch {epoch}/{args.epoch}")
        epoch_start, epoch_end = None, None
        loss_sum, accuracy_sum = 0.0, 0.0
        wall_start = time.time()
        bar = tqdm(train_loader, total=steps_per_epoch)
        for step, (images, labels) in enumerate(bar):
            if step > 0 or epoch > 1:
                for group in optimizer.param_groups:
                    group["lr"] = step_lr(epoch, step)
                training_model.setOptimizer(optimizer)
            losses, accuracies = training_model(images, labels)
            loss_sum += float(losses.float().mean())
            accuracy_sum += float(accuracies.float().mean())
            span = device_span(training_model)
            if span is not None:
                epoch_start = span[0] if epoch_start is None else epoch_start
                epoch_end = span[1]
            bar.set_description(
                f"Loss:{loss_sum / (step + 1):.4f} | Accuracy:{accuracy_sum / (step + 1):.2f}%")
        bar.close()
        if epoch_start is not None:
            duration = max(epoch_end - epoch_start, 1e-9)
            training_start = epoch_start if training_start is None else training_start
            training_end = epoch_end
        else:
            duration = time.time() - wall_start
        log(f"Epoch {epoch}")
        log(f"loss: {loss_sum / steps_per_epoch:.4f},")
        log(f"accuracy: {accuracy_sum / steps_per_epoch:.2f} %")
        log(f"throughput: {steps_per_epoch * samples_per_step / duration:.1f} samples/sec")
        if args.validation_mode == "during" and validation_loader is not None:
            run_validation()
            training_model.attachToDevice()

    if training_start is not None:
        # Device time from the start of the compilation to the end of the last step.
        took = datetime.timedelta(
            seconds=training_model.compilationTime() + training_end - training_start)
    else:
        took = datetime.timedelta(seconds=time.time() - wall_training_start)
    log(f"Finished training. Time: {datetime.datetime.now()}. It took: {took}")
    if args.validation_mode == "after" and validation_loader is not None:
        run_validation()
    else:
        training_model.detachFromDevice()
    return 0


if __name__ == "__main__":
    sys.exit(main())
