"""Our modelzoo's fc_mnist (Release_2.1.1) run as users run it: python run.py ...

CSX runs go through LocalJobRunner (appliance jobs as local worker subprocesses).
MNIST is built from the pinned source tarball (build/downloads), once per session.
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
MODELZOO = modelzoo_release.release("Release_2.1.1")
FC_MNIST = MODELZOO / "modelzoo" / "fc_mnist" / "pytorch"
TRAIN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO:   \| Train Device=(\w+), "
                        r"Step=(\d+), Loss=(\d+\.\d{5}), Rate=(\d+\.\d\d) samples/sec, "
                        r"GlobalRate=(\d+\.\d\d) samples/sec$")


def write_params(tmp_path, data_dir, **changes) -> Path:
    params = yaml.safe_load((FC_MNIST / "configs" / "params.yaml").read_text())
    params["train_input"]["data_dir"] = params["eval_input"]["data_dir"] = str(data_dir)
    for section, values in changes.items():
        params[section].update(values)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def run_py(tmp_path, *args, runner="cerebras_pytorch.appliance.local:LocalJobRunner"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEREBRAS_")}
    env.update(PYTHONPATH=str(EMULATOR), OMP_NUM_THREADS="1",
               CEREBRAS_APPLIANCE_RUNNER=runner)
    return subprocess.run([sys.executable, str(FC_MNIST / "run.py"), *map(str, args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def train_lines(output):
    return [TRAIN_LINE.match(line).groups() for line in output.splitlines()
            if TRAIN_LINE.match(line)]


def test_cpu_training_really_trains(tmp_path, mnist_dir):
    params = write_params(tmp_path, mnist_dir, train_input={"batch_size": 32},
                          optimizer={"learning_rate": 0.05}, model={"depth": 2})
    result = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "-o", tmp_path / "md",
                    "--max_steps", 300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = train_lines(result.stdout)
    assert [int(step) for _, step, *_ in lines] == [50, 100, 150, 200, 250, 300]
    assert all(device == "CPU" for device, *_ in lines)
    assert float(lines[-1][2]) < 1.2  # an untrained model's loss is ln(10) = 2.30
    assert "Processed 9600 sample(s) in " in result.stdout
    state = torch.load(tmp_path / "md" / "checkpoint_300.mdl")
    assert set(state) == {"model", "optimizer", "lr_scheduler", "grad_scaler", "dataloader",
                          "global_step", "__metadata__"}
    assert state["global_step"] == 300
    # TensorBoard's event files in <model_dir>/train: the file version, then the loss and
    # the two rates at each of the six logged steps.
    (event_file,) = (tmp_path / "md" / "train").glob("events.out.tfevents.*")
    records = events(event_file)
    assert len(records) == 1 + 6 * 3
    assert sum(b"loss" in r for r in records) == 6
    assert sum(b"avg_samples_per_sec" in r for r in records) == 6
    again = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "-o", tmp_path / "md",
                   "--max_steps", 300)
    assert again.returncode == 1
    assert "Global step 300 already exceeds max step 300." in again.stdout
    evaluated = run_py(tmp_path, "CPU", "-p", params, "-m", "eval", "-o", tmp_path / "md",
                       "--eval_steps", 20)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "| Eval Device=CPU, Step=20, Loss=" in evaluated.stdout
    assert "Avg Eval Loss: " in evaluated.stdout
    assert "Evaluation completed successfully!" in evaluated.stdout


def test_csx_run_end_to_end(tmp_path, mnist_dir):
    from aitestbed.cerebras import cs2
    from aitestbed.cerebras import timing as cs2_timing

    params = write_params(tmp_path, mnist_dir, train_input={"batch_size": 128})
    model_dir = tmp_path / "model_dir"
    result = run_py(tmp_path, "CSX", "--job_labels", "name=pt_smoketest", "--params", params,
                    "--num_csx=1", "--mode", "train", "--model_dir", model_dir,
                    "--mount_dirs", tmp_path, mnist_dir, MODELZOO, "--python_paths", MODELZOO,
                    "--compile_dir", "/me", "--max_steps", 100)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    order = ["Compiling the model. This may take a few minutes.",
             "Pre-optimization transforms...", "Compiling final image",
             "Compile artifacts successfully written to remote compile directory. "
             "Compile hash is: cs_", "Compile was successful!",
             "Programming Cerebras Wafer Scale Cluster for execution.",
             f"No checkpoints were found in \"{model_dir}\".",
             "Preparing to execute using 1 CSX", "Finished sending initial weights",
             "Using network type: ROCE", "Beginning appliance run",
             "| Train Device=CSX, Step=100,", "Saving checkpoint at step 100",
             f"Saved checkpoint {model_dir}/checkpoint_100.mdl",
             "Training completed successfully!", "Processed 12800 sample(s) in "]
    positions = [out.find(text) for text in order]
    assert -1 not in positions and positions == sorted(positions), \
        list(zip(order, positions, strict=True))
    lines = train_lines(out)
    workload = cs2.Workload("fc_mnist", 62_710, 39_250, 50, batch_size=128)
    device_seconds = sum(cs2_timing.step_seconds(workload, s) for s in range(1, 101))
    assert float(lines[-1][4]) == pytest.approx(12_800 / device_seconds, rel=0.001)
    assert float(lines[-1][3]) == pytest.approx(cs2_timing.samples_per_second(workload), rel=0.2)
    assert (model_dir / "checkpoint_100.mdl").is_file() and (model_dir / "train").is_dir()
    latest = model_dir / "cerebras_logs" / "latest"
    assert latest.is_symlink() and "Beginning appliance run" in (latest / "run.log").read_text()


def test_csx_needs_the_modelzoo_on_the_python_paths(tmp_path, mnist_dir):
    params = write_params(tmp_path, mnist_dir)
    result = run_py(tmp_path, "CSX", "-p", params, "-m", "train", "--mount_dirs", tmp_path,
                    mnist_dir, "--max_steps", 10)
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'modelzoo'" in result.stdout
    assert result.stderr.strip().endswith(
        "cerebras_appliance.errors.ApplianceUnknownError: "
        "ModuleNotFoundError: No module named 'modelzoo'")
    assert "Traceback" not in result.stderr


def test_csx_relative_data_dir_is_not_downloaded(tmp_path):
    params = write_params(tmp_path, "./mnist")
    result = run_py(tmp_path, "CSX", "-p", params, "-m", "train", "--mount_dirs", tmp_path,
                    MODELZOO, "--python_paths", MODELZOO, "--max_steps", 10)
    assert result.returncode == 1
    assert "FileNotFoundError" in result.stdout and "No MNIST data in data_dir './mnist'" \
        in result.stdout


def test_compile_only_stops_after_compiling_and_absurd_models_fail(tmp_path, mnist_dir):
    params = write_params(tmp_path, mnist_dir)
    common = ["-p", params, "-m", "train", "--mount_dirs", tmp_path, mnist_dir, MODELZOO,
              "--python_paths", MODELZOO]
    compiled = run_py(tmp_path, "CSX", *common, "--compile_only")
    assert compiled.returncode == 0, compiled.stderr
    assert "Compile was successful!" in compiled.stdout
    assert "Programming Cerebras" not in compiled.stdout
    huge = write_params(tmp_path, mnist_dir, model={"hidden_size": 200_000})
    failed = run_py(tmp_path, "CSX", *common[:1], huge, *common[2:], "--validate_only")
    assert failed.returncode == 1
    assert "ApplianceCompilationError" in failed.stderr
    assert "does not fit on the CS-2 wafer" in failed.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["TPU", "-p", "x.yaml", "-m", "train"], "invalid choice: 'TPU'"),
    (["CPU", "-p", "x.yaml", "-m", "fit"], "invalid choice: 'fit'"),
    (["CSX", "-p", "x.yaml", "-m", "train", "--compile_only", "--validate_only"],
     "not allowed with argument"),
    (["CPU", "-p", "x.yaml", "-m", "train", "--num_csx", "2"], "unrecognized arguments"),
])
def test_bad_command_lines_get_argparse_usage(tmp_path, args, message):
    result = run_py(tmp_path, *args)
    assert result.returncode == 2
    assert "usage:" in result.stderr and message in result.stderr


def test_bad_params(tmp_path):
    missing = run_py(tmp_path, "CPU", "-p", "nope.yaml", "-m", "train")
    assert missing.returncode == 1 and "nope.yaml" in missing.stderr
    assert "Traceback" not in missing.stderr
    params = write_params(tmp_path, tmp_path / "absent",
                          runconfig={"num_csx": 2, "mount_dirs": ["/software"]})
    ignored = run_py(tmp_path, "CPU", "-p", params, "-m", "train", "--max_steps", 5)
    assert ("User specified a CPU run, but the following non-CPU configurations were found in "
            "params file: ['mount_dirs', 'num_csx']. Ignoring these arguments and continuing."
            ) in ignored.stdout
    assert ignored.returncode == 1 and "No MNIST data in data_dir" in ignored.stdout
    assert "Traceback" not in ignored.stderr
    extra = write_params(tmp_path, tmp_path, runconfig={"bogus": 1})
    invalid = run_py(tmp_path, "CPU", "-p", extra, "-m", "train")
    assert invalid.returncode == 1
    assert "Additional properties are not allowed ('bogus' was unexpected)" in invalid.stdout


@pytest.mark.parametrize(("text", "mode", "message"), [
    ("", "train", "'model' is a required property"),
    ("model: {}\n", "train", "'train_input' is a required property"),
    ("model: {}\ntrain_input: {}\n", "eval", "'eval_input' is a required property"),
    ("model: []\ntrain_input: {}\n", "train", "[] is not of type 'object'"),
])
def test_missing_sections_are_named_before_any_job_is_submitted(tmp_path, text, mode, message):
    """C74/C75: an empty params file submitted a compile job, then said KeyError: 'model'."""
    params = tmp_path / "partial.yaml"
    params.write_text(text)
    result = run_py(tmp_path, "CSX", "-p", params, "-m", mode, "--mount_dirs", tmp_path,
                    "--python_paths", MODELZOO)
    assert result.returncode == 1
    assert f"ERROR:   Invalid params file {params}: {message}" in result.stdout
    assert "KeyError" not in result.stdout + result.stderr
    assert "Appliance" not in result.stdout  # nothing was submitted
    assert "Traceback" not in result.stderr
