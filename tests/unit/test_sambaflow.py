"""The sambaflow facade and the starter apps, as a user runs them, on the host CPU.

An snd daemon (aitestbed.sambanova.snd.server) runs in a thread on a socket of the test's
own, holding one RDU for the test's "job"; the apps run as subprocesses with
PYTHONPATH=emulator, so they see what `srun python lenet.py ...` sees on a node.
MNIST is built from the pinned source tarball (build/downloads), once per session.
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "emulator"
STARTERS = ROOT / "roles" / "sambaflow" / "files" / "apps" / "starters"
USER = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def apps(tmp_path):
    """`cp -r /opt/sambaflow/apps/starters apps/starters`, as the guide does."""
    target = tmp_path / "apps" / "starters"
    shutil.copytree(STARTERS, target)
    return target


def env(tmp_path, **extra):
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("SLURM_", "AITESTBED_SN", "SF_RNT", "MASTER_"))}
    environment.update(PYTHONPATH=str(EMULATOR), SF_RNT_LOG_FILE=str(tmp_path / "sn.log"),
                       OMP_NUM_THREADS="1")
    for name in ("AITESTBED_SND_SOCKET", "SLURM_JOB_ID"):
        if name in os.environ:
            environment[name] = os.environ[name]
    environment.update({k: str(v) for k, v in extra.items()})
    return environment


def run(script: Path, *args, cwd=None, environment=None, check=None):
    result = subprocess.run([sys.executable, script.name, *args], cwd=cwd or script.parent,
                            env=environment, capture_output=True, text=True, timeout=300)
    if check is not None:
        assert result.returncode == check, (result.stdout[-3000:], result.stderr[-3000:])
    return result


# -- the package -----------------------------------------------------------------------------
def test_the_version_is_the_guide_s_and_the_import_is_light():
    code = ("import sys, time; t = time.perf_counter(); import sambaflow; "
            "print(sambaflow.__version__, time.perf_counter() - t, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                         "PYTHONPATH": str(EMULATOR)}, capture_output=True, text=True, check=True)
    version, seconds, torch_loaded = out.stdout.split()
    assert version == "1.11.5"
    assert float(seconds) < 2.0
    assert torch_loaded == "False"


def test_samba_tensors_keep_their_names_and_parameters_convert_in_place():
    from sambaflow import samba

    x = samba.randn(4, 784, name="image", batch_dim=0).bfloat16().float()
    assert isinstance(x, samba.SambaTensor) and x.sn_name == "image" and x.batch_dim == 0
    assert x.dtype == torch.float32
    y = samba.randint(10, (4,), name="label", batch_dim=0)
    assert y.dtype == torch.int64 and y.shape == (4,)
    wrapped = samba.from_torch_tensor(torch.ones(2), name="t", batch_dim=0)
    assert type(samba.to_torch(wrapped)) is torch.Tensor
    model = torch.nn.Linear(3, 2)
    weight = model.weight
    samba.from_torch_model_(model)
    assert model.weight is weight and isinstance(weight, samba.SambaParameter)
    assert isinstance(weight, torch.nn.Parameter) and weight.sn_grad is None
    assert type(model(torch.ones(1, 3))) is torch.Tensor  # plain torch speed and types


def test_progress_bars_count_device_time():
    import tqdm.std
    from sambaflow._runtime import runtime

    assert tqdm.std.time == runtime.clock.now


def test_the_argument_parser_has_the_documented_subcommands_and_framework_arguments(capsys):
    from sambaflow.samba.utils.argparser import parse_app_args

    args = parse_app_args(argv=["compile", "--data-parallel", "-ws", "8", "--pef-name", "x"],
                          prog="logreg.py")
    assert (args.command, args.batch_size, args.output_folder, args.num_tiles, args.n_chips,
            args.world_size, args.data_parallel, args.pef_name) == \
        ("compile", 1, "out", 4, 1, 8, True, "x")
    args = parse_app_args(argv=["run", "-p", "out/x/x.pef", "--reduce-on-rdu", "-b=1"],
                          prog="logreg.py", run_parser_fn=lambda p: p.add_argument("--data-dir"))
    assert (args.pef, args.reduce_on_rdu, args.batch_size, args.data_dir) == \
        ("out/x/x.pef", True, 1, None)
    with pytest.raises(SystemExit) as exit_info:
        parse_app_args(argv=["train"], prog="logreg.py")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: logreg.py [-h] {compile,run,test,measure-performance} ..." in err
    assert "invalid choice: 'train'" in err


def test_assert_close_reports_and_raises_past_the_threshold(capsys):
    import sambaflow.samba.utils as utils
    from sambaflow._errors import SambaAssertionError

    gold = torch.tensor([1.0, -2.0, 4.0])
    assert utils.assert_close(gold + 1e-3, gold, "close", threshold=1e-2) < 1e-2
    with pytest.raises(SambaAssertionError, match="far: the RDU and CPU results differ"):
        utils.assert_close(gold + 1.0, gold, "far", threshold=1e-2)
    out = capsys.readouterr().out
    assert "close: max abs diff" in out and "far:" in out and "MISMATCH" in out


# -- compile ------------------------------------------------------------------------------------
def test_compile_writes_the_pef_and_its_logs_with_the_documented_lines(apps, tmp_path):
    app = apps / "logreg" / "logreg.py"
    result = run(app, "compile", "--pef-name=logreg", "--output-folder=pef",
                 environment=env(tmp_path, AITESTBED_SND_SOCKET=tmp_path / "none.sock"), check=0)
    folder = (app.parent / "pef" / "logreg").resolve()
    lines = result.stdout.splitlines()
    assert lines[0] == f"[Info][SAMBA]# Placing log files in {folder}/logreg.samba.log"
    assert lines[1] == f"[Info][MAC]# Placing log files in {folder}/logreg.mac.log"
    assert "Using patched version of torch.cat and torch.stack" in result.stdout
    assert ('[Warning][SAMBA]# The dtype of "targets" to CrossEntropyLoss is torch.int64, '
            'however only int16 is currently supported, implicit conversion will happen') in lines
    assert (f"[info    ] [PLASMA] Launching plasma compilation! See log file: "
            f"{folder}//logreg.plasma_compile.log") in lines
    assert lines[-2:] == [f"[info    ] PEF file {folder}/logreg.pef created",
                          "[info] Compilation succeeded."]
    for name in ("logreg.pef", "logreg.samba.log", "logreg.mac.log", "logreg.plasma_compile.log"):
        assert (folder / name).stat().st_size > 0
    pef = json.loads((folder / "logreg.pef").read_text())
    assert (pef["name"], pef["batch_size"], pef["tiles"], pef["parameters"], pef["inference"],
            pef["data_parallel"]) == ("logreg", 1, 4, 7850, False, False)
    assert [i["shape"] for i in pef["inputs"]] == [[1, 784], [1]]
    assert pef["sections"] == ["fwd", "bckwd", "opt"] and len(pef["graph_digest"]) == 64
    assert pef["compile_seconds"] > 0 and pef["step_seconds"] > 0


def test_compile_on_an_sn10_prints_its_format_and_counts_whole_rdus(apps, tmp_path):
    app = apps / "lenet" / "lenet.py"
    environment = env(tmp_path, AITESTBED_SND_SOCKET=tmp_path / "none.sock",
                      AITESTBED_SN_PLATFORM="SN10")
    result = run(app, "compile", "-b=1", '--pef-name=lenet', "--output-folder=pef",
                 "--n-chips", "2", "--data-parallel", "-ws", "2", environment=environment, check=0)
    assert result.stdout.startswith(
        "[Info][SAMBA][Default] # Placing log files in pef/lenet/lenet.samba.log\n"
        "[Info][MAC][Default] # Placing log files in pef/lenet/lenet.mac.log\n"
        "[Warning][SAMBA][Default] #\n--------------------------------------------------\n"
        "Using patched version of torch.cat and torch.stack\n")
    pef = json.loads((app.parent / "pef" / "lenet" / "lenet.pef").read_text())
    assert (pef["tiles"], pef["data_parallel"], pef["world_size"], pef["platform"]) == \
        (8, True, 2, "SN10")


# -- run and test --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def logreg_pef(tmp_path_factory):
    """logreg compiled once for the tests that run it (compile needs no RDU)."""
    folder = tmp_path_factory.mktemp("logreg")
    app = Path(shutil.copytree(STARTERS / "logreg", folder / "logreg")) / "logreg.py"
    run(app, "compile", "--pef-name=logreg", "--output-folder=pef", environment=env(folder),
        check=0)
    return app


def test_run_refuses_compile_only_arguments_and_unknown_subcommands(logreg_pef, tmp_path):
    result = run(logreg_pef, "run", "--pef=pef/logreg/logreg.pef", "-ws", "8",
                 environment=env(tmp_path), check=2)
    assert result.stderr.splitlines()[-2:] == [
        "usage: logreg.py [-h] {compile,run,test,measure-performance} ...",
        "logreg.py: error: unrecognized arguments: -ws 8"]
    result = run(logreg_pef, "train", environment=env(tmp_path), check=2)
    assert "invalid choice: 'train'" in result.stderr


def test_run_needs_a_pef_of_this_model_and_batch_size(snd, logreg_pef, apps, tmp_path):
    environment = env(tmp_path)
    missing = run(logreg_pef, "run", "--pef=pef/nothing/nothing.pef", environment=environment,
                  check=1)
    assert "PEF file pef/nothing/nothing.pef does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    garbage = logreg_pef.parent / "garbage.pef"
    garbage.write_bytes(b"\x00\x01 not a pef")
    assert "PEF file garbage.pef is not a PEF: compile one with `python logreg.py compile" in \
        run(logreg_pef, "run", "-p", "garbage.pef", environment=environment, check=1).stderr
    batch = run(logreg_pef, "run", "--pef=pef/logreg/logreg.pef", "-b", "4",
                environment=environment, check=1)
    assert ("the PEF was compiled for batch size 1, but the input has batch size 4: compile "
            "again with -b 4, or run with -b 1") in batch.stderr
    lenet = apps / "lenet" / "lenet.py"
    run(lenet, "compile", "--pef-name=lenet", "--output-folder=pef", environment=environment,
        check=0)
    other = run(logreg_pef, "run", "-p", str(lenet.parent / "pef/lenet/lenet.pef"),
                environment=environment, check=1)
    assert "was compiled from another model" in other.stderr
    assert not snd.rdus.sessions  # no tiles were taken, or they were given back


def test_a_pef_of_random_bytes_is_not_a_pef_rather_than_a_codec_error(logreg_pef, tmp_path):
    """C58: 4 kB of random bytes, not `'utf-8' codec can't decode byte 0x9b`."""
    garbage = logreg_pef.parent / "random.pef"
    garbage.write_bytes(b"\x9b" + os.urandom(4095))
    result = run(logreg_pef, "run", "--pef=random.pef", environment=env(tmp_path), check=1)
    assert result.stderr.splitlines()[-1] == (
        "[Error][SAMBA]# PEF file random.pef is not a PEF: compile one with `python logreg.py "
        "compile --pef-name=<name> --output-folder=<dir>` (it writes <dir>/<name>/<name>.pef)")
    assert "codec" not in result.stderr and "Traceback" not in result.stderr


def test_run_without_snd_finds_no_rdu(logreg_pef, tmp_path):
    result = run(logreg_pef, "run", "--pef=pef/logreg/logreg.pef",
                 environment=env(tmp_path, AITESTBED_SND_SOCKET=tmp_path / "none.sock"), check=1)
    assert "no RDU device found" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow("the guide's full logreg epoch (about 45 s)")
def test_logreg_trains_for_real_and_the_runtime_logs_its_session(snd, logreg_pef, mnist_dir,
                                                                 tmp_path):
    result = run(logreg_pef, "run", "--pef=pef/logreg/logreg.pef",
                 environment=env(tmp_path, AITESTBED_SN_MNIST=mnist_dir), check=0)
    lines = result.stdout.splitlines()
    steps = [line for line in lines if line.startswith("Epoch [1/1], Step [")]
    assert [line.split("]")[1] for line in steps] == \
        [f", Step [{n}0000/60000" for n in range(1, 7)]
    losses = [float(line.rsplit(" ", 1)[1]) for line in steps]
    assert losses == sorted(losses, reverse=True)  # the running loss really falls
    accuracy = next(line for line in lines if line.startswith("Test Accuracy: "))
    assert float(accuracy.split()[2]) >= 88.0, accuracy
    assert any(line.startswith("MNIST: copying train-images-idx3-ubyte") and
               line.endswith("(this system is offline: nothing is downloaded)") for line in lines)
    # The runtime library's lines come last (C stdio, flushed at exit), as in the guide.
    pid = lines[-1].split("][")[2].split("]")[0]
    assert lines[-1] == f"Log ID initialized to: [{USER}][python][{pid}] at {tmp_path / 'sn.log'}"
    assert lines[-2].endswith(
        f" : [INFO][LIB][{pid}]: sn_create_session: PEF File: pef/logreg/logreg.pef")
    log = (tmp_path / "sn.log")
    assert "sn_create_session: PEF File: pef/logreg/logreg.pef" in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o666
    assert not snd.rdus.sessions  # the tiles went back when the process ended


def test_test_compares_the_rdu_with_the_cpu(snd, logreg_pef, tmp_path):
    result = run(logreg_pef, "test", "--pef=pef/logreg/logreg.pef", environment=env(tmp_path),
                 check=0)
    compared = [line for line in result.stdout.splitlines() if "relative error" in line]
    assert [line.split(":")[0] for line in compared] == [
        "forward output #0", "forward output #1", "lin_layer.weight.grad", "lin_layer.bias.grad"]
    errors = [float(line.split("relative error ")[1].split()[0]) for line in compared]
    assert all(0 < e < 1e-2 for e in errors)  # bf16 on the RDU: close, not identical


def test_lenet_prints_every_step_and_its_accuracy(snd, apps, mnist_dir, tmp_path):
    app = apps / "lenet" / "lenet.py"
    environment = env(tmp_path, AITESTBED_SN_MNIST=mnist_dir)
    run(app, "compile", "-b=1", "--pef-name=lenet", "--output-folder=pef",
        environment=environment, check=0)
    result = run(app, "run", "--pef=pef/lenet/lenet.pef", "--max-steps", "1000",
                 "--measure-train-performance", environment=environment, check=0)
    steps = [line for line in result.stdout.splitlines() if line.startswith("Epoch [")]
    assert len(steps) == 1000
    assert steps[0].startswith("Epoch [1/1], Step [1/60000], Loss: ")
    assert steps[-1].startswith("Epoch [1/1], Step [1000/60000], Loss: ")
    assert float(steps[-1].rsplit(" ", 1)[1]) < 2.0 < float(steps[0].rsplit(" ", 1)[1])
    assert "Training time: " in result.stdout
    accuracy = next(line for line in result.stdout.splitlines() if line.startswith("Test Acc"))
    assert 40.0 < float(accuracy.split()[2]) <= 100.0  # 1,000 images in: far past chance
    assert (app.parent / "data" / "mnist_data" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
            ).is_file()


# -- the session in this process: two copies of the model ---------------------------------------
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(8, 16)
        self.out = torch.nn.Linear(16, 4)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.out(torch.tanh(self.hidden(x)))
        return self.loss(out, y), out


@pytest.fixture
def loaded(snd, tmp_path, monkeypatch):
    """Net compiled and loaded in this process (as `run` does), with its optimizer."""
    import sambaflow.samba.utils as utils
    from sambaflow import samba
    from sambaflow._runtime import runtime
    from sambaflow.samba.utils import argparser

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(argparser, "last_args", None)
    monkeypatch.setenv("AITESTBED_SN_PRECISION", "fp32")
    monkeypatch.setenv("SF_RNT_LOG_FILE", str(tmp_path / "sn.log"))
    torch.manual_seed(0)
    model = Net()
    samba.from_torch_model_(model)
    inputs = (samba.randn(4, 8, name="x", batch_dim=0),
              samba.randint(4, (4,), name="y", batch_dim=0))
    optimizer = samba.optim.SGD(model.parameters(), lr=0.5)
    pef = samba.session.compile(model, inputs, optimizer, name="net",
                                config_dict={"output_folder": "out"})
    utils.trace_graph(model, inputs, optimizer, pef=pef)
    yield model, inputs, optimizer
    samba.session.close()
    runtime._deferred.clear()  # the runtime's lines would print when pytest exits


def test_the_rdu_trains_its_own_copy_until_it_is_copied_back(loaded, snd, capsys):
    from sambaflow import samba
    from sambaflow._runtime import runtime

    model, inputs, _ = loaded
    (session_id, session), = snd.rdus.sessions.items()
    assert session.state == "pload" and len(session.tiles) == 4
    assert any("sn_create_session: PEF File: " in line for line in runtime._deferred)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    gold_loss, _ = model(*inputs)  # the CPU's forward, back-propagated after the RDU's step
    clock = runtime.clock.device_seconds
    loss, out = samba.session.run(input_tensors=inputs, output_tensors=model.output_tensors,
                                  hyperparam_dict={"lr": 0.5})
    assert runtime.clock.device_seconds > clock  # the step took device time
    assert snd.rdus.sessions[session_id].state == "exec"
    assert isinstance(loss, samba.SambaTensor) and loss.shape == () and out.shape == (4, 4)
    assert loss.item() == pytest.approx(gold_loss.item(), rel=1e-6)
    gold_loss.backward()
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter.detach(), before[name])  # the CPU copy is untouched
        assert torch.allclose(parameter.sn_grad, parameter.grad, atol=1e-6)  # same gradient
        assert not torch.equal(parameter.sn_data, before[name])  # the RDU copy stepped
    samba.session.to_cpu(model)
    for name, parameter in model.named_parameters():
        expected = before[name] - 0.5 * parameter.grad
        assert torch.allclose(parameter.detach(), expected, atol=1e-6)
    forward_only = samba.session.run(inputs, model.output_tensors, section_types=["fwd"])
    assert forward_only[0].item() < loss.item()  # one step of SGD lowered the loss


def test_hyperparameters_are_set_per_run(loaded):
    from sambaflow import samba

    model, inputs, _ = loaded
    hyperparams = {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0}
    samba.session.run(inputs, model.output_tensors, hyperparam_dict=hyperparams)
    hyperparams["lr"] = 0.0  # the same dict, changed in place between steps
    weights = [p.sn_data.clone() for p in model.parameters()]
    samba.session.run(inputs, model.output_tensors, hyperparam_dict=hyperparams)
    assert all(torch.equal(w, p.sn_data) for w, p in zip(weights, model.parameters(),
                                                          strict=True))


def test_a_run_with_another_batch_size_is_refused(loaded):
    from sambaflow import samba
    from sambaflow._errors import SambaError

    model, _, _ = loaded
    with pytest.raises(SambaError, match="compiled for batch size 4, but the input has batch "
                                         "size 2"):
        samba.session.run([samba.randn(2, 8, batch_dim=0), samba.randint(4, (2,), batch_dim=0)],
                          model.output_tensors)


# -- data parallel --------------------------------------------------------------------------
DP_APP = '''
import sys
import torch
import sambaflow.samba.utils as utils
from sambaflow import samba
from sambaflow.samba.utils.argparser import parse_app_args


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.fc(x)
        return self.loss(out, y), out


args = parse_app_args(argv=sys.argv[1:], run_parser_fn=lambda p: p.add_argument("--out"))
utils.set_seed(7)
model = Net()
samba.from_torch_model_(model)
inputs = (samba.randn(4, 8, name="x", batch_dim=0), samba.randint(4, (4,), name="y", batch_dim=0))
optimizer = samba.optim.SGD(model.parameters(), lr=0.5)
if args.command == "compile":
    samba.session.compile(model, inputs, optimizer, name="dp", config_dict=vars(args))
else:
    utils.trace_graph(model, inputs, optimizer, pef=args.pef)
    generator = torch.Generator().manual_seed(100 + samba.session.rank)
    for _ in range(3):
        x = torch.randn(4, 8, generator=generator)
        y = torch.randint(4, (4,), generator=generator)
        samba.session.run([samba.from_torch_tensor(x, name="x", batch_dim=0),
                           samba.from_torch_tensor(y, name="y", batch_dim=0)],
                          model.output_tensors, data_parallel=args.data_parallel,
                          reduce_on_rdu=args.reduce_on_rdu)
    samba.session.to_cpu(model)
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, args.out)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_data_parallel_ranks_average_their_gradients(snd, tmp_path):
    app = tmp_path / "dp.py"
    app.write_text(DP_APP)
    run(app, "compile", "--data-parallel", "-ws", "2", environment=env(tmp_path), check=0)
    port = free_port()
    ranks = []
    for rank in range(2):
        environment = env(tmp_path, SLURM_PROCID=rank, SLURM_NTASKS=2, SLURM_LOCALID=rank,
                          SLURM_STEP_NODELIST="127.0.0.1", SLURM_STEP_ID=0, MASTER_PORT=port)
        ranks.append(subprocess.Popen(
            [sys.executable, app.name, "run", "--data-parallel", "--reduce-on-rdu",
             "--pef=out/dp/dp.pef", f"--out=rank{rank}.pt"], cwd=tmp_path, env=environment,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 120
    for process in ranks:
        out, err = process.communicate(timeout=max(1, deadline - time.monotonic()))
        assert process.returncode == 0, (out, err)
    weights = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    # The reference: the same start, each step's gradient averaged over both ranks' batches.
    torch.manual_seed(7)
    reference = torch.nn.Linear(8, 4)
    generators = [torch.Generator().manual_seed(100 + rank) for rank in range(2)]
    for _ in range(3):
        grads = []
        for generator in generators:
            x = torch.randn(4, 8, generator=generator)
            y = torch.randint(4, (4,), generator=generator)
            reference.zero_grad()
            torch.nn.functional.cross_entropy(reference(x), y).backward()
            grads.append([p.grad.clone() for p in reference.parameters()])
        with torch.no_grad():
            for p, g0, g1 in zip(reference.parameters(), *grads, strict=True):
                p -= 0.5 * (g0 + g1) / 2
    for key in ("fc.weight", "fc.bias"):
        assert torch.equal(weights[0][key], weights[1][key])
        assert torch.allclose(weights[0][key], dict(reference.named_parameters())[key[3:]],
                              atol=1e-6)


@pytest.mark.parametrize(("argv", "message"), [
    (["compile", "-b=0"], "logreg.py compile: error: argument -b/--batch-size: invalid value 0: "
                          "must be at least 1"),
    (["run", "--batch-size", "-3"], "logreg.py run: error: argument -b/--batch-size: invalid "
                                    "value -3: must be at least 1"),
    (["run", "--num-epochs=-1"], "logreg.py run: error: argument -e/--num-epochs: invalid value "
                                 "-1: must be at least 1"),
])
def test_counts_below_one_are_argparse_errors(argv, message, capsys):
    """C52 (a torch traceback) and C59 (nothing trained, exit 0)."""
    from sambaflow.samba.utils.argparser import parse_app_args

    with pytest.raises(SystemExit) as exit_info:
        parse_app_args(argv=argv, prog="logreg.py", common_parser_fn=lambda p: p.add_argument(
            "-e", "--num-epochs", type=int, default=1))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


@pytest.mark.parametrize(("args", "message"), [
    (["compile", "-b=0"], "lenet.py compile: error: argument -b/--batch-size: invalid value 0: "
                          "must be at least 1"),
    (["run", "--pef=pef/lenet/lenet.pef", "--num-epochs=-1"],
     "lenet.py run: error: argument -e/--num-epochs: invalid value -1: must be at least 1"),
])
def test_the_starters_refuse_counts_below_one(apps, tmp_path, args, message):
    result = run(apps / "lenet" / "lenet.py", *args, environment=env(tmp_path), check=2)
    assert result.stderr.splitlines()[-1] == message
    assert "Traceback" not in result.stderr
