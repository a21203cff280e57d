"""Figures of a workshop (printed, gating nothing): `make bench`.

On a mini cluster of its own (all three systems, 14 nodes):
  - `classroom create --learners 30` (one onboarding run, the homes' snapshots, the
    sheets and their PDF), then `classroom destroy`; then `create --learners 100`:
    wall time of each (targets: 60 s and 3 min);
  - 20 learners running the Graphcore MNIST exercise at once: each copies the example to
    their home and submits the guide's batch job (`sbatch --ipus=1`, one epoch of
    batches of 64) at the same moment, with the room's PopTorch venv the instructor made
    once in /projects/workshop; the wall time until every job ended, how many ended
    COMPLETED (none may be lost), and the host's CPU (busy %, mean and max over 1 s
    samples) and memory in use (max) meanwhile.
"""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from aitestbed.graphcore import guide as gc_guide
from aitestbed.host.naming import container_name
from aitestbed.host.state import ClusterState
from benchlib import cli, destroy

NODE = "gc-poplar-01"
MNIST = "tutorials/simple_applications/pytorch/mnist"
SHARED = "/projects/workshop"
ROOM_ENV = f"""set -e
cd {SHARED}
virtualenv -q venv
. venv/bin/activate
pip install -q {gc_guide.GC_SDK_ROOT}/{gc_guide.GC_WHEEL}
git clone -q https://github.com/graphcore/examples.git
cd examples && git checkout -q {gc_guide.GC_TAG}
chmod -R g+rX {SHARED}
"""
LEARNER_JOB = f"""set -e
cd ~ && rm -rf mnist && cp -r {SHARED}/examples/{MNIST} mnist && cd mnist
. {SHARED}/venv/bin/activate
export POPTORCH_CACHE_DIR=~/tmp
cat > {gc_guide.MNIST_JOB} <<'EOF'
#!/bin/sh
python mnist_poptorch.py --epochs 1 --batch-size 64
EOF
sbatch --ipus=1 --output=mnist-poptorch-output.log {gc_guide.MNIST_JOB} | awk '{{print $4}}'
"""


def on(name: str, node: str, script: str, user: str) -> str:
    result = subprocess.run(["docker", "exec", "-i", "-u", user, "-w", "/",
                             container_name(name, node), "bash", "-lc", script],
                            capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode:
        raise SystemExit(f"bench: {user}@{node} failed:\n{script}\n{result.stdout}"
                         f"{result.stderr}")
    return result.stdout


class HostSampler:
    """The host's CPU busy % and memory in use, sampled every second."""

    def __init__(self):
        self.cpu: list[float] = []
        self.memory: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu() -> tuple[int, int]:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    @staticmethod
    def _used() -> int:
        info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
        return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) * 1024

    def _run(self) -> None:
        busy, total = self._cpu()
        while not self._stop.wait(1.0):
            b, t = self._cpu()
            self.cpu.append(100.0 * (b - busy) / max(t - total, 1))
            busy, total = b, t
            self.memory.append(self._used())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main() -> None:
    name = f"bench-cl-{uuid.uuid4().hex[:6]}"
    figures = {}
    try:
        figures["up"] = cli(name, "up", "--profile", "mini")
        figures["create30"] = cli(name, "classroom", "create", "--learners", "30")
        figures["destroy30"] = cli(name, "classroom", "destroy", "--yes")
        figures["create100"] = cli(name, "classroom", "create", "--learners", "100",
                                   "--prefix", "ws")
        print(f"  so far: {', '.join(f'{k} {v:.1f} s' for k, v in figures.items())}",
              flush=True)
        started = time.monotonic()
        instructor = ClusterState(name).load().user  # the project's PI
        on(name, NODE, ROOM_ENV, instructor)
        figures["room_env"] = time.monotonic() - started
        learners = [f"ws{i:03d}" for i in range(1, 21)]
        idle = HostSampler()
        with idle:
            time.sleep(10)
        with HostSampler() as sampler:
            started = time.monotonic()
            with ThreadPoolExecutor(len(learners)) as pool:
                jobs = list(pool.map(lambda u: on(name, NODE, LEARNER_JOB, u).split()[-1],
                                     learners))
            submitted = time.monotonic() - started
            while True:
                queue = on(name, "gc-slurmctld", "squeue -h -o %i", "root").split()
                if not set(jobs) & set(queue):
                    break
                time.sleep(2)
            figures["mnist20"] = time.monotonic() - started
        states = on(name, "gc-slurmctld",
                    "sacct -n -X -P -o JobID,State -j " + ",".join(jobs), "root")
        done = [line for line in states.split() if line.endswith("|COMPLETED")]
        outputs = sum(
            "Accuracy on test set" in on(name, NODE, "cat ~/mnist/mnist-poptorch-output.log", u)
            for u in learners)
    finally:
        destroy(name)
    gib = 2**30
    print("Workshops (profile mini, 14 nodes)")
    print(f"  up with the images built: {figures['up']:.1f} s")
    print(f"  classroom create --learners 30: {figures['create30']:.1f} s (target 60 s); "
          f"destroy: {figures['destroy30']:.1f} s")
    print(f"  classroom create --learners 100: {figures['create100']:.1f} s (target 180 s)")
    print(f"  the room's PopTorch venv and examples in {SHARED}: {figures['room_env']:.1f} s")
    print(f"  20 learners' MNIST batch jobs at once: submitted in {submitted:.1f} s, all ended "
          f"after {figures['mnist20']:.1f} s; {len(done)}/20 COMPLETED, {outputs}/20 outputs "
          "with the test accuracy")
    print(f"  host meanwhile: CPU busy {statistics.mean(sampler.cpu):.0f} % mean, "
          f"{max(sampler.cpu):.0f} % max (idle cluster: {statistics.mean(idle.cpu):.0f} %); "
          f"memory in use max {max(sampler.memory) / gib:.1f} GiB (idle cluster: "
          f"{statistics.mean(idle.memory) / gib:.1f} GiB)")


if __name__ == "__main__":
    main()
