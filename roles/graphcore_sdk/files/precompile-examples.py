#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not Graphcore's code).
"""Precompile the examples' documented runs into a PopTorch executable cache.

usage: precompile-examples.py EXAMPLES_DIR CACHE_DIR

"Precompiled artifacts are present at the /software/graphcore/projects/models_compile
location for the above models. copy them to your ~/tmp and set export
POPTORCH_CACHE_DIR=~/tmp to skip the compile process." (ALCF's Graphcore hands-on.)

The image build runs this once per Poplar SDK release, with that release's poptorch
wheel on PYTHONPATH: each run compiles, with the poptorch that users install, the
programs the guide's command lines compile (offline: useOfflineIpuTarget, so no IPU
and no V-IPU server is needed) and writes their `<hash>.popef` into CACHE_DIR:

- MNIST (tutorials/simple_applications/pytorch/mnist, `python mnist_poptorch.py` with
  its defaults): the training model and the inference model;
- GPT-2 (nlp/gpt2/pytorch/train_gpt2.py with the guide's arguments), through the
  script's own --compile-only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

MNIST = Path("tutorials/simple_applications/pytorch/mnist/mnist_poptorch.py")
GPT2 = Path("nlp/gpt2/pytorch/train_gpt2.py")
# The guide's GPT-2 command line (ALCF's Graphcore "Example Programs": GPT-2 PyTorch on POD16).
GPT2_GUIDE_ARGS = [
    "--model", "gpt2", "--ipus-per-replica", "4", "--replication-factor", "4",
    "--gradient-accumulation", "2048", "--device-iterations", "8", "--batch-size", "1",
    "--layers-per-ipu", "0", "4", "4", "4", "--matmul-proportion", "0.15", "0.15", "0.15",
    "0.15", "--max-len", "1024", "--optimizer", "AdamW", "--learning-rate", "0.00015",
    "--lr-schedule", "cosine", "--lr-warmup", "0.01", "--remap-logit", "True",
    "--enable-sequence-serialized", "True", "--embedding-serialization-factor", "4",
    "--recompute-checkpoint-every-layer", "True", "--enable-half-partials", "True",
    "--replicated-tensor-sharding", "True", "--dataset", "generated", "--epochs", "1",
]


def load(path: Path):
    """Import an example script as a module (its directory first on the path, as
    `python script.py` has it)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mnist(examples: Path) -> None:
    """What `python mnist_poptorch.py` compiles: main()'s models and options, its
    default batch sizes, the DataLoader's tensors (float32 images, int64 labels)."""
    import poptorch
    import torch

    example = load(examples / MNIST)
    argv, sys.argv = sys.argv, [str(examples / MNIST)]
    try:
        args = example.parse_args()
    finally:
        sys.argv = argv
    device_iterations = 50  # as main() has it, whatever --device-iterations says
    model = example.Network()
    model_with_loss = example.TrainingModelWithLoss(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    training_opts = poptorch.Options().deviceIterations(device_iterations)
    training_opts = training_opts.outputMode(poptorch.OutputMode.All).useOfflineIpuTarget()
    training = poptorch.trainingModel(model_with_loss, training_opts, optimizer=optimizer)
    samples = args.batch_size * device_iterations
    training.compile(torch.zeros(samples, 1, 28, 28),
                     torch.zeros(samples, dtype=torch.int64))
    inference = poptorch.inferenceModel(model, options=poptorch.Options().useOfflineIpuTarget())
    inference.compile(torch.zeros(args.test_batch_size, 1, 28, 28))


def gpt2(examples: Path) -> None:
    """The guide's GPT-2 run, compiled by the script's own --compile-only."""
    example = load(examples / GPT2)
    with contextlib.redirect_stdout(sys.stderr):
        status = example.main(GPT2_GUIDE_ARGS + ["--compile-only", "True"])
    if status:
        raise SystemExit(f"train_gpt2.py --compile-only exited with {status}")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    examples, cache = Path(argv[0]), Path(argv[1])
    for script in (MNIST, GPT2):
        if not (examples / script).is_file():
            print(f"precompile-examples: no {script} in {examples}", file=sys.stderr)
            return 1
    # Before poptorch is imported: every Options() made from here on caches in CACHE_DIR.
    os.environ["POPTORCH_CACHE_DIR"] = str(cache)
    os.environ["AITESTBED_TIME_SCALE"] = "0"
    cache.mkdir(parents=True, exist_ok=True)
    before = set(cache.glob("*.popef"))
    mnist(examples)
    gpt2(examples)
    import poptorch

    made = sorted(set(cache.glob("*.popef")) - before)
    print(f"poptorch {poptorch.__version__}: {len(made)} executables in {cache}: "
          f"{' '.join(p.name for p in made)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
