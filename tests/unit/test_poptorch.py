"""The poptorch facade on the host CPU: its options, data loading, IPU checks and caching.

Runs with Debian's python3-torch (the Makefile installs it on the host and the
venv sees it); no V-IPU server: the job's allocation is set directly.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import poptorch
import pytest
import torch
from aitestbed.graphcore import timing
from poptorch._runtime import runtime

pytestmark = pytest.mark.unit


class Classifier(torch.nn.Module):
    def __init__(self, blocks: int = 1):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(16 if i else 8, 16) for i in range(blocks))
        self.head = torch.nn.Linear(16, 4)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        for layer in self.layers:
            x = torch.relu(layer(x))
        out = self.head(x)
        return out if labels is None else (out, self.loss(out, labels))


def separable(n: int = 800):
    torch.manual_seed(0)
    x = torch.randn(n, 8)
    labels = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    return torch.utils.data.TensorDataset(x, labels)


def test_options_chain_and_show_what_was_set():
    opts = poptorch.Options().deviceIterations(50).replicationFactor(4).randomSeed(1)
    opts.Training.gradientAccumulation(2)
    opts.outputMode(poptorch.OutputMode.All)
    settings = opts.toDict()
    assert (settings["device_iterations"], settings["replication_factor"]) == (50, 4)
    assert settings["Training"]["gradient_accumulation"] == 2
    assert settings["output_mode"] == "All"
    assert opts.clone().toDict() == settings
    with pytest.raises(ValueError, match="deviceIterations must be a positive integer"):
        poptorch.Options().deviceIterations(0)


def test_default_options_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", '{"deviceIterations": 4, '
                       '"Training.gradientAccumulation": 2}')
    opts = poptorch.Options()
    assert (opts.device_iterations, opts.gradient_accumulation) == (4, 2)
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", "{not json")
    with pytest.raises(poptorch.Error, match="POPTORCH_DEFAULT_OPTIONS is not a JSON object"):
        poptorch.Options()


def test_the_dataloader_serves_combined_batches():
    opts = poptorch.Options().deviceIterations(50)
    loader = poptorch.DataLoader(opts, separable(60_000 // 10), batch_size=8, shuffle=True)
    assert loader.combinedBatchSize == 400 and len(loader) == 6000 // 400
    x, labels = next(iter(loader))
    assert x.shape == (400, 8) and labels.shape == (400,)
    opts = poptorch.Options().deviceIterations(2).replicationFactor(4)
    opts.Training.gradientAccumulation(3)
    assert poptorch.DataLoader(opts, separable(), batch_size=5).combinedBatchSize == 120


def test_a_training_model_really_trains_and_returns_every_iteration(allocation):
    allocation(1)
    model = Classifier()
    opts = poptorch.Options().deviceIterations(10).outputMode(poptorch.OutputMode.All)
    training = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    loader = poptorch.DataLoader(opts, separable(), batch_size=8, shuffle=True)
    first = last = None
    for _ in range(5):
        for x, labels in loader:
            out, losses = training(x, labels)
            first = losses if first is None else first
            last = losses
    assert out.shape == (80, 4) and losses.shape == (10,)
    assert last.mean() < first.mean() / 2  # the loss really fell
    training.detachFromDevice()
    inference = poptorch.inferenceModel(model)
    x, labels = separable(400)[:]
    accuracy = (inference(x).argmax(1) == labels).float().mean()
    assert accuracy > 0.9


def test_training_defaults_to_the_final_output(allocation):
    allocation(1)
    model = Classifier()
    training = poptorch.trainingModel(model, poptorch.Options().deviceIterations(4))
    out, loss = training(torch.randn(32, 8), torch.zeros(32, dtype=torch.long))
    assert out.shape == (8, 4) and loss.dim() == 0


def test_a_batch_that_does_not_divide_is_refused(allocation):
    allocation(1)
    training = poptorch.trainingModel(Classifier(), poptorch.Options().deviceIterations(3))
    with pytest.raises(poptorch.Error, match=r"batch dimension \(10\) must be a multiple of "
                       r"Options.deviceIterations\(3\)"):
        training(torch.randn(10, 8), torch.zeros(10, dtype=torch.long))


def test_without_an_allocation_poptorch_fails_as_at_alcf(allocation, capfd):
    runtime_allocation = allocation(0)
    assert runtime_allocation.size == 0
    training = poptorch.trainingModel(Classifier())
    with pytest.raises(poptorch.Error) as failure:
        training(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    assert str(failure.value) == (
        "In poptorch/popart_compiler/source/CompilerImpl.cpp:725: 'poptorch_cpp_error': "
        "Failed to acquire 1 IPU(s)\nNo IPU detected in the system.\n"
        "For more information use the Graphcore command-line tool `gc-monitor`.")
    assert f"{type(failure.value).__module__}.{type(failure.value).__name__}" == \
        "poptorch.poptorch_core.Error"
    log = capfd.readouterr().err
    assert "[poptorch::python] [critical] poptorch.poptorch_core.Error: In poptorch/" in log
    assert "Error raised in:\n  [0] Compiler::initSession" in log


def test_blocks_count_towards_the_ipus_reserved(allocation):
    allocation(1)
    model = Classifier(blocks=2)
    poptorch.BeginBlock(model.layers[1], ipu_id=1)
    training = poptorch.trainingModel(model)
    with pytest.raises(poptorch.Error, match="No device found on the system with 2 IPUs"):
        training(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    allocation(2)
    poptorch.trainingModel(model)(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))


def test_a_count_that_is_not_a_power_of_two_needs_auto_rounding(allocation):
    allocation(4)
    model = Classifier(blocks=3)
    for ipu_id in (1, 2):
        poptorch.BeginBlock(model.layers[ipu_id], ipu_id=ipu_id)
    with pytest.raises(poptorch.Error, match="The model specifies the use of 3 IPUs, however "
                       "PopTorch must reserve a minimum of 4"):
        poptorch.trainingModel(model)(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    opts = poptorch.Options().autoRoundNumIPUs(True)
    poptorch.trainingModel(model, opts)(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))


def test_replicas_multiply_the_ipus(allocation):
    allocation(2)
    opts = poptorch.Options().replicationFactor(4)
    with pytest.raises(poptorch.Error, match="Failed to acquire 4 IPU"):
        poptorch.inferenceModel(Classifier(), opts)(torch.randn(8, 8))


def test_a_model_too_large_for_an_ipu_runs_out_of_memory(allocation):
    allocation(1)
    huge = torch.nn.Linear(8192, 8192)  # 268 MB of weights, x4 with gradients and state
    training = poptorch.trainingModel(torch.nn.Sequential(huge, torch.nn.Flatten(0)))
    with pytest.raises(poptorch.Error, match="Out of memory: Cannot fit all variable data onto "
                       "one or more tiles. IPU 0 needs"):
        training.compile(torch.randn(1, 8192))


def test_compilation_shows_device_time_and_is_cached(allocation, tmp_path, monkeypatch, capfd):
    allocation(1)
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POPTORCH_LOG_LEVEL", "INFO")
    # A batch job's log has no terminal: tqdm's bar is 10 wide (xdist's workers set COLUMNS).
    monkeypatch.delenv("COLUMNS", raising=False)
    poptorch.setLogLevel("WARN")
    x, labels = torch.randn(8, 8), torch.zeros(8, dtype=torch.long)
    before = runtime.clock.now()
    first = poptorch.trainingModel(Classifier())
    first.compile(x, labels)
    compiled = runtime.clock.now() - before
    params = sum(p.numel() for p in Classifier().parameters())
    assert compiled == pytest.approx(timing.compile_seconds(params), rel=1e-6)
    assert first.compilationTime() == pytest.approx(compiled)
    bar = capfd.readouterr().err
    assert "Graph compilation: 100%|██████████| 100/100 [00:20<00:00]" in bar
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".popef"]
    second = poptorch.trainingModel(Classifier())
    second.compile(x, labels)
    assert second.compilationTime() == pytest.approx(timing.CACHE_LOAD_SECONDS)
    assert "100/100 [00:00<00:00]" in capfd.readouterr().err
    cached = next((tmp_path / "cache").iterdir())
    cached.write_bytes(b"garbage")
    with pytest.raises(poptorch.Error, match="not a valid PopEF file"):
        poptorch.trainingModel(Classifier()).compile(x, labels)


def test_the_ipu_model_needs_no_allocation_and_does_not_cache(allocation, monkeypatch, capfd,
                                                             tmp_path):
    allocation(0)
    monkeypatch.setenv("POPTORCH_IPU_MODEL", "1")
    opts = poptorch.Options().enableExecutableCaching(str(tmp_path))
    poptorch.inferenceModel(Classifier(), opts)(torch.randn(4, 8))
    assert "enableExecutableCaching doesn't work with the IPU model" in capfd.readouterr().err
    assert not list(tmp_path.iterdir())


def test_profiles_go_where_the_variables_say(allocation, tmp_path, monkeypatch):
    allocation(1)
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(
        {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "graph_profile")}))
    monkeypatch.setenv("PVTI_OPTIONS", json.dumps(
        {"enable": "true", "directory": str(tmp_path / "system_profile")}))
    monkeypatch.setattr("poptorch._executor._system_trace", None)
    poptorch.inferenceModel(Classifier())(torch.randn(4, 8))
    report = json.loads((tmp_path / "graph_profile" / "inference" / "profile.pop").read_text())
    assert report["executable"]["ipus_per_replica"] == 1
    [trace] = (tmp_path / "system_profile").iterdir()
    assert trace.suffix == ".pvti"
    assert [json.loads(line)["channel"] for line in trace.read_text().splitlines()] == \
        ["compile", "run"]


def test_identity_loss_marks_the_loss_and_poptorch_optim_trains(allocation):
    allocation(1)

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 1)

        def forward(self, x, y):
            error = (self.linear(x).squeeze(1) - y) ** 2
            return poptorch.identity_loss(error, reduction="mean")

    model = Regression()
    x = torch.randn(64, 8)
    y = x @ torch.arange(8.0)
    training = poptorch.trainingModel(model, optimizer=poptorch.optim.Adam(model.parameters(),
                                                                          lr=0.1, loss_scaling=1))
    losses = [float(training(x, y)) for _ in range(200)]
    assert losses[-1] < losses[0] / 100


def test_popdist_reads_poprun_s_environment(monkeypatch):
    import popdist
    import popdist.poptorch

    assert not popdist.isPopdistEnvSet() and popdist.getNumTotalReplicas() == 1
    monkeypatch.setenv("POPDIST_NUM_TOTAL_REPLICAS", "4")
    monkeypatch.setenv("POPDIST_NUM_INSTANCES", "2")
    monkeypatch.setenv("POPDIST_INSTANCE_INDEX", "1")
    monkeypatch.setenv("POPDIST_NUM_LOCAL_REPLICAS", "2")
    assert popdist.isPopdistEnvSet() and popdist.getReplicaIndexOffset() == 2
    opts = popdist.poptorch.Options()
    assert opts.replication_factor == 2
    assert (opts.Distributed.processId, opts.Distributed.numProcesses) == (1, 2)


def _import_poptorch(**env: str) -> subprocess.CompletedProcess:
    emulator = Path(poptorch.__file__).parents[1]
    return subprocess.run([sys.executable, "-c", "import poptorch"],
                          env={**os.environ, "PYTHONPATH": str(emulator), **env},
                          capture_output=True, text=True, timeout=60)


def test_a_bad_log_level_stops_at_import_with_the_real_message():
    result = _import_poptorch(POPTORCH_LOG_LEVEL="LOUD")
    assert result.returncode == 1
    assert result.stderr.startswith("Unknown POPTORCH_LOG_LEVEL 'LOUD'. Valid values are "
                                    "TRACE_ALL, TRACE, DEBUG")
    assert "Traceback" not in result.stderr


def test_a_bad_time_scale_stops_at_import_with_a_clear_message():
    result = _import_poptorch(AITESTBED_TIME_SCALE="fast")
    assert result.returncode == 1
    assert result.stderr.startswith("AITESTBED_TIME_SCALE='fast' is not a time scale")
    assert "Traceback" not in result.stderr


def test_ipu_print_tensor_prints_and_passes_the_tensor_on(allocation, capsys):
    allocation(1)

    class Printing(torch.nn.Module):
        def forward(self, x):
            return poptorch.ipu_print_tensor(x * 2, "doubled")

    out = poptorch.inferenceModel(Printing())(torch.ones(2, 3))
    assert torch.equal(out, torch.full((2, 3), 2.0))
    # printed once, when it runs (not while it is traced)
    assert capsys.readouterr().out == "doubled: [[2., 2., 2.],\n [2., 2., 2.]]\n"


@pytest.mark.parametrize("scale", ["0", "0.05"])
def test_the_time_scale_makes_wall_time_follow_device_time(scale):
    """Compiling the small model takes 13 device seconds (inference): at scale 0.05 the
    process's wall time since the device clock started is at least 0.65 s; at 0 (the
    default) nothing waits."""
    code = ("import torch, poptorch\n"
            "from poptorch._runtime import runtime\n"
            "model = poptorch.inferenceModel(torch.nn.Linear(8, 4))\n"
            "model.compile(torch.randn(2, 8))\n"
            "print(runtime.clock.wall_seconds(), model.compilationTime())")
    emulator = Path(poptorch.__file__).parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(emulator),
                                             "AITESTBED_TIME_SCALE": scale,
                                             "POPTORCH_IPU_MODEL": "1"})
    assert result.returncode == 0, result.stderr
    wall, device = map(float, result.stdout.split())
    assert device == pytest.approx(13.0)
    if scale == "0":
        assert wall < 0.5
    else:
        assert 0.65 <= wall < 2.0


def test_a_cache_dir_that_is_a_file_is_refused_before_compiling(allocation, tmp_path,
                                                                monkeypatch):
    """C42: POPTORCH_CACHE_DIR=/etc/passwd gave a raw FileExistsError after the compile."""
    allocation(1)
    not_a_dir = tmp_path / "passwd"
    not_a_dir.write_text("root:x:0:0::/root:/bin/bash\n")
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(not_a_dir))
    before = runtime.clock.now()
    with pytest.raises(poptorch.Error, match=f"Cannot use {not_a_dir} as the executable cache "
                       r"\(POPTORCH_CACHE_DIR\): it is not a directory"):
        poptorch.trainingModel(Classifier()).compile(torch.randn(8, 8),
                                                     torch.zeros(8, dtype=torch.long))
    assert runtime.clock.now() == before  # no compile time spent


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_cache_dir_is_refused_before_compiling(allocation, tmp_path, monkeypatch):
    """C43: an unwritable cache gave a raw PermissionError, after the whole compile."""
    allocation(1)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(locked / "cache"))
    before = runtime.clock.now()
    with pytest.raises(poptorch.Error, match="Permission denied"):
        poptorch.trainingModel(Classifier()).compile(torch.randn(8, 8),
                                                     torch.zeros(8, dtype=torch.long))
    assert runtime.clock.now() == before


def test_check_cache_dir_refuses_a_directory_it_cannot_write(tmp_path, monkeypatch):
    from poptorch import _compiler

    monkeypatch.setattr(_compiler.os, "access", lambda path, mode: False)
    monkeypatch.delenv("POPTORCH_CACHE_DIR", raising=False)
    with pytest.raises(poptorch.Error, match=r"\(enableExecutableCaching\): Permission denied"):
        _compiler.check_cache_dir(tmp_path)
