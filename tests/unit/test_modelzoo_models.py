"""Our modelzoo's BERT, GPT-J and UNet (Release_2.1.1) on the guide's sample datasets.

The datasets come from aitestbed.datasets.cerebras_samples, built in a temporary
directory (their params files' data paths point there). CPU runs train the reduced
models for real; CSX runs go through LocalJobRunner and print device time of the
full-size models.
"""

import contextlib
import filecmp
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from . import modelzoo_release

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "emulator"
MODELZOO = modelzoo_release.release("Release_2.1.1")
TRAIN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO:   \| Train Device=(\w+), "
                        r"Step=(\d+), Loss=(\d+\.\d{5}), Rate=(\d+\.\d\d) samples/sec, "
                        r"GlobalRate=(\d+\.\d\d) samples/sec$")
# name: (model directory, dataset directory, params file, --num_csx of the guide)
MODELS = {
    "bert": ("transformers/pytorch/bert", "bert_large", "bert_large_MSL128_sampleds.yaml", 1),
    "gptj": ("transformers/pytorch/gptj", "gptj", "params_gptj_6B_sampleds.yaml", 2),
    "unet": ("vision/pytorch/unet", "severstal-steel-defect-detection",
             "params_severstal_binary_rawds.yaml", 1),
}
MODEL_CLASSES = {"bert": "BertPretrainModel", "gptj": "GptjModel", "unet": "UNetModel"}


@pytest.fixture(scope="session")
def samples(tmp_path_factory):
    """The sample datasets, their params files pointing into this directory."""
    from aitestbed.datasets import cerebras_samples

    root = tmp_path_factory.mktemp("dataset")
    cerebras_samples.build(root, prefix=str(root))
    return root


def write_params(tmp_path, samples, name, **runconfig) -> Path:
    _, dataset, params_file, _ = MODELS[name]
    params = yaml.safe_load((samples / dataset / params_file).read_text())
    params["runconfig"].update(runconfig)
    path = tmp_path / params_file
    path.write_text(yaml.safe_dump(params))
    return path


def run_py(tmp_path, name, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEREBRAS_")}
    env.update(PYTHONPATH=str(EMULATOR), OMP_NUM_THREADS="1",
               CEREBRAS_APPLIANCE_RUNNER="cerebras_pytorch.appliance.local:LocalJobRunner")
    run = MODELZOO / "modelzoo" / MODELS[name][0] / "run.py"
    return subprocess.run([sys.executable, str(run), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)


@contextlib.contextmanager
def modelzoo_on_path(root: Path):
    """Import a release's modelzoo here (and forget it after: the releases share names)."""
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))
        for module in [m for m in sys.modules if m == "modelzoo" or m.startswith("modelzoo.")]:
            del sys.modules[module]


def nominal_workload(root: Path, name: str, params: dict):
    """The workload the emulated wafer compiles for the model at these params."""
    from aitestbed.cerebras import cs2

    with modelzoo_on_path(root):
        module = importlib.import_module(f"modelzoo.{MODELS[name][0].replace('/', '.')}.model")
        model = getattr(module, MODEL_CLASSES[name])
        return cs2.Workload(batch_size=params["train_input"]["batch_size"],
                            **model.aitestbed_workload(params))


def train_lines(output):
    return [m.groups() for line in output.splitlines() if (m := TRAIN_LINE.match(line))]


def test_sample_datasets_are_reproducible_and_point_at_software(tmp_path, samples):
    from aitestbed.datasets import cerebras_samples

    cerebras_samples.main(["--out", str(tmp_path / "dataset")])
    for name, (_, dataset, params_file, _) in MODELS.items():
        built, ours = tmp_path / "dataset" / dataset, samples / dataset
        files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
        assert (Path(".aitestbed-complete") in files and Path("README.md") in files
                and Path(params_file) in files), name
        assert "SYNTHETIC" in (built / "README.md").read_text()
        same = [str(f) for f in files if f.name not in (params_file, ".aitestbed-complete")]
        match, mismatch, errors = filecmp.cmpfiles(built, ours, same, shallow=False)
        assert not mismatch and not errors, (name, mismatch, errors)
        text = (built / params_file).read_text()
        assert text == (ours / params_file).read_text().replace(
            str(samples), cerebras_samples.PREFIX)
        params = yaml.safe_load(text)
        assert params["train_input"]["data_dir"].startswith(f"/software/cerebras/dataset/{dataset}")
        # The modelzoo ships the same params file (in both releases), with relative data paths.
        shipped = yaml.safe_load(
            (MODELZOO / "modelzoo" / MODELS[name][0] / "configs" / params_file).read_text())
        for section in ("train_input", "eval_input"):
            for key in ("data_dir", "vocab_file"):
                if key in params[section]:
                    assert not shipped[section][key].startswith("/")
                    shipped[section][key] = params[section][key]
        assert shipped == params, name


def test_full_size_models_reproduce_the_guides_rates():
    """The nominal workloads at the guide's configs give its documented global rates."""
    from aitestbed.cerebras import timing as cs2_timing

    for name, documented in (("bert", 6493.27), ("gptj", 33.98)):  # seed 002, final GlobalRate
        path = MODELZOO / "modelzoo" / MODELS[name][0] / "configs" / MODELS[name][2]
        params = yaml.safe_load(path.read_text())
        workload = nominal_workload(MODELZOO, name, params)
        steps = params["runconfig"]["max_steps"]
        seconds = sum(cs2_timing.step_seconds(workload, s, MODELS[name][3])
                      for s in range(1, steps + 1))
        assert steps * workload.batch_size / seconds == pytest.approx(documented, rel=0.01)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_cpu_training_really_trains(tmp_path, samples, name):
    params = write_params(tmp_path, samples, name, log_steps=1)
    result = run_py(tmp_path, name, "CPU", "-p", params, "-m", "train", "-o", tmp_path / "md",
                    "--max_steps", 40)
    assert result.returncode == 0, result.stdout + result.stderr
    losses = [float(line.split("Loss=")[1].split(",")[0]) for line in result.stdout.splitlines()
              if "| Train Device=CPU, Step=" in line]
    assert len(losses) == 40
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert last < 0.9 * first, losses
    assert "Processed 160 sample(s) in " in result.stdout  # the reduced batch: 4 a step
    assert (tmp_path / "md" / "checkpoint_40.mdl").is_file()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_csx_run_as_in_the_guide(tmp_path, samples, name):
    from aitestbed.cerebras import timing as cs2_timing

    num_csx = MODELS[name][3]
    params = write_params(tmp_path, samples, name, log_steps=10)
    model_dir = tmp_path / "model_dir"
    result = run_py(tmp_path, name, "CSX", "--job_labels", f"name={name}_pt", "--params",
                    params, f"--num_csx={num_csx}", "--mode", "train", "--model_dir", model_dir,
                    "--mount_dirs", tmp_path, samples, MODELZOO, "--python_paths", MODELZOO,
                    "--compile_dir", "me", "--max_steps", 20)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    batch = yaml.safe_load(params.read_text())["train_input"]["batch_size"]
    order = ["Compiling the model. This may take a few minutes.", "Compile was successful!",
             f"No checkpoints were found in \"{model_dir}\".",
             f"Preparing to execute using {num_csx} CSX", "Beginning appliance run",
             "| Train Device=CSX, Step=10,", "| Train Device=CSX, Step=20,",
             "Saving checkpoint at step 20", f"Saved checkpoint {model_dir}/checkpoint_20.mdl",
             "Training completed successfully!", f"Processed {20 * batch} sample(s) in "]
    positions = [out.find(text) for text in order]
    assert -1 not in positions and positions == sorted(positions), \
        list(zip(order, positions, strict=True))
    compiled = nominal_workload(MODELZOO, name, yaml.safe_load(params.read_text()))
    device_seconds = sum(cs2_timing.step_seconds(compiled, s, num_csx) for s in range(1, 21))
    assert float(train_lines(out)[-1][4]) == pytest.approx(20 * batch / device_seconds,
                                                           rel=0.001)
