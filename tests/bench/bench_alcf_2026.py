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

from aitestbed.host.driver import Driver
from bench_cerebras import CSCTL, FILL
from benchlib import cli, step

SETUP = """set -e
mkdir -p ~/R_2.10.0 && cd ~/R_2.10.0 && rm -rf modelzoo venv_cerebras_pt
git clone -q https://github.com/Cerebras/modelzoo.git && git -C modelzoo checkout -q Release_2.10.0
/usr/bin/python3.11 -m venv venv_cerebras_pt
. venv_cerebras_pt/bin/activate && pip install -q -e modelzoo
"""
RUN = """set -e
. ~/R_2.10.0/venv_cerebras_pt/bin/activate
cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/nlp/gpt3
cp /software/cerebras/dataset/OWT/Pytorch/111m_modified.yaml configs/Cerebras_GPT/
rm -rf model_dir_gpt3_111m
start=$(date +%s.%N)
cszoo fit configs/Cerebras_GPT/111m_modified.yaml --job_labels name=gpt3_111m \
    --model_dir model_dir_gpt3_111m > run.log 2>&1
echo "WALL $(python3 -c "import time; print(time.time() - $start)")"
grep -E 'Step=400,|Batch=100,|Processed' run.log
"""

# example-programs.md: (directory under models/, YAML under /software/cerebras/dataset)
EXAMPLES = (("nlp/bert", "bert_large/bert_large_MSL128_sampleds.yaml"),
            ("nlp/gptj", "gptj/params_gptj_6B_sampleds.yaml"),
            ("nlp/llama", "params_llama2_7b.yaml"),
            ("nlp/esm2", "ESM-2/params_esm2_t12_35M_UR50D_modified.yaml"),
            ("vision/vision_transformer",
             "vision_transformer/params_vit_base_patch_16_imagenet_1k.yaml"),
            ("vision/dit", "params_dit_2B_patchsize_2x2_modified.yaml"))
EXAMPLE = """set -e
. ~/R_2.10.0/venv_cerebras_pt/bin/activate
cd ~/R_2.10.0/modelzoo/src/cerebras/modelzoo/models/{directory}
cp /software/cerebras/dataset/{source} configs/
rm -rf model_dir
start=$(date +%s.%N)
cszoo fit configs/{name} --job_labels name=bench --model_dir model_dir > run.log 2>&1
echo "WALL $(python3 -c "import time; print(time.time() - $start)")"
grep -E 'Train Device' run.log | tail -1 | grep -oE 'Step=[0-9]+|GlobalRate=[0-9.]+'
grep -oE 'Processed [0-9]+ training sample.*' run.log
"""


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
        examples = [(directory, on_usernode(name, EXAMPLE.format(
            directory=directory, source=source, name=source.rsplit("/", 1)[-1])))
            for directory, source in EXAMPLES]
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
