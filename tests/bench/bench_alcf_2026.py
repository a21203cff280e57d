"""Figures of the alcf-2026 profile (printed, gating nothing): `make bench`.

On an alcf-2026-mini cluster of its own (Cerebras only), as a user on the user node
cer-usn-01 (reached from cer-login-04):
  - `up` of the profile with its images built (warm);
  - the docs' GPT-3 111M run (`cszoo fit`, Release 2.10.0) at the default time scale:
    wall time and the printed rates (the docs' sample: 48000 samples in 820.58 s);
  - each of the docs' example programs (BERT, GPT-J, Llama-2, ESM-2, ViT, DiT): wall
    time, the last printed rate and the total;
  - `csctl get jobs -a` with 100 jobs in the API (target p50 <= 0.3 s).
"""

from __future__ import annotations

import re
import statistics
import time
import uuid

from aitestbed.cerebras import guide as cs_guide
from aitestbed.host.driver import Driver
from aitestbed.node import guide
from bench_cerebras import CSCTL, FILL
from benchlib import cli, step

# The docs' set-up (customizing-environment.md), from scratch and quiet: without the proxy,
# the tags' list, the deactivate and pip's upgrade.
SETUP = "\n".join((
    "set -e",
    f"mkdir -p {cs_guide.CS3_DIR} && cd {cs_guide.CS3_DIR} && "
    f"rm -rf modelzoo {cs_guide.CS3_VENV_NAME}",
    f"{guide.quietly(cs_guide.CS_CLONE)} && git -C modelzoo checkout -q {cs_guide.CS3_TAG}",
    cs_guide.CS3_MAKE_VENV,
    f". {cs_guide.CS3_VENV_NAME}/bin/activate && {guide.quietly(cs_guide.CS3_INSTALL)}", ""))


def timed_fit(model: cs_guide.Cs3Model, label: str, model_dir: str, *report: str) -> str:
    """The docs' steps for a model (running-a-model-or-program.md, example-programs.md),
    `cszoo fit` timed with its log in run.log; then the `report` lines."""
    return "\n".join((
        "set -e",
        f". {cs_guide.CS3_VENV}/bin/activate",
        f"cd {model.path}",
        f"cp {cs_guide.CS3_DATASET}/{model.source} {model.yaml.rsplit('/', 1)[0]}/",
        f"rm -rf {model_dir}",
        "start=$(date +%s.%N)",
        f"{cs_guide.cszoo_fit(model, model_dir, label)} > run.log 2>&1",
        'echo "WALL $(python3 -c "import time; print(time.time() - $start)")"',
        *report, ""))


RUN = timed_fit(cs_guide.GPT3, cs_guide.GPT3.label, cs_guide.GPT3.model_dir,
                "grep -E 'Step=400,|Batch=100,|Processed' run.log")


def example(model: cs_guide.Cs3Model) -> str:
    """One of example-programs.md's models (its folder under models/ and YAML from the
    table), labelled bench: the last printed rate and the total."""
    return timed_fit(model, "bench", "model_dir",
                     "grep -E 'Train Device' run.log | tail -1 | "
                     "grep -oE 'Step=[0-9]+|GlobalRate=[0-9.]+'",
                     "grep -oE 'Processed [0-9]+ training sample.*' run.log")


# The filler jobs have no client: the scheduler cancels them within its heartbeat limit.
# csctl is timed once they have ended (the API no longer busy with them).
SETTLE = """TIMEFORMAT=%R
for i in $(seq 120); do
    csctl get jobs | grep -qE ' (QUEUEING|SCHEDULED|RUNNING) ' || break; sleep 1
done
"""


def on_usernode(name: str, script: str, shell: str = "bash") -> str:
    result = Driver(name).ssh("cer-login-04", f"ssh -o BatchMode=yes cer-usn-01 {shell} -s",
                              input=script)
    return step(result, script).stdout


def main() -> None:
    name = f"bench-26-{uuid.uuid4().hex[:6]}"
    start = time.monotonic()
    cli(name, "up", "--profile", "alcf-2026-mini", "--systems", "cerebras")
    up = time.monotonic() - start
    cli(name, "login")
    try:
        on_usernode(name, SETUP)
        run = on_usernode(name, RUN)
        examples = [(model.directory, on_usernode(name, example(model)))
                    for model in cs_guide.CS3_EXAMPLES]
        jobs = on_usernode(name, FILL, "python3").strip()
        on_usernode(name, SETTLE)
        csctl = sorted(float(x) for x in on_usernode(name, CSCTL).split())
    finally:
        cli(name, "destroy")
    wall = float(re.search(r"WALL ([\d.]+)", run).group(1))
    print("alcf-2026 (alcf-2026-mini, Cerebras only, as a user on cer-usn-01)")
    print(f"  up with the images built: {up:.1f} s")
    print(f"  GPT-3 111M cszoo fit (Release 2.10.0), default time scale: wall {wall:.1f} s")
    for line in run.splitlines()[1:]:
        print(f"    {line.strip()}")
    for directory, out in examples:
        wall_example = float(re.search(r"WALL ([\d.]+)", out).group(1))
        figures = " ".join(line.strip() for line in out.splitlines()[1:])
        print(f"  {directory}: wall {wall_example:.1f} s; {figures}")
    print(f"  csctl get jobs -a with {jobs} jobs: p50 {statistics.median(csctl):.3f} s, "
          f"max {csctl[-1]:.3f} s (n={len(csctl)}, target p50 <= 0.3 s)")


if __name__ == "__main__":
    main()
