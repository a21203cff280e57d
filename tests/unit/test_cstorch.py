"""cerebras_pytorch: the API pieces, the channel, and appliance jobs' error paths.

Appliance jobs run through LocalJobRunner (worker subprocesses) on a tiny program
written into the test's directory, so each test sees what a user's job would.
"""

import logging
import sys
import textwrap
import threading

import cerebras_pytorch as cstorch
import pytest
import torch
from aitestbed.cerebras import wsjob
from cerebras_pytorch.appliance import channel, errors, local, program, runner

pytestmark = pytest.mark.unit

TINY = '''
import os

import torch

import cerebras_pytorch as cstorch


class Model(torch.nn.Module):
    def __init__(self, params):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, batch):
        return torch.nn.functional.mse_loss(self.linear(batch[0]), batch[1])


class Huge(Model):
    @classmethod
    def aitestbed_workload(cls, params):
        return {"parameters": 4 * 10**10, "largest_layer_parameters": 4 * 10**10,
                "hidden_size": 200000}


def data(params):
    path = params["data_file"]
    with open(path) as stream:
        count = int(stream.read())
    x = torch.randn(count, 4, generator=torch.Generator().manual_seed(0))
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


def flow(params, model_fn, train_data_fn):
    backend = cstorch.backend("CSX")
    model = cstorch.compile(model_fn(params), backend)
    optimizer = cstorch.optim.SGD(model.parameters(), lr=0.05)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(
        train_data_fn, params), num_steps=params["steps"])

    @cstorch.trace
    def step(batch):
        optimizer.zero_grad()
        loss = model(batch)
        loss.backward()
        optimizer.step()
        return loss

    for batch in executor:
        loss = step(batch)
    import logging
    logging.info(f"final loss {float(loss):.4f} rate {executor.profiler.global_rate():.1f}")
    cstorch.save({"model": model.state_dict()}, os.path.join(params["out"], "ck.mdl"))
'''


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A package `tinyzoo` in tmp_path/zoo, data in tmp_path/data, the worker's TMPDIR apart."""
    zoo = tmp_path / "zoo" / "tinyzoo"
    zoo.mkdir(parents=True)
    (zoo / "__init__.py").write_text("")
    (zoo / "flows.py").write_text(textwrap.dedent(TINY))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "count").write_text("64")
    (tmp_path / "worker-tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "worker-tmp"))
    monkeypatch.setenv(runner.RUNNER_ENV, "cerebras_pytorch.appliance.local:LocalJobRunner")
    sys.path.insert(0, str(tmp_path / "zoo"))
    import tinyzoo.flows

    yield tinyzoo.flows
    sys.path.remove(str(tmp_path / "zoo"))
    for name in [n for n in sys.modules if n.startswith("tinyzoo")]:
        del sys.modules[name]


def submit(tiny, tmp_path, model="Model", **config):
    params = {"data_file": str(tmp_path / "data" / "count"), "steps": 20,
              "out": str(tmp_path / "out"), "runconfig": {"mode": "train"},
              "train_input": {"batch_size": 8}}
    cs_config = cstorch.utils.CSConfig(**{"mount_dirs": [str(tmp_path)],
                                          "python_paths": [str(tmp_path / "zoo")], **config})
    return cstorch.appliance.run_program(
        tiny.flow, params, backend_type="CSX", cs_config=cs_config, compile_dir="me",
        model_fn=getattr(tiny, model), train_data_fn=tiny.data)


def test_backends():
    assert cstorch.__version__ == "2.1.1"
    with pytest.raises(cstorch.BackendError, match="no GPU"):
        cstorch.backend("GPU")
    cpu = cstorch.backend("CPU")
    assert cstorch.current_backend() is cpu and not cstorch.use_cs()
    model = torch.nn.Linear(2, 2)
    assert cstorch.compile(model, cpu) is model
    csx = cstorch.backend("CSX")
    assert cstorch.use_cs() and csx.session is None
    executor = cstorch.utils.data.DataExecutor(
        cstorch.utils.data.DataLoader(lambda: [torch.zeros(2, 2)]), num_steps=1)
    with pytest.raises(cstorch.appliance.ApplianceClientError, match="run_program"):
        next(iter(executor))


def test_cpu_executor_counts_traced_steps_and_cycles_the_data():
    cstorch.backend("CPU")
    loader = cstorch.utils.data.DataLoader(lambda n: [torch.zeros(n, 3)] * 2, 5)
    executor = cstorch.utils.data.DataExecutor(loader, num_steps=5)
    traced = cstorch.trace(lambda batch: batch.sum())
    seen = [(executor.user_iteration, traced(batch)) for batch in executor]
    assert len(seen) == 5 and executor.on_final_iteration
    assert executor.profiler.total_samples == 25


def test_cs_config_and_labels():
    config = cstorch.utils.CSConfig(num_csx=2, job_labels=["name=pt", "team=a=b"])
    assert config.labels() == {"name": "pt", "team": "a=b"}
    with pytest.raises(ValueError, match="key=value"):
        cstorch.utils.CSConfig(job_labels=["oops"])


def test_optim_amp_save_load(tmp_path):
    model = torch.nn.Linear(3, 1)
    optimizer = cstorch.optim.configure_optimizer("adamw", model.parameters(), lr=0.1)
    assert isinstance(optimizer, cstorch.optim.AdamW)
    with pytest.raises(ValueError, match="Unsupported optimizer"):
        cstorch.optim.configure_optimizer("lamb", model.parameters())
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=8.0)
    before = model.weight.detach().clone()
    scaler.scale(model(torch.ones(2, 3)).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert not torch.equal(before, model.weight)
    model.weight.grad.fill_(float("inf"))
    scaler.step(optimizer)
    scaler.update()
    assert scaler.state_dict()["scale"] == 4.0
    path = tmp_path / "sub" / "c.mdl"
    cstorch.save({"model": model.state_dict()}, path)
    state = cstorch.load(path)
    assert state["__metadata__"][0]["version"] == "2.1.1" and "model" in state


def test_error_messages_map_to_appliance_errors():
    oom = errors.from_message({"type": "error", "exception": "ApplianceCompilationError",
                               "message": "does not fit"})
    assert type(oom) is errors.ApplianceCompilationError
    missing = errors.from_message({"type": "error", "exception": "ModuleNotFoundError",
                                   "message": "No module named 'modelzoo'"})
    assert type(missing) is errors.ApplianceUnknownError
    assert str(missing) == "ModuleNotFoundError: No module named 'modelzoo'"


def test_get_runner_reads_the_environment(monkeypatch):
    monkeypatch.setenv(runner.RUNNER_ENV, "cerebras_pytorch.appliance.local:LocalJobRunner")
    assert isinstance(runner.get_runner(), local.LocalJobRunner)
    monkeypatch.setenv(runner.RUNNER_ENV, "nowhere:Runner")
    with pytest.raises(errors.ApplianceClientError, match="nowhere:Runner"):
        runner.get_runner()


def test_channel_queues_until_the_client_connects_and_drains_on_close():
    server = channel.ChannelServer(0, wsjob.token_hash("s3cret"), host="127.0.0.1")
    server.send({"type": "log", "message": "early"})
    received = []
    reader = threading.Thread(target=lambda: received.extend(
        channel.connect("127.0.0.1", server.port, 10, "s3cret")))
    reader.start()
    server.send({"type": "log", "message": "late"})
    assert server.close(timeout=10)
    reader.join(10)
    assert [m["message"] for m in received] == ["early", "late"]


def test_channel_connect_gives_up():
    with pytest.raises(ConnectionError):
        next(channel.connect("127.0.0.1", 1, 0.2, "s3cret"))


def test_callables_must_be_importable_by_name():
    with pytest.raises(errors.ApplianceClientError, match="importable by name"):
        program.callable_name(lambda params: None)
    assert program.callable_name(program.resolve) == "cerebras_pytorch.appliance.program:resolve"
    assert program.resolve("cerebras_pytorch.appliance.program:resolve") is program.resolve


def test_csx_job_trains_on_the_worker_and_the_client_writes_the_files(tiny, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    done = submit(tiny, tmp_path, num_csx=2)
    assert done["type"] == "done" and done["samples"] == 20 * 8 and done["seconds"] > 0
    assert done["systems"] == ["cer-cs2-01", "cer-cs2-02"]
    text = caplog.text
    for line in ("Compiling the model. This may take a few minutes.",
                 "Pre-optimization transforms...", "Compile hash is: cs_",
                 "Compile was successful!", "Programming Cerebras Wafer Scale Cluster",
                 "Preparing to execute using 2 CSX", "Beginning appliance run", "final loss"):
        assert line in text
    state = torch.load(tmp_path / "out" / "ck.mdl")
    assert set(state) == {"model", "__metadata__"}


def test_missing_python_paths_relays_module_not_found(tiny, tmp_path):
    with pytest.raises(errors.ApplianceUnknownError,
                       match="ModuleNotFoundError: No module named 'tinyzoo'"):
        submit(tiny, tmp_path, python_paths=[])


def test_data_outside_the_mounts_is_not_there(tiny, tmp_path):
    with pytest.raises(errors.ApplianceUnknownError, match="FileNotFoundError: .*count"):
        submit(tiny, tmp_path, mount_dirs=[str(tmp_path / "zoo")])


def test_a_model_too_large_fails_at_compile(tiny, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with pytest.raises(errors.ApplianceCompilationError, match="does not fit on the CS-2"):
        submit(tiny, tmp_path, model="Huge")
    assert "Compile was successful!" not in caplog.text


def test_execute_without_compile_artifacts(tiny, tmp_path):
    request = program.build_request(
        {"flow": "tinyzoo.flows:flow", "functions": {}, "params": {}},
        cstorch.utils.CSConfig(), "me", "cs_123")
    with pytest.raises(errors.ApplianceCompilationError, match="No compile artifacts"):
        local.LocalJobRunner().run("execute", request, lambda message: None)
