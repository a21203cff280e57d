"""Graphcore figures (printed, gating nothing): `make bench`.

On a mini cluster of its own, as a user on gc-poplar-02 with the guide's venv:
  - `import poptorch` wall time (target <= 2 s);
  - the documented MNIST run, `srun --ipus=1 python mnist_poptorch.py` (10 epochs,
    batch 8, default time scale): wall time (target <= 6 min), test accuracy
    (target >= 97 %) and the device-time figures it prints, against the guide's
    (Graph compilation 00:20, Epochs 10/10 01:35 at 9.57 s/it: within 10 %);
  - the same run again, with the executable cached: seconds until training starts
    (target <= 5 s; measured to the first training step through POPTORCH_LOG_LEVEL=DEBUG).
"""

from __future__ import annotations

import re
import uuid

from aitestbed.graphcore import guide as gc_guide
from aitestbed.host.driver import Driver, terminal_view
from aitestbed.node import guide
from benchlib import cli, step

# The guide's set-up (not timed: quiet, without listing the tags), and the cache directory.
SETUP = guide.script("set -e", "mkdir -p ~/tmp", gc_guide.GC_SETUP, quiet=True,
                     skip=("git tag",))
IMPORT = guide.script(gc_guide.GC_ACTIVATE, "TIMEFORMAT=%R",
                      "for i in 1 2 3 4 5; do { time python -c 'import poptorch'; } 2>&1; done")
# {flags}: the run's own options (str.format).
MNIST = guide.script(
    gc_guide.GC_ENV, f"cd {gc_guide.MNIST_DIR}", "start=$(date +%s.%N)",
    "/opt/slurm/bin/srun --ipus=1 python mnist_poptorch.py {flags}",
    'echo "WALL $(python3 -c "import time; print(time.time() - $start)")"')
# The executor's debug line of the first training step marks when training starts.
CACHED = MNIST.replace("start=$(date +%s.%N)", 'start=$(date +%s.%N); echo "START $(date +%T.%N)"')\
    .replace("/opt/slurm/bin/srun", "POPTORCH_LOG_LEVEL=DEBUG /opt/slurm/bin/srun")
COMPILE_BAR = r"Graph compilation: 100%.*?\[([\d:]+)<"


def on_poplar(name: str, script: str) -> str:
    """script in a login shell on gc-poplar-02, reached from gc-login-01 as in the guide."""
    result = step(Driver(name).hop("gc-login-01", "gc-poplar-02", script), script)
    return terminal_view(result.stdout + result.stderr)


def figure(pattern: str, text: str) -> str:
    found = re.search(pattern, text, re.MULTILINE)
    return found.group(1) if found else "?"


def main() -> None:
    name = f"bench-gc-{uuid.uuid4().hex[:6]}"
    cli(name, "up", "--profile", "mini", "--systems", "graphcore")
    cli(name, "login")  # the passcode once per login node
    try:
        on_poplar(name, SETUP)
        imports = sorted(float(x) for x in on_poplar(name, IMPORT).split())
        first = on_poplar(name, MNIST.format(flags=""))
        cached = on_poplar(name, CACHED.format(flags="--epochs 1"))
    finally:
        cli(name, "destroy")
    wall = float(figure(r"WALL ([\d.]+)", first))
    accuracy = figure(r"Accuracy on test set: ([\d.]+)%", first)
    # The bar's last draw (on close) has the whole run's rate.
    epochs = re.findall(r"Epochs: 100%.*?10/10 \[([\d:]+)<[\d:]+, *([\d.]+s/it)\]", first)
    epochs_text = ", ".join(epochs[-1]) if epochs else "?"
    print(f"import poptorch: median {imports[len(imports) // 2]:.2f} s, max {imports[-1]:.2f} s"
          "  (target <= 2 s)")
    print(f"MNIST, 10 epochs at batch 8: wall {wall:.0f} s (target <= 360 s), "
          f"test accuracy {accuracy} % (target >= 97 %)")
    print(f"  printed: Graph compilation [{figure(COMPILE_BAR, first)}] (guide 00:20), "
          f"Epochs 10/10 [{epochs_text}] (guide 01:35, 9.57s/it)")
    started = _seconds(figure(r"START ([\d:.]+)", cached))
    step = _seconds(figure(r"^\[([\d:.]+)\] \[poptorch::python\] \[debug\] 50 device", cached))
    print(f"cached second run: Graph compilation [{figure(COMPILE_BAR, cached)}], "
          f"training starts {step - started:.1f} s after the command (target <= 5 s)")


def _seconds(clock: str) -> float:
    hours, minutes, seconds = clock.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


if __name__ == "__main__":
    main()
