"""Figures of the GroqRack (printed, gating nothing): `make bench`.

On an alcf-2026-mini cluster of its own (SYSTEMS=groq), as a user on groq-r01-gn-01
(reached from groq-login-01):
  - `up` with the images built (warm);
  - `qsub` to running: from `qsub -l select=1,place=excl` until the job's first line
    runs on a GroqNode, p50 and max over 10 jobs (one after another);
  - `groqit` of the docs' small example (examples/pytorch/hello_world.py) end to end in
    a PBS job: build (fresh cache), then the run on a GroqChip, wall time of each;
  - PBS's promise: 20 held jobs survive a restart of the server's container (the
    datastore on its volume), and the time until qstat answers again.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
import uuid

from aitestbed.groq import guide as groq_guide
from aitestbed.host.driver import Driver
from aitestbed.host.naming import container_name
from aitestbed.node import guide
from benchlib import cli, step

LOGIN, NODE, SERVER = "groq-login-01", "groq-r01-gn-01", "groq-r01-control"
QSUB_TO_RUNNING = f"""set -e
mkdir -p ~/bench && cd ~/bench && rm -f started.* latency.*
cat > mark.sh <<'EOF'
#!/bin/bash
date +%s.%N > ~/bench/started.$PBS_JOBID
EOF
for i in $(seq 10); do
    t0=$(date +%s.%N)
    job=$({groq_guide.QSUB} mark.sh)
    while [ ! -s ~/bench/started.$job ]; do sleep 0.05; done
    python3 -c "print($(cat ~/bench/started.$job) - $t0)"
done
"""
# The docs' GroqFlow clone, and their hello-world example run twice in a job (the build,
# then from the cache).
GROQFLOW = f"""set -e
cd ~ && rm -rf groqflow .cache/groqflow/hello_world bench/gf.*
{guide.script(groq_guide.GROQFLOW_SETUP, quiet=True)}
cat > ~/bench/gf.sh <<'EOF'
#!/bin/bash
{guide.script(groq_guide.GROQFLOW_ENTER)}
t0=$(date +%s.%N); {groq_guide.HELLO_WORLD} > /dev/null; t1=$(date +%s.%N)
{groq_guide.HELLO_WORLD} > /dev/null; t2=$(date +%s.%N)
echo "BUILD_AND_RUN $(python3 -c "print($t1 - $t0)") CACHED_RUN $(python3 -c "print($t2 - $t1)")"
EOF
cd ~/bench && job=$({groq_guide.QSUB} -o gf.out -e gf.err gf.sh)
while ! qstat -x $job | grep -q ' F '; do sleep 0.5; done
sleep 1; cat gf.out
"""
HOLD = """set -e
cd ~/bench && for i in $(seq 20); do qsub -h mark.sh >/dev/null; done
qstat | grep -c ' H workq'
"""


def on_node(name: str, script: str) -> str:
    result = Driver(name).ssh(LOGIN, f"ssh -o BatchMode=yes {NODE} bash -s", input=script)
    return step(result, script).stdout


def main() -> None:
    name = f"bench-gq-{uuid.uuid4().hex[:6]}"
    up = cli(name, "up", "--profile", "alcf-2026-mini", "--systems", "groq")
    cli(name, "login")
    try:
        latencies = sorted(float(x) for x in on_node(name, QSUB_TO_RUNNING).split())
        groqflow = on_node(name, GROQFLOW)
        held = int(on_node(name, HOLD).split()[-1])
        started = time.monotonic()
        subprocess.run(["docker", "restart", "-t", "30", container_name(name, SERVER)],
                       check=True, capture_output=True)
        while True:
            out = Driver(name).ssh(LOGIN, "qstat 2>/dev/null | grep -c ' H workq'").stdout
            if out.strip() and int(out.split()[-1]) >= held:
                break
            if time.monotonic() - started > 300:
                break
            time.sleep(0.5)
        back = time.monotonic() - started
        kept = int(out.split()[-1]) if out.strip() else 0
    finally:
        cli(name, "destroy")
    figures = dict(re.findall(r"(BUILD_AND_RUN|CACHED_RUN) ([\d.]+)", groqflow))
    print("GroqRack (alcf-2026-mini, SYSTEMS=groq, as a user on groq-r01-gn-01)")
    print(f"  up with the images built: {up:.1f} s")
    print(f"  qsub -> job running: p50 {statistics.median(latencies):.2f} s, "
          f"max {latencies[-1]:.2f} s (n={len(latencies)})")
    print(f"  groqit hello_world.py in a PBS job: build + run "
          f"{float(figures['BUILD_AND_RUN']):.1f} s, cached run "
          f"{float(figures['CACHED_RUN']):.1f} s")
    print(f"  PBS server restart: {kept} of {held} held jobs kept; qstat answered with them "
          f"after {back:.1f} s")


if __name__ == "__main__":
    main()
