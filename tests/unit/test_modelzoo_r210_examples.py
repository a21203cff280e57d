"""The current docs' example programs (cerebras/example-programs.md, Release 2.10.0),
each run as the docs have users run it: copy the YAML from the dataset directory into
the model's configs/, then `cszoo fit configs/<yaml> --job_labels name=<label>
--model_dir $MODEL_DIR`, on emulated CS-3 systems (LocalJobRunner).

What each must show is the docs' sample output: its steps, its rates (within a few
per cent), its checkpoints and its total sample count; and the reduced model must
really learn.
"""

import math
import re
import shutil

import pytest
from aitestbed.cerebras import cs2, cs3, timing
from aitestbed.cerebras.cs2 import Workload
from aitestbed.datasets import cerebras_r210

from .test_modelzoo_r210 import EVAL, MODELZOO, STAMP, cszoo

pytestmark = pytest.mark.unit

MODELS = MODELZOO / "src" / "cerebras" / "modelzoo" / "models"
TRAIN = re.compile(STAMP + r"\| Train Device=CSX, Step=(\d+), Loss=(\d+\.\d{5}), "
                   r"Rate=(\d+\.\d\d) samples/sec, GlobalRate=(\d+\.\d\d) samples/sec, "
                   r"LoopTimeRemaining=\d+:\d\d:\d\d, TimeRemaining=\d+:\d\d:\d\d$")

# (dir, yaml under the dataset tree, label, MODEL_DIR, log steps, docs' rate, checkpoints,
#  "Processed N")
EXAMPLES = {
    "bert": ("nlp/bert", "bert_large/bert_large_MSL128_sampleds.yaml", "bert_pt",
             "model_dir_bert_large_pytorch", range(100, 1001, 100), None, [1000], 3720000),
    "gptj": ("nlp/gptj", "gptj/params_gptj_6B_sampleds.yaml", "gptj", "model_dir_gptj",
             range(50, 201, 50), 44.75, [200], 24000),
    "llama": ("nlp/llama", "params_llama2_7b.yaml", "llama2_7b", "model_dir_llama2_7b",
              range(50, 201, 50), 31.98, [200], 204800),
    "esm2": ("nlp/esm2", "ESM-2/params_esm2_t12_35M_UR50D_modified.yaml", "esm2_t12_35m",
             "model_dir_esm2", range(100, 401, 100), 980.0, [200, 400], 819200),
    "vit": ("vision/vision_transformer",
            "vision_transformer/params_vit_base_patch_16_imagenet_1k.yaml", "vision_transformer",
            "model_dir_vit", range(10, 201, 10), 776.0, [100, 200], 570000),
    "dit": ("vision/dit", "params_dit_2B_patchsize_2x2_modified.yaml", "DiT", "model_dir_dit",
            range(20, 401, 20), 870.0, [200, 400], 467200),
}


@pytest.fixture(scope="module")
def software(tmp_path_factory):
    """/software/cerebras/dataset and /software/datasets as a Release 2.10 cluster has them."""
    root = tmp_path_factory.mktemp("software")
    cerebras_r210.build(root / "dataset", root / "datasets", prefix=str(root / "dataset"),
                        datasets_prefix=str(root / "datasets"))
    return root


# One example program on every change; each other one, up to 2 min, in the slow tier.
PRESUBMIT_EXAMPLE = "vit"
SLOW_EXAMPLE = pytest.mark.slow("every example program of the docs beyond one (up to 2 min each)")


@pytest.mark.parametrize("name", [name if name == PRESUBMIT_EXAMPLE else
                                  pytest.param(name, marks=SLOW_EXAMPLE) for name in EXAMPLES])
def test_the_docs_example_program(name, software, tmp_path):
    directory, source, label, model_dir, steps, rate, checkpoints, samples = EXAMPLES[name]
    work = tmp_path / directory
    shutil.copytree(MODELS / directory, work)
    config = work / "configs" / source.rsplit("/", 1)[-1]
    shutil.copy(software / "dataset" / source, config)
    result = cszoo(work, "fit", f"configs/{config.name}", "--job_labels", f"name={label}",
                   "--model_dir", model_dir)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    train = [TRAIN.match(line).groups() for line in out.splitlines() if TRAIN.match(line)]
    assert [int(step) for step, *_ in train] == list(steps)
    losses = [float(loss) for _, loss, *_ in train]
    assert min(losses[-3:]) < losses[0] - 0.05, losses  # it really learns
    if rate:  # the global rate until the first checkpoint, which it then counts
        assert all(abs(float(r) / rate - 1) < 0.05 for step, *_, r in train[1:]
                   if int(step) <= checkpoints[0]), train
    for step in checkpoints:
        assert f"Saving checkpoint at step {step}" in out
        assert f"Saved checkpoint {model_dir}/checkpoint_{step}.mdl" in out
        assert (work / model_dir / f"checkpoint_{step}.mdl").is_file()
    assert "Training completed successfully!" in out
    processed = re.search(rf"Processed {samples} training sample\(s\) in ([\d.]+) seconds\.", out)
    assert processed, out[-2000:]
    if name == "bert":  # the only one the docs run with validation, 220 batches
        evals = [EVAL.match(line).groups() for line in out.splitlines() if EVAL.match(line)]
        assert [(g, b) for g, b, *_ in evals] == [("1000", "100"), ("1000", "200"),
                                                  ("1000", "220")]
        assert all(6000 < float(r) < 7500 for *_, r in evals)  # the docs' ~6,700/s
        for metric in ("eval/accuracy_cls", "eval/accuracy_masked_lm", "eval/mlm_perplexity"):
            assert f"  - {metric} = " in out
        assert abs(float(processed.group(1)) - 1017.47) < 15  # the docs' 1,017.47 s
    else:
        assert "Eval Device" not in out  # validation is commented out, as the docs say


def test_the_examples_yamls_validate_when_uncommented(software, tmp_path):
    """The docs: "To run validation, uncomment the validation sections at the end"."""
    text = (software / "dataset" / "gptj" / "params_gptj_6B_sampleds.yaml").read_text()
    lines = text.splitlines()
    start = lines.index("# Validation is commented out to shorten the run; to validate, "
                        "uncomment:")
    body = [line[1:] if i > start and line.startswith("#") else line
            for i, line in enumerate(lines)]
    config = tmp_path / "gptj.yaml"
    config.write_text("\n".join(body).replace("max_steps: 200", "max_steps: 20").replace(
        "eval_frequency: 200", "eval_frequency: 20").replace("steps: 200", "steps: 20") + "\n")
    result = cszoo(tmp_path, "fit", config, "--model_dir", "m")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  - eval/lm_perplexity = " in result.stdout


def test_the_calibrations_reproduce_the_docs_rates_on_a_cs3():
    cases = {"gptj": (6_050_882_784, 2048, 120, 44.75), "llama": (6_738_415_616, 4096, 1024, 31.98),
             "esm2": (33_501_153, 1026, 2048, 980.0), "vit": (86_567_656, 197, 2850, 776.0),
             "dit": (2_130_055_168, 256, 1168, 870.0)}
    for kind, (parameters, seq, batch, rate) in cases.items():
        workload = Workload(kind=kind, parameters=parameters, seq_len=seq, batch_size=batch)
        assert timing.samples_per_second(workload, 1, cs3.CS3) == pytest.approx(rate, rel=0.01)
    llama = Workload(kind="llama", parameters=6_738_415_616, seq_len=4096, batch_size=1024)
    assert timing.checkpoint_seconds(llama, cs3.CS3) == pytest.approx(464.5, rel=0.01)
    # the seeds' BERT keeps its CS-2 calibration on a CS-2
    bert = Workload(kind="bert", parameters=335_000_000, seq_len=128, batch_size=1024)
    assert timing.calibration("bert", cs2.CS2) is timing.CALIBRATIONS["bert"]
    assert timing.calibration("bert", cs3.CS3) is timing.CS3_CALIBRATIONS["bert"]
    assert timing.calibration("llama", cs2.CS2) is timing.CS3_CALIBRATIONS["llama"]
    assert math.isfinite(timing.steady_step_seconds(bert, 1, cs2.CS2))


def test_llama_fits_in_micro_batches_only():
    """Llama-2 7B at batch 1,024 and 4,096 tokens holds its activations a micro-batch at a
    time (the YAML's micro_batch_size); the whole batch at once would not fit."""
    whole = Workload(kind="llama", parameters=6_738_415_616, largest_layer_parameters=131_072_000,
                     hidden_size=4096, seq_len=4096, batch_size=1024)
    with pytest.raises(cs2.WaferOutOfMemoryError, match="micro_batch_size"):
        cs2.check_fit(whole, 1, cs3.CS3)
    assert cs2.check_fit(whole.with_(micro_batch_size=64), 1, cs3.CS3) < 40e9
