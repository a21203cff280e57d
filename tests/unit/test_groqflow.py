"""GroqFlow facade: groqit's build, cache and errors, GroqModel's run/benchmark/estimates,
the timing model's calibration, and the bert_tiny proof point end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import groqflow.common.exceptions as exp  # noqa: E402
from aitestbed.groq import timing  # noqa: E402
from aitestbed.groq.tspd.client import SOCKET_ENV, TspdClient  # noqa: E402
from aitestbed.groq.tspd.server import TspdServer  # noqa: E402
from groqflow import groqit  # noqa: E402
from groqflow.common import build  # noqa: E402

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "roles" / "groq_node" / "files" / "groqflow"
JOB = "7.groq-r01-control"


class Tiny(torch.nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, width)
        self.fc2 = torch.nn.Linear(width, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Det(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.det(x)


def tiny(width: int = 16, seed: int = 0):
    torch.manual_seed(seed)
    return Tiny(width).eval(), {"x": torch.randn(2, 8)}


@pytest.fixture
def chips(tmp_path, monkeypatch):
    """A tspd for this test (the other room's real server), with `n` cards given to a job
    that every process of this test belongs to."""
    sock = tmp_path / "tspd.sock"
    server = TspdServer(sock, tmp_path / "tspd", node="groq-r01-gn-01", job_of=lambda pid: JOB)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(SOCKET_ENV, str(sock))

    def give(n: int) -> None:
        TspdClient(str(sock)).reserve(JOB, "root", n)

    yield give
    server.shutdown()
    server.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.delenv("GROQIT_REBUILD_POLICY", raising=False)
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "no-tspd.sock"))
    return str(tmp_path / "cache")


def test_build_prints_stages_and_writes_the_cache(cache, capsys):
    model, inputs = tiny()
    groqit(model, inputs, cache_dir=cache)
    out = capsys.readouterr().out
    assert out.startswith("\n\n\n")
    assert 'Building "test_groqflow"' in out  # the calling script's name
    for msg in ("Exporting PyTorch to ONNX", "Optimizing ONNX file", "Checking for Op support",
                "Converting to FP16", "Compiling model", "Assembling model"):
        assert f"    ✓ {msg}   \n" in out
    assert f"Woohoo! Saved to {build.tilde(os.path.join(cache, 'test_groqflow'))}" in out
    d = Path(cache) / "test_groqflow"
    for f in ("test_groqflow_state.yaml", "inputs_original.npy",
              "onnx/test_groqflow-op16-base.onnx",
              "onnx/test_groqflow-op16-opt.onnx", "onnx/test_groqflow-op16-opt-f16.onnx",
              "compile/output.aa", "compile/output.iop", "compile/stats.json",
              "log_export_pytorch.txt", "log_optimize_onnx.txt", "log_check_compatibility.txt",
              "log_fp16_conversion.txt", "log_compile.txt", "log_assemble.txt"):
        assert (d / f).is_file(), f
    state = yaml.safe_load((d / "test_groqflow_state.yaml").read_text())
    for key in ("build_status", "cache_dir", "config", "downcast_applied",
                "expected_input_dtypes", "expected_input_shapes", "expected_output_names",
                "groqflow_version", "info", "model_hash", "model_type", "num_chips_used",
                "uid", "rebuild", "monitor", "quantization_samples", "use_sdk"):
        assert key in state, key
    assert state["build_status"] == "successful_build"
    assert state["num_chips_used"] == 1 and state["groqflow_version"] == "4.3.1"
    assert state["config"]["onnx_opset"] == 16 and state["model_type"] == "pytorch"
    assert state["expected_input_shapes"] == {"x": [2, 8]}
    assert json.loads((d / "compile/stats.json").read_text())["total_cycles"] > 0
    assert "ops supported" in (d / "log_check_compatibility.txt").read_text()
    import onnx
    f16 = onnx.load(str(d / "onnx/test_groqflow-op16-opt-f16.onnx"))
    assert {i.data_type for i in f16.graph.initializer} == {onnx.TensorProto.FLOAT16}


def test_cache_hit_and_rebuild_on_change(cache, capsys):
    model, inputs = tiny()
    groqit(model, inputs, build_name="cached", cache_dir=cache)
    capsys.readouterr()
    groqit(model, inputs, build_name="cached", cache_dir=cache)
    assert capsys.readouterr().out == 'Woohoo! Build "cached" found in cache. Loading it!\n'
    groqit(model, {"x": torch.randn(3, 8)}, build_name="cached", cache_dir=cache)
    out = capsys.readouterr().out
    assert ("Warning: build_model() discovered a cached build of cached, but decided to "
            "rebuild for the following reasons:") in out
    assert "Input shape of model \"cached\" changed from {'x': (2, 8)} to {'x': (3, 8)}" in out
    assert 'Building "cached"' in out
    changed, _ = tiny(seed=1)
    groqit(changed, {"x": torch.randn(3, 8)}, build_name="cached", cache_dir=cache)
    assert 'Model "cached" changed since the last time it was built.' in capsys.readouterr().out
    groqit(model, inputs, build_name="cached", cache_dir=cache, rebuild="never")


def test_unsupported_op_fails_with_the_documented_error(cache, capsys):
    with pytest.raises(exp.StageError) as err:
        groqit(Det(), {"x": torch.randn(3, 3)}, build_name="det", cache_dir=cache)
    assert str(err.value).startswith("You model contains ONNX operation(s) that are not "
                                     "supported by Groq Compiler:\n**Det**\n")
    captured = capsys.readouterr()
    assert "    × Checking for Op support   " in captured.out
    assert "Error: You model contains ONNX operation(s)" in captured.err
    assert "       Det\n       Please replace these operation(s)" in captured.err
    assert "▄██████████████▄▐█▄▄▄▄█▌" in captured.err
    log = (Path(cache) / "det" / "log_check_compatibility.txt").read_text()
    assert "Unsupported ops: Det" in log and "Model has 1 unsupported ops" in log
    state = yaml.safe_load((Path(cache) / "det" / "det_state.yaml").read_text())
    assert state["build_status"] == "failed_build"


@pytest.mark.parametrize("kwargs, message", [
    ({"num_chips": 3}, "You set groqit()'s num_chips argument to 3 with topology Dragonfly "
                       "for build args, which is not a supported value. Choose from the "
                       "currently supported chip counts: dict_keys([2, 4, 8, 16, 32, 64])."),
    ({"num_chips": 8, "topology": "Rotational"}, "dict_keys([16, 32, 40, 48, 56, 64, 72])"),
    ({"compiler_flags": ["--groqview"]}, "reserved by groqit() and cannot be used in the "
                                         "groqit(compiler_flags=...) argument: ['--multichip', "
                                         "'--groqview', '--save-stats', '-o']. However, your "
                                         "compiler_flags argument includes --groqview."),
    ({"assembler_flags": ["--x"]}, "The assembler_flags argument is incompatible with "
                                   "multi-chip models. Either set num_chips=1 or do not use "
                                   "assembler_flags."),
])
def test_argument_errors(cache, capsys, kwargs, message):
    model, inputs = tiny()
    with pytest.raises(exp.ArgError) as err:
        groqit(model, inputs, build_name="args", cache_dir=cache, **kwargs)
    assert message in str(err.value)
    assert "Error:" in capsys.readouterr().err


def test_rebuild_policy_env_and_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GROQIT_REBUILD_POLICY", "sometimes")
    model, inputs = tiny()
    with pytest.raises(ValueError, match=r"has value sometimes which is not one of the "
                       r"following allowed values: \['if_needed', 'always', 'never'\]"):
        groqit(model, inputs, cache_dir=str(tmp_path))
    monkeypatch.setenv("GROQFLOW_CACHE_DIR", str(tmp_path / "envcache"))
    assert build.default_cache_dir() == str(tmp_path / "envcache")


def test_num_chips_from_parameters():
    assert build.calculate_num_chips(0) == 1
    assert build.calculate_num_chips(4_000_000) == 1
    assert build.calculate_num_chips(50_000_001) == 2
    assert build.calculate_num_chips(120_000_000) == 4
    assert build.calculate_num_chips(420_000_000) == 16


def test_estimate_performance_formula(cache):
    model, inputs = tiny()
    gmodel = groqit(model, inputs, build_name="est", cache_dir=cache, monitor=False)
    perf = gmodel.estimate_performance()
    cycles = json.loads(Path(gmodel.state.stats_file).read_text())["total_cycles"]
    assert perf.compute_latency == pytest.approx(cycles / 900e6)
    # x: 2x8 float -> fp16 = 32 bytes in; 2x4 fp16 = 16 bytes out
    assert perf.pcie_input_latency == pytest.approx(32 / 24e9 + 1e-5)
    assert perf.pcie_output_latency == pytest.approx(16 / 24e9 + 1e-5)
    assert perf.latency == pytest.approx(perf.pcie_input_latency + perf.compute_latency
                                         + perf.pcie_output_latency)
    assert perf.throughput == pytest.approx(1 / perf.latency)
    assert perf.latency_units == "seconds"
    assert perf.throughput_units == "inferences per second"


def test_run_without_chips_gives_the_runtime_error(cache, capsys):
    model, inputs = tiny()
    gmodel = groqit(model, inputs, build_name="nochips", cache_dir=cache, monitor=False)
    with pytest.raises(exp.ModelRuntimeError) as err:
        gmodel(**inputs)
    assert str(err.value) == ("Trying to execute a model compiled for 1 GroqChip processors "
                              "but this machine only has 0 GroqChip processors available.")
    assert "Error: Trying to execute" in capsys.readouterr().err


def test_run_numerics_benchmark_and_validation(cache, chips, capsys):
    chips(2)
    model, inputs = tiny()
    gmodel = groqit(model, inputs, build_name="run", cache_dir=cache, monitor=False)
    out = gmodel(**inputs)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 4)
    with torch.no_grad():
        ref = model(**inputs)
    assert torch.allclose(out, ref, atol=1e-2, rtol=1e-2)
    assert not torch.equal(out, ref)  # fp16 weights: not bit-identical to fp32
    many = gmodel.run_abunch([inputs, {"x": torch.zeros(2, 8)}])
    assert len(many) == 2 and torch.allclose(many[0], out)
    perf = gmodel.benchmark()
    assert ("Info: No inputs received for benchmark. Using the inputs provided during model "
            "compilation.") in capsys.readouterr().out
    onchip = gmodel.estimate_performance().compute_latency
    assert onchip < perf.latency < onchip + 1e-4  # the emulated chip's time, not the CPU's
    assert np.load(gmodel.state.latency_file).item() == perf.latency
    assert Path(gmodel.state.outputs_file).is_file()
    assert gmodel.benchmark_abunch([inputs, inputs]).latency == perf.latency
    with pytest.raises(exp.ModelArgError, match=r"GroqModel.run\(\) received inputs of type "
                       r"<class 'list'>, however the inputs must be a dictionary."):
        gmodel.run([inputs])
    with pytest.raises(exp.ModelArgError, match=r"GroqModel.run_abunch\(\) received an empty "
                       r"collection as input."):
        gmodel.run_abunch([])
    with pytest.raises(exp.ModelArgError, match="shape"):
        gmodel.run({"x": torch.randn(3, 8)})


def test_multichip_needs_enough_chips(cache, chips):
    chips(1)
    model, inputs = tiny()
    gmodel = groqit(model, inputs, build_name="two", cache_dir=cache, monitor=False, num_chips=2)
    assert gmodel.state.num_chips_used == 2
    assert sorted(p.name for p in Path(gmodel.state.compile_dir).glob("output*.iop")) == \
        ["output.0.iop", "output.1.iop"]
    with pytest.raises(exp.ModelRuntimeError, match="compiled for 2 GroqChip processors but "
                       "this machine only has 1 GroqChip"):
        gmodel.run(inputs)


def test_groqview(cache, capsys):
    model, inputs = tiny()
    gmodel = groqit(model, inputs, build_name="nogv", cache_dir=cache, monitor=False)
    with pytest.raises(exp.GroqFlowError, match="GroqView directory not found. Please "
                       "recompile your model with groqview=True"):
        gmodel.groqview()
    gmodel = groqit(model, inputs, build_name="gv", cache_dir=cache, monitor=False,
                    groqview=True)
    server = gmodel.groqview(block=False)
    try:
        port = server.server_address[1]
        assert f"Open your web browser:\n    http://localhost:{port}\n" in capsys.readouterr().out
        import urllib.request
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/").read().decode()
        assert "GroqView: gv" in page and "Gemm" in page
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", sorted(timing.CALIBRATION))
def test_timing_reproduces_the_proof_points(name):
    c = timing.CALIBRATION[name]
    on_chip = timing.on_chip_latency(c["matmul"], c["conv"], c["vector"])
    e2e = timing.end_to_end_latency(on_chip, c["input_bytes"], c["output_bytes"])
    assert on_chip == pytest.approx(c["on_chip"], rel=0.10)
    assert e2e == pytest.approx(c["end_to_end"], rel=0.10)


def test_flop_count_of_full_size_bert_tiny_matches_the_calibration(tmp_path):
    sys.path.insert(0, str(TREE / "demo_helpers"))
    try:
        from demo_helpers.models import SequenceClassifier, bert_tiny_config
    finally:
        sys.path.remove(str(TREE / "demo_helpers"))
    import onnx
    model = SequenceClassifier(bert_tiny_config()).eval()
    ids = torch.ones(1, 128, dtype=torch.long)
    path = tmp_path / "b.onnx"
    torch.onnx.export(model, ({"input_ids": ids, "attention_mask": ids},), str(path),
                      input_names=["input_ids", "attention_mask"], opset_version=16)
    work = timing.summarize(timing.count_flops(onnx.load(str(path))))
    assert work["matmul"] == timing.CALIBRATION["bert_tiny"]["matmul"]
    assert work["vector"] == timing.CALIBRATION["bert_tiny"]["vector"]


def _table_rows(out: str) -> dict[str, list[str]]:
    return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("|  ")}


@pytest.mark.slow("a second GroqFlow proof point (MiniLM is presubmit): about 85 s")
def test_bert_tiny_proof_point_end_to_end(tmp_path, chips):
    """--build trains BERT-tiny once (~15 s) and builds it; --execute (rebuild="never") loads
    the cached weights and build, and compares the GroqChip's accuracy with the CPU's."""
    chips(1)
    env = {**os.environ, "GROQFLOW_CACHE_DIR": str(tmp_path / "cache"),
           "BERT_TINY_NUM_TEST": "100",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "emulator"), str(TREE / "demo_helpers")])}
    script = TREE / "proof_points" / "natural_language_processing" / "bert" / "bert_tiny.py"
    built = subprocess.run([sys.executable, str(script), "--build"], env=env, text=True,
                           capture_output=True, timeout=60, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "Training BERT-tiny" in built.stdout
    assert 'Building "bert_tiny"' in built.stdout and "Woohoo! Saved to" in built.stdout
    assert "Running inference" not in built.stdout
    assert (tmp_path / "cache" / "bert_tiny" / "bert_tiny_trained.pt").is_file()
    assert f"Proof point {script} finished!" in built.stdout

    nochips = subprocess.run([sys.executable, str(script), "--execute"], text=True,
                             env={**env, SOCKET_ENV: str(tmp_path / "no-tspd.sock")},
                             capture_output=True, timeout=60, cwd=tmp_path)
    assert nochips.returncode != 0
    assert ("Error: Trying to execute a model compiled for 1 GroqChip processors but this "
            "machine only has 0 GroqChip processors available.") in nochips.stderr
    assert "finished!" not in nochips.stdout

    ran = subprocess.run([sys.executable, str(script), "--execute"], env=env, text=True,
                         capture_output=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    out = ran.stdout
    assert "Training" not in out and "Building" not in out
    lines = [line for line in out.splitlines() if not line.startswith(("+", "|"))]
    assert lines == [
        'Woohoo! Build "bert_tiny" (build_name auto-selected) found in cache. Loading it!',
        "Preprocessing data.",
        "Info: No inputs received for benchmark. Using the inputs provided during model "
        "compilation.",
        "Running inference on GroqChip.",
        "Running inference using PyTorch model (CPU).",
        f"Proof point {script} finished!"]
    assert "100/100" in ran.stderr  # tqdm's bar
    assert ("| Source | Accuracy | end-to-end latency (ms) | end-to-end IPS | "
            "on-chip latency (ms) | on-chip IPS |") in out
    rows = _table_rows(out)
    assert list(rows) == ["cpu", "groq"]
    cpu, groq = rows["cpu"], rows["groq"]
    cpu_acc, groq_acc = float(cpu[0].rstrip("%")), float(groq[0].rstrip("%"))
    assert cpu_acc >= 85.0 and groq_acc >= 85.0  # it really learned
    assert abs(cpu_acc - groq_acc) <= 1.0  # fp16 on the chip, fp32 on the CPU
    assert groq[1] == "0.05" and groq[3] == "0.03"  # the emulated chip's time (calibrated)
    assert float(groq[2]) == pytest.approx(1000 / float(groq[1]), rel=0.2)
    assert cpu[2] != "--" and float(cpu[1]) > 1.0 and cpu[3] == cpu[4] == "--"  # CPU time


def test_spearman_matches_scipys_definition():
    sys.path.insert(0, str(TREE / "demo_helpers"))
    try:
        from demo_helpers.similarity import pairs, spearman
    finally:
        sys.path.remove(str(TREE / "demo_helpers"))
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties share their average rank: Pearson of [1, 2.5, 2.5, 4] and [1, 3, 2, 4]
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / 22.5 ** 0.5)
    first, gold = pairs(5, seed=3)
    assert pairs(5, seed=3)[0] == first and ((gold >= 0) & (gold <= 5)).all()


def test_minilm_proof_point_end_to_end(tmp_path, chips):
    """Build and run in one go (no flag) on a few pairs: the CPU takes ~3 s per pair here."""
    chips(8)
    env = {**os.environ, "GROQFLOW_CACHE_DIR": str(tmp_path / "cache"),
           "MINILM_NUM_TEST": "4",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "emulator"), str(TREE / "demo_helpers")])}
    script = TREE / "proof_points" / "natural_language_processing" / "minilm" / "minilmv2.py"
    ran = subprocess.run([sys.executable, str(script)], env=env, text=True,
                         capture_output=True, timeout=90, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    out = ran.stdout
    assert 'Building "minilmv2"' in out and "Running inference on GroqChip." in out
    assert ("| Source | Spearman Rank Correlation Coefficient | end-to-end latency (ms) | "
            "end-to-end IPS | on-chip latency (ms) | on-chip IPS |") in out
    rows = _table_rows(out)
    cpu, groq = rows["cpu"], rows["groq"]
    assert float(cpu[0]) >= 0.5 and abs(float(cpu[0]) - float(groq[0])) <= 0.05
    assert groq[1:] == ["0.47", "2144.87", "0.38", "2620.58"]  # ALCF's documented run
    assert f"Proof point {script} finished!" in out
