"""Code written elsewhere runs unmodified (issue 19): what the vendors' tutorials need
from a node, and our own public-API-shaped user code for each SDK, run as a user runs it.

The user files here are ours, written against the vendors' documented APIs (never
copies of their code); docs/<system>.md lists the upstream examples they stand for.
"""

from __future__ import annotations

import subprocess
import textwrap

import pytest

pytestmark = pytest.mark.presubmit

GC_LOGIN, POPLAR = "gc-login-01", "gc-poplar-02"  # gc-poplar-01 is closed to users


def on_poplar(cluster, script: str, timeout: float = 600) -> tuple[int, str]:
    return cluster.hop(GC_LOGIN, POPLAR, script, timeout=timeout)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def write(path: str, text: str) -> str:
    """A shell line writing `text` to `path` (the user's own file, as an editor would)."""
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'PYEOF'\n{textwrap.dedent(text)}\nPYEOF"


FASHION_WORKERS = """
    import sys

    import matplotlib
    import sklearn.metrics
    import torch
    import torchvision

    matplotlib.use("Agg")
    data = torchvision.datasets.FashionMNIST(
        "~/.torch/datasets", train=False, download=True,
        transform=torchvision.transforms.ToTensor())
    # Workers hand their batches over in /dev/shm (Docker's 64 MB made them die of Bus error).
    loader = torch.utils.data.DataLoader(data, batch_size=1000, num_workers=2)
    labels = torch.cat([y for _, y in loader])
    print("images", len(data), "classes", data.classes[0], data.classes[-1])
    print("labels", labels.bincount().tolist())
    print("sklearn", sklearn.metrics.accuracy_score(labels, labels))
    cifar = torchvision.datasets.CIFAR10("~/.torch/datasets", train=True, download=True)
    print("cifar", len(cifar), cifar.classes[0], cifar.data.shape[1:])
"""


def test_tutorials_data_workers_and_plotting_work_offline(cluster):
    """FashionMNIST(download=True) finds real data, a DataLoader's workers run, the
    tutorials' requirements (matplotlib, scikit-learn) import, on a Graphcore host."""
    rc, out = on_poplar(cluster, "\n".join([
        "df -k /dev/shm | awk 'NR==2 {print \"shm_kb\", $2}'",
        write("~/elsewhere/fashion_workers.py", FASHION_WORKERS),
        "python3 ~/elsewhere/fashion_workers.py",
    ]))
    assert rc == 0, out
    shm_kb = int(next(line.split()[1] for line in out.splitlines() if line.startswith("shm_kb")))
    assert shm_kb > 1024 * 1024, out
    assert "images 10000 classes T-shirt/top Ankle boot" in out
    assert "labels [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]" in out
    assert "sklearn 1.0" in out
    # The CIFAR-10 stand-in (no registry ships the real images), accepted by torchvision.
    assert "cifar 50000 airplane (32, 32, 3)" in out
    assert "Bus error" not in out and "Downloading" not in out


def test_shell_as_a_user_is_that_users_login(cluster):
    result = cluster.cli("shell", "-u", cluster.user, GC_LOGIN, "--",
                         "echo $USER $LOGNAME $HOME; pwd")
    assert result.stdout.split() == [cluster.user, cluster.user, f"/home/{cluster.user}",
                                     f"/home/{cluster.user}"]
    result = cluster.cli("shell", "-u", "nobody-here", GC_LOGIN, "--", "true", check=False)
    assert result.returncode != 0
    assert "nobody-here does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_dataset_hook_never_follows_a_users_link_as_root(cluster):
    """The start-up hook places ~/.torch/datasets/* as the home's owner: a user who points
    ~/.torch/datasets at a root-owned directory gets nothing written there."""
    container = cluster.container(POPLAR)
    rc, out = cluster.run(GC_LOGIN, "mv ~/.torch/datasets ~/.torch/datasets.mine && "
                                    "ln -s /etc/aitestbed ~/.torch/datasets")
    assert rc == 0, out
    try:
        hook = docker("exec", container, "/etc/aitestbed/init.d/graphcore-sdk")
        assert hook.returncode == 0, hook.stdout + hook.stderr
        listing = docker("exec", container, "ls", "-la", "/etc/aitestbed")
        assert "MNIST" not in listing.stdout, listing.stdout
    finally:
        rc, out = cluster.run(GC_LOGIN, "rm ~/.torch/datasets && "
                                        "mv ~/.torch/datasets.mine ~/.torch/datasets")
        assert rc == 0, out


# -- Graphcore: a user's own PopTorch model, in the tutorials' shape ----------------------
PIPELINED = """
    import poptorch
    import torch
    import torchvision


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 8, 3)
            self.fc = torch.nn.Linear(8 * 13 * 13, 10)
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, labels=None):
            with poptorch.Block("features"):
                x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
            with poptorch.Block("classifier"):
                out = self.fc(x.flatten(1))
            return out if labels is None else (out, self.loss(out, labels))


    opts = poptorch.Options()
    opts.deviceIterations(2)
    opts.Training.gradientAccumulation(4)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(
        poptorch.Stage("features").ipu(0), poptorch.Stage("classifier").ipu(1)))
    opts.anchorTensor("grad_fc", "Gradient___fc.weight")
    data = torchvision.datasets.FashionMNIST(
        "~/.torch/datasets", train=True, download=True,
        transform=torchvision.transforms.ToTensor())
    loader = poptorch.DataLoader(opts, torch.utils.data.Subset(data, range(1024)),
                                 batch_size=8, shuffle=True, num_workers=2)
    model = poptorch.trainingModel(Net(), opts, optimizer=poptorch.optim.SGD(
        Net().parameters(), lr=0.05))
    for images, labels in loader:
        out, loss = model(images, labels)
    print("loss", round(float(loss.mean()), 3))
    print("anchored", [n for n in model.getTensorNames() if n == "Gradient___fc.weight"],
          tuple(model.getAnchoredTensor("grad_fc").shape))
"""


def test_a_pipelined_poptorch_model_with_anchors_and_workers_trains_on_two_ipus(cluster):
    """Named blocks mapped by Stage(...).ipu(n) take two IPUs (not one per block entry);
    an anchored gradient comes back; poptorch.DataLoader's workers feed it."""
    from aitestbed.graphcore import guide as gc_guide
    from aitestbed.node import guide

    rc, out = on_poplar(cluster, guide.script(
        f"if ! test -x {gc_guide.GC_VENV}/bin/python; then",
        guide.script(gc_guide.GC_SETUP, quiet=True), "fi >/dev/null",
        gc_guide.GC_ACTIVATE,
        write("~/elsewhere/pipelined.py", PIPELINED),
        "cd ~/elsewhere && /opt/slurm/bin/srun --ipus=2 python pipelined.py"), timeout=900)
    assert rc == 0, out
    assert "anchored ['Gradient___fc.weight'] (10, 1352)" in out, out
    assert "Bus error" not in out


# -- SambaNova: a user's own app, in the tutorials' shape ---------------------------------
SAMBA_APP = """
    import sys

    import sambaflow.samba.utils as utils
    import torch
    import torchvision
    from sambaflow import samba
    from sambaflow.samba.utils.argparser import parse_app_args, parse_yaml_to_args
    from sambaflow.samba.utils.dataset.mnist import dataset_transform


    class Linear(torch.nn.Module):
        def __init__(self, features, classes):
            super().__init__()
            self.lin = torch.nn.Linear(features, classes)
            self.criterion = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):
            out = self.lin(x)
            return self.criterion(out, y), out


    def add_args(parser):
        parser.add_argument("--lr", type=float, default=0.01)
        parser.add_argument("--num-features", type=int, default=784)
        parser.add_argument("--num-classes", type=int, default=10)
        parser.add_argument("--steps", type=int, default=20)
        parser.add_argument("--yaml-config", default=None)
        parser.add_argument("--data-folder", default="mnist_data")


    args = parse_app_args(argv=sys.argv[1:], common_parser_fn=add_args)
    if args.yaml_config:
        args = parse_yaml_to_args(args.yaml_config, args)
    model = Linear(args.num_features, args.num_classes)
    samba.from_torch_model_(model)
    x = samba.randn(args.batch_size, args.num_features, name="image", batch_dim=0)
    y = samba.randint(args.num_classes, (args.batch_size,), name="label", batch_dim=0)
    optimizer = samba.optim.SGD(model.parameters(), lr=args.lr)
    if args.command == "compile":
        samba.session.compile(model, [x, y], optimizer, name="mine",
                              app_dir=utils.get_file_dir(__file__), config_dict=vars(args))
    else:
        utils.trace_graph(model, [x, y], optimizer, pef=args.pef)
        data = torchvision.datasets.MNIST(root=args.data_folder, train=True, download=True,
                                          transform=dataset_transform(vars(args)))
        loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, drop_last=True)
        for step, (images, labels) in enumerate(loader):
            if step == args.steps:
                break
            loss, _ = samba.session.run(
                input_tensors=[samba.from_torch_tensor(images, name="image", batch_dim=0),
                               samba.from_torch_tensor(labels, name="label", batch_dim=0)],
                output_tensors=model.output_tensors, hyperparam_dict={"lr": args.lr})
        print(f"lr {args.lr} features {images.shape[1]} loss {samba.to_torch(loss).item():.3f}")
"""


def test_a_sambaflow_app_with_a_yaml_config_compiles_and_trains_on_mnist(cluster):
    """parse_yaml_to_args, the flattening dataset_transform, and MNIST(download=True)
    finding the node's copy placed in the app's --data-folder (as hello_world's logreg
    does): compile, then run under srun on SN30."""
    rc, out = cluster.hop("sambanova", "sn30-r1-h1", "\n".join([
        "set -e",
        write("~/elsewhere/sn/app.py", SAMBA_APP),
        "cd ~/elsewhere/sn && rm -rf out mnist_data && printf 'lr: 0.05\\n' > config.yaml",
        "srun python app.py compile -b 16 --pef-name=mine --output-folder=out",
        "srun python app.py run -b 16 --pef=out/mine/mine.pef --yaml-config config.yaml",
    ]), timeout=900)
    assert rc == 0, out
    assert "lr 0.05 features 784 loss" in out, out
    assert "Downloading" not in out


# -- Cerebras: a user's own cstorch loop on CSX --------------------------------------------
def test_a_cstorch_training_loop_of_the_users_own_runs_on_csx(cluster):
    """The 2.x loop shape (backend, compile, DataExecutor, traced step, closures) on the
    appliance; checkpoints and summaries land in the user's model dir, owned by the user."""
    from pathlib import Path

    from aitestbed.cerebras import guide as cs_guide
    from aitestbed.node import guide

    source = (Path(__file__).parent / "files" / "cstorch_loop.py").read_text()
    rc, out = cluster.run("cer-login-01", guide.script(
        "set -e",
        f"if ! test -x {cs_guide.CS_VENV}/bin/python; then",
        guide.script(cs_guide.CS_HOME, cs_guide.CS_VENV_SETUP, quiet=True), "fi >/dev/null",
        cs_guide.CS_ACTIVATE,
        write("~/elsewhere/cs/cstorch_loop.py", source),
        "cd ~/elsewhere/cs && rm -rf md",
        "AITESTBED_TIME_SCALE=0.1 python cstorch_loop.py CSX $HOME/elsewhere/cs/md /home/",
        "stat -c '%U %n' md/checkpoint_30.mdl"), timeout=900)
    assert rc == 0, out
    assert "| Train Device=CSX, Step=30, Loss=" in out, out
    assert "Saved checkpoint at step 20" in out
    assert f"{cluster.user} md/checkpoint_30.mdl" in out
