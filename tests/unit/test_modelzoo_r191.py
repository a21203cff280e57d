"""Our modelzoo's Release_1.9.1, as the ALCF guide of 2023 shows it (seed 002).

fc_mnist runs through LocalJobRunner with a few steps; the seed's full run (batch
128, 10,000 steps: GlobalRate 26,905.42, 1,280,000 samples in 53.12 s) is checked
on the timing model, without training.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from . import modelzoo_release
from .test_cstorch_trainer import events

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "emulator"
MODELZOO = modelzoo_release.release("Release_1.9.1")
FC_MNIST = MODELZOO / "modelzoo" / "fc_mnist" / "pytorch"
STAMP = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO:   "
CSX_LINE = re.compile(STAMP + r"\| Train Device=xla:0, Step=(\d+), Loss=(\d+\.\d{5}), "
                      r"Rate=(\d+\.\d\d) samples/sec, GlobalRate=(\d+\.\d\d) samples/sec$")
CPU_LINE = re.compile(STAMP + r"\| Train Device=cpu, Step=(\d+), Loss=(\d+\.\d{5}), "
                      r"Time=\d\d:\d\d:\d\d$")
COMPLETE = re.compile(STAMP + r"Training Complete\. Completed (\d+) sample\(s\) in "
                      r"(\d+\.\d+) seconds\.$")
# The seed's fc_mnist run on one CS-2.
SEED_STEPS, SEED_SAMPLES = 10_000, 1_280_000
SEED_GLOBAL_RATE, SEED_SECONDS = 26_905.42, 53.11996841430664


def write_params(tmp_path, data_dir) -> Path:
    params = yaml.safe_load((FC_MNIST / "configs" / "params.yaml").read_text())
    params["train_input"]["data_dir"] = params["eval_input"]["data_dir"] = str(data_dir)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def run_py(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEREBRAS_")}
    env.update(PYTHONPATH=str(EMULATOR), OMP_NUM_THREADS="1",
               CEREBRAS_APPLIANCE_RUNNER="cerebras_pytorch.appliance.local:LocalJobRunner")
    return subprocess.run([sys.executable, str(FC_MNIST / "run.py"), *map(str, args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_csx_run_prints_the_r19_lines_and_model_dir(tmp_path, mnist_dir):
    params = write_params(tmp_path, mnist_dir)
    model_dir = tmp_path / "model_dir"
    result = run_py(tmp_path, "CSX", "--job_labels", "name=pt_smoketest", "--params", params,
                    "--num_csx=1", "--mode", "train", "--model_dir", model_dir,
                    "--mount_dirs", tmp_path, mnist_dir, MODELZOO, "--python_paths", MODELZOO,
                    "--compile_dir", "/me", "--max_steps", 100)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    lines = out.splitlines()
    trains = [m.groups() for line in lines if (m := CSX_LINE.match(line))]
    assert [int(step) for step, *_ in trains] == [50, 100]
    assert float(trains[-1][2]) == pytest.approx(141_449.72, rel=0.15)  # steady ~0.9 ms a step
    tail = [line.split("INFO:   ", 1)[1] for line in lines[-5:]]
    assert tail[:3] == ["Saving checkpoint at global step 100",
                        "Saving step 100 in dataloader checkpoint",
                        "Saved checkpoint at global step: 100"]
    assert COMPLETE.match(lines[-2]) and COMPLETE.match(lines[-2]).group(1) == "12800"
    assert tail[4] == "Monitoring returned"
    assert "Checkpoint autoloading" not in out and "Compile was successful!" in out
    assert (model_dir / "checkpoint_100.mdl").is_file()
    assert (model_dir / "cerebras_logs").is_dir()
    # The CSX run's summaries come back with the job's files: the loss at steps 50 and 100.
    (event_file,) = (model_dir / "train").glob("events.out.tfevents.*")
    assert [b"loss" in r for r in events(event_file)] == [False, True, True]
    saved = yaml.safe_load((model_dir / "train" / "params_train.yaml").read_text())
    assert saved["runconfig"]["max_steps"] == 100 and saved["train_input"]["batch_size"] == 128
    logs = [p.name for p in model_dir.iterdir() if re.fullmatch(r"run_\d{8}_\d{6}\.log", p.name)]
    assert len(logs) == 1 and "Monitoring returned" in (model_dir / logs[0]).read_text()
    performance = yaml.safe_load((model_dir / "performance" / "performance.json").read_text())
    assert performance["total_samples"] == 12800
    assert performance["total_time"] == pytest.approx(float(COMPLETE.match(lines[-2]).group(2)))
    state = torch.load(model_dir / "checkpoint_100.mdl")
    assert state["global_step"] == 100 and "model" in state and "optimizer" in state


def test_cpu_line_and_the_mz1_command_line(tmp_path, mnist_dir):
    params = write_params(tmp_path, mnist_dir)
    result = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "-o", tmp_path / "md",
                    "--max_steps", 100)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = [int(m.group(1)) for line in result.stdout.splitlines()
             if (m := CPU_LINE.match(line))]
    assert steps == [50, 100]
    assert "Training Complete. Completed 12800 sample(s) in " in result.stdout
    assert "Monitoring returned" not in result.stdout
    pretrained = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "-o", tmp_path / "md2",
                        "--checkpoint_path", tmp_path / "md" / "checkpoint_100.mdl",
                        "--is_pretrained_checkpoint", "--max_steps", 50)
    assert pretrained.returncode == 0, pretrained.stdout + pretrained.stderr
    assert "| Train Device=cpu, Step=50, " in pretrained.stdout  # counted from step 0 again
    rejected = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "--load_checkpoint_states",
                      "model")
    assert rejected.returncode == 2 and "unrecognized arguments" in rejected.stderr


def test_the_seeds_full_run_on_the_timing_model():
    """1.9.1's fc_mnist config on one CS-2: the seed's GlobalRate and run time."""
    from aitestbed.cerebras import cs2
    from aitestbed.cerebras import timing as cs2_timing

    params = yaml.safe_load((FC_MNIST / "configs" / "params.yaml").read_text())
    batch, steps = params["train_input"]["batch_size"], params["runconfig"]["max_steps"]
    assert (batch, steps) == (128, SEED_STEPS)
    sys.path.insert(0, str(MODELZOO))
    try:
        from modelzoo.fc_mnist.pytorch.model import MNISTModel
    finally:
        sys.path.remove(str(MODELZOO))
        for module in [m for m in sys.modules if m == "modelzoo" or m.startswith("modelzoo.")]:
            del sys.modules[module]
    workload = cs2.Workload(batch_size=batch, **MNISTModel.aitestbed_workload(params))
    seconds = sum(cs2_timing.step_seconds(workload, s) for s in range(1, steps + 1))
    assert batch * steps == SEED_SAMPLES
    assert SEED_SAMPLES / seconds == pytest.approx(SEED_GLOBAL_RATE, rel=0.002)
    total = seconds + cs2_timing.checkpoint_seconds(workload)
    assert total == pytest.approx(SEED_SECONDS, rel=0.002)


@pytest.mark.parametrize(("text", "message"), [
    ("", "has no 'model' section: a train run reads model and train_input."),
    ("model: {}\n", "has no 'train_input' section: a train run reads model and train_input."),
])
def test_missing_sections_are_named_before_any_job_is_submitted(tmp_path, text, message):
    """C74/C75 in R1.9's words (it has no schema): before any compile job."""
    params = tmp_path / "partial.yaml"
    params.write_text(text)
    result = run_py(tmp_path, "CSX", "-p", params, "-m", "train", "--mount_dirs", tmp_path,
                    "--python_paths", MODELZOO)
    assert result.returncode == 1
    assert result.stderr.strip() == f"ERROR: Params file {str(params)!r} {message}"
    assert "Appliance" not in result.stdout
