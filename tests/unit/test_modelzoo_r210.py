"""Our modelzoo's Release_2.10.0 as the current ALCF docs run it: `cszoo fit <yaml> ...`.

The tree comes from the mirror the role builds (its own layout, no all_releases
layer); cszoo runs from its src/ (what `pip install -e modelzoo` puts on the path).
CSX runs go through LocalJobRunner on emulated CS-3 systems.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aitestbed.datasets import cerebras_samples

from . import modelzoo_release

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MODELZOO = modelzoo_release.release("Release_2.10.0")
GPT3 = MODELZOO / "src" / "cerebras" / "modelzoo" / "models" / "nlp" / "gpt3"
STAMP = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO:   "
TRAIN = re.compile(STAMP + r"\| Train Device=CSX, Step=(\d+), Loss=(\d+\.\d{5}), "
                   r"Rate=(\d+\.\d\d) samples/sec, GlobalRate=(\d+\.\d\d) samples/sec, "
                   r"LoopTimeRemaining=\d+:\d\d:\d\d, TimeRemaining=\d+:\d\d:\d\d$")
EVAL = re.compile(STAMP + r"\| Eval Device=CSX, GlobalStep=(\d+), Batch=(\d+), "
                  r"Loss=(\d+\.\d{5}), Rate=(\d+\.\d\d) samples/sec, "
                  r"GlobalRate=(\d+\.\d\d) samples/sec, LoopTimeRemaining=\d+:\d\d:\d\d, "
                  r"TimeRemaining=\d+:\d\d:\d\d$")


@pytest.fixture(scope="module")
def owt(tmp_path_factory):
    """The sample dataset and the docs' 111m_modified.yaml, as /software holds them."""
    out = tmp_path_factory.mktemp("dataset")
    cerebras_samples.build(out, prefix=str(out))
    return out / "OWT" / "Pytorch"


def cszoo(cwd, *args, system="CS-3"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEREBRAS_")}
    env.update(PYTHONPATH=os.pathsep.join([str(MODELZOO / "src"), str(ROOT / "emulator")]),
               OMP_NUM_THREADS="1", AITESTBED_CEREBRAS_SYSTEM=system,
               CEREBRAS_APPLIANCE_RUNNER="cerebras_pytorch.appliance.local:LocalJobRunner")
    return subprocess.run([sys.executable, "-m", "cerebras.modelzoo.cli.main", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_release_is_installable_and_has_the_documented_layout():
    setup = (MODELZOO / "setup.py").read_text()
    assert 'cszoo = cerebras.modelzoo.cli.main:main' in setup
    assert "cerebras_pytorch==" in setup and not (MODELZOO / "modelzoo").exists()
    assert (GPT3 / "configs" / "Cerebras_GPT" / "111m.yaml").is_file()
    assert not (MODELZOO / "STANDALONE").exists()


@pytest.mark.slow("the docs' GPT-3 run with its restart and validation (about 85 s)")
def test_the_docs_gpt3_run_restart_and_validate(tmp_path, owt):
    """running-a-model-or-program.md: cp the yaml, cszoo fit, then the checkpoint restart."""
    config = tmp_path / "111m_modified.yaml"
    config.write_text((owt / "111m_modified.yaml").read_text())
    fit = cszoo(tmp_path, "fit", config, "--job_labels", "name=gpt3_111m",
                "--model_dir", "model_dir_gpt3_111m")
    out = fit.stdout
    assert fit.returncode == 0, out + fit.stderr
    train = [TRAIN.match(line).groups() for line in out.splitlines() if TRAIN.match(line)]
    assert [int(step) for step, *_ in train] == list(range(20, 401, 20))
    assert float(train[-1][1]) < float(train[0][1]) - 0.5  # it really learns
    evals = [EVAL.match(line).groups() for line in out.splitlines() if EVAL.match(line)]
    assert [(g, b) for g, b, *_ in evals] == [("400", str(b)) for b in range(20, 101, 20)]
    assert all(1160 < float(rate) < 1180 for *_, rate in evals)  # the docs' ~1,170/s on a CS-3
    for line in ("Saving checkpoint at step 400",
                 "Saved checkpoint model_dir_gpt3_111m/checkpoint_400.mdl",
                 "Evaluation metrics:", "  - eval/lm_perplexity = ", "  - eval/accuracy = ",
                 "Evaluation completed successfully!", "Training completed successfully!"):
        assert line in out
    processed = re.search(r"Processed 48000 training sample\(s\) in ([\d.]+) seconds\.", out)
    assert processed and abs(float(processed.group(1)) - 820.6) < 5  # the docs' 820.58 s
    assert (tmp_path / "model_dir_gpt3_111m" / "checkpoint_400.mdl").is_file()

    params = yaml.safe_load(config.read_text())
    params["trainer"]["init"]["loop"]["max_steps"] = 440  # the docs' 800 runs on the cluster
    config.write_text(yaml.safe_dump(params))
    again = cszoo(tmp_path, "fit", "--checkpoint_path=model_dir_gpt3_111m/checkpoint_400.mdl",
                  config, "--job_labels", "name=gpt3_111m", "--model_dir", "model_dir_gpt3_111m")
    assert again.returncode == 0, again.stdout + again.stderr
    steps = [int(TRAIN.match(line).group(1)) for line in again.stdout.splitlines()
             if TRAIN.match(line)]
    assert steps == [420, 440]
    assert "Loading weights from checkpoint" in again.stdout
    assert (tmp_path / "model_dir_gpt3_111m" / "checkpoint_440.mdl").is_file()

    check = cszoo(tmp_path, "validate", config, "--checkpoint_path",
                  "model_dir_gpt3_111m/checkpoint_440.mdl", "--model_dir", "model_dir_gpt3_111m")
    assert check.returncode == 0 and "Evaluation completed successfully!" in check.stdout


@pytest.mark.slow("two CS-3 systems data parallel (scale, about 35 s)")
def test_two_cs3_systems_run_data_parallel(tmp_path, owt):
    config = tmp_path / "c.yaml"
    params = yaml.safe_load((owt / "111m_modified.yaml").read_text())
    params["trainer"]["init"]["loop"].update(max_steps=40, eval_frequency=40, eval_steps=20)
    config.write_text(yaml.safe_dump(params))
    one = cszoo(tmp_path, "fit", config, "--model_dir", "one")
    two = cszoo(tmp_path, "fit", config, "--model_dir", "two", "--num_csx=2")
    assert one.returncode == 0 and two.returncode == 0, two.stdout + two.stderr
    assert "Preparing to execute using 2 CSX" in two.stdout

    def rate(out):
        return float([TRAIN.match(line).group(3) for line in out.splitlines()
                      if TRAIN.match(line)][-1])
    assert rate(two.stdout) > 1.8 * rate(one.stdout)


def test_bad_input_gets_a_message_not_a_traceback(tmp_path, owt):
    missing = cszoo(tmp_path, "fit", "nope.yaml")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    params = yaml.safe_load((owt / "111m_modified.yaml").read_text())
    params["trainer"]["init"]["loop"]["max_step"] = params["trainer"]["init"]["loop"].pop(
        "max_steps")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(params))
    result = cszoo(tmp_path, "fit", bad)
    assert result.returncode == 1
    assert "trainer.init.loop.max_step: Extra inputs are not permitted" in result.stderr
    zero = cszoo(tmp_path, "fit", owt / "111m_modified.yaml", "--num_csx", "0")
    assert zero.returncode == 1 and "--num_csx must be at least 1" in zero.stderr
    unknown = cszoo(tmp_path, "fit", owt / "111m_modified.yaml", "--bogus")
    assert unknown.returncode == 2 and "unrecognized arguments: --bogus" in unknown.stderr
    for each in (missing, result, zero, unknown):
        assert "Traceback" not in each.stderr


def test_job_time_sec_priority_and_the_automatic_mounts_reach_the_request(tmp_path, owt,
                                                                           monkeypatch):
    """The usage guidelines' `job_time_sec` (cluster_config) and --job_priority go with the
    job; cszoo mounts the modelzoo, the data and the checkpoint's directory itself."""
    monkeypatch.syspath_prepend(str(MODELZOO / "src"))
    from cerebras.modelzoo.cli.main import parser
    from cerebras.modelzoo.common import run_utils
    from cerebras.modelzoo.trainer import config as trainer_config

    params = yaml.safe_load((owt / "111m_modified.yaml").read_text())
    params["trainer"]["init"]["backend"]["cluster_config"] = {"job_time_sec": 3600,
                                                              "num_csx": 2}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(params))
    args = parser().parse_args(["fit", str(path), "--job_priority", "p1", "--checkpoint_path",
                                str(tmp_path / "ck" / "checkpoint_400.mdl")])
    flow_params = trainer_config.to_params(trainer_config.load(str(path)), args)
    cs_config = run_utils.cs_config(args, flow_params)
    assert (cs_config.job_time_sec, cs_config.num_csx, cs_config.job_priority) == (3600, 2, "p1")
    assert run_utils.SRC in cs_config.python_paths and run_utils.SRC in cs_config.mount_dirs
    assert str(owt / "train_msl2048") in cs_config.mount_dirs
    assert str(tmp_path / "ck") in cs_config.mount_dirs
    args = parser().parse_args(["fit", str(path), "--num_csx", "1"])
    assert trainer_config.to_params(trainer_config.load(str(path)), args)["runconfig"][
        "num_csx"] == 1  # the command line over the YAML
