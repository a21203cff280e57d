"""Code written elsewhere runs unmodified (issue 19): what the vendors' tutorials need
from a node, and our own public-API-shaped user code for each SDK, run as a user runs it.

The user files here are ours, written against the vendors' documented APIs (never
copies of their code); docs/<system>.md lists the upstream examples they stand for.
"""

from __future__ import annotations

import subprocess
import textwrap

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
