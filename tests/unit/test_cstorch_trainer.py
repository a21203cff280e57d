"""A training script shaped like the 2.1.1 modelzoo's cstorch loop, on CPU and on CSX.

On CSX the loop is the client's: its DataExecutor submits the script (compile, then
execute job, here through LocalJobRunner) and the worker runs it. The last test runs
the upstream modelzoo's fc_mnist from the vendor mirror when this machine has it.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from cerebras_pytorch.utils import tensorboard

pytestmark = pytest.mark.unit

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
MIRROR = Path("/work/.mirror/Cerebras+modelzoo/repo")

SCRIPT = (Path(__file__).resolve().parents[1] / "cluster" / "files" / "cstorch_loop.py"
          ).read_text()  # the cluster test runs it too
LINE = re.compile(r"^\| Train Device=(\w+), Step=(\d+), Loss=(\d+\.\d+)$", re.M)


def run_script(tmp_path, device):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEREBRAS_")}
    env.update(PYTHONPATH=str(EMULATOR), OMP_NUM_THREADS="1",
               CEREBRAS_APPLIANCE_RUNNER="cerebras_pytorch.appliance.local:LocalJobRunner")
    model_dir = tmp_path / f"md_{device}"
    return model_dir, subprocess.run(
        [sys.executable, str(script), device, str(model_dir), str(tmp_path)], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=180)


def events(path: Path) -> list[bytes]:
    """The records of a tensorboard event file, checking their framing."""
    data, records = path.read_bytes(), []
    while data:
        header = data[:8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[8:12])[0] == tensorboard.masked_crc(header)
        body = data[12:12 + length]
        assert struct.unpack("<I", data[12 + length:16 + length])[0] == \
            tensorboard.masked_crc(body)
        records.append(body)
        data = data[16 + length:]
    return records


def test_cpu_and_csx_runs_train_the_same(tmp_path):
    cpu_dir, cpu = run_script(tmp_path, "CPU")
    assert cpu.returncode == 0, cpu.stdout + cpu.stderr
    cpu_lines = LINE.findall(cpu.stdout)
    assert [step for _, step, _ in cpu_lines] == ["1", "30"]
    assert float(cpu_lines[-1][2]) < float(cpu_lines[0][2]) / 4
    assert sorted(p.name for p in cpu_dir.glob("checkpoint_*")) == [
        "checkpoint_20.mdl", "checkpoint_30.mdl"]
    assert "Processed 240 sample(s)" in cpu.stdout
    (event_file,) = (cpu_dir / "train").glob("events.out.tfevents.*")
    assert len(events(event_file)) == 31  # the file version, then 30 losses

    csx_dir, csx = run_script(tmp_path, "CSX")
    out = csx.stdout
    assert csx.returncode == 0, out + csx.stderr
    order = ["set-up done", "Compiling the model.", "Compile was successful!",
             "Beginning appliance run", "| Train Device=CSX, Step=1,",
             "Saved checkpoint at step 20", "| Train Device=CSX, Step=30,",
             "Saved checkpoint at step 30", "Processed 240 sample(s)"]
    positions = [out.find(text) for text in order]
    assert -1 not in positions and positions == sorted(positions), \
        list(zip(order, positions, strict=True))
    assert out.count("set-up done") == 1  # the worker's re-run of the set-up is not relayed
    assert LINE.findall(out)[-1][2] == cpu_lines[-1][2]  # the same numerics
    assert (csx_dir / "checkpoint_30.mdl").is_file()
    state = torch.load(csx_dir / "checkpoint_30.mdl")
    assert state["global_step"] == 30
    (event_file,) = (csx_dir / "train").glob("events.out.tfevents.*")
    assert len(events(event_file)) == 31


def test_a_csx_executor_needs_the_cluster_config(tmp_path):
    script = tmp_path / "bare.py"
    script.write_text("import torch, cerebras_pytorch as cstorch\n"
                      "cstorch.backend('CSX')\n"
                      "loader = cstorch.utils.data.DataLoader(lambda: [torch.zeros(1)])\n"
                      "for batch in cstorch.utils.data.DataExecutor(loader, num_steps=1):\n"
                      "    pass\n")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, env={**os.environ,
                                                        "PYTHONPATH": str(EMULATOR)})
    assert result.returncode == 1
    assert "ApplianceClientError: A CSX program cannot run on the client" in result.stderr


@pytest.mark.skipif(not (MIRROR / "HEAD").is_file(),
                    reason=f"no vendor mirror of Cerebras/modelzoo at {MIRROR}")
def test_upstream_fc_mnist_runs_on_cpu(tmp_path, mnist_dir):
    """modelzoo/fc_mnist/pytorch/run.py at Release_2.1.1, unmodified; only the params'
    data_dir points at our MNIST."""
    tree = tmp_path / "modelzoo"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "Release_2.1.1",
                              "modelzoo/__init__.py", "modelzoo/common", "modelzoo/fc_mnist"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    fc_mnist = tree / "modelzoo" / "fc_mnist" / "pytorch"
    params = yaml.safe_load((fc_mnist / "configs" / "params.yaml").read_text())
    params["train_input"]["data_dir"] = params["eval_input"]["data_dir"] = str(mnist_dir)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "PYTHONPATH": str(EMULATOR), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(fc_mnist / "run.py"), "CPU", "--mode", "train", "--params",
         str(tmp_path / "params.yaml"), "--max_steps", "50", "--model_dir",
         str(tmp_path / "md")], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| Train Device=CPU, Step=50, Loss=" in result.stdout
    assert "Training completed successfully!" in result.stdout
    assert (tmp_path / "md" / "checkpoint_50.mdl").is_file()
    shutil.rmtree(tree)


def test_the_workers_rerun_of_the_set_up_writes_nothing_of_the_users(tmp_path, monkeypatch):
    """On the cluster the worker runs as the appliance's user and may not write the
    user's model_dir: the set-up it re-runs (params_train.yaml, run.log, new directories)
    writes into its own directory until staging; from staging on, nothing is redirected."""
    import logging as _logging
    from types import SimpleNamespace

    from cerebras_pytorch.appliance.script import SetupWrites

    own, user = tmp_path / "work", tmp_path / "home" / "model_dir"
    own.mkdir()
    user.mkdir(parents=True)
    (user / "latest").symlink_to(user)  # what the client's set-up left
    session = SimpleNamespace(muted=True)
    monkeypatch.chdir(user.parent)
    with SetupWrites(session, str(own)):
        with open("model_dir/params_train.yaml", "w") as f:
            f.write("train_input: {}\n")
        os.makedirs("model_dir/cerebras_logs/2026", exist_ok=True)
        handler = _logging.FileHandler("model_dir/run.log")
        handler.close()
        os.unlink("model_dir/latest")
        os.symlink("cerebras_logs/2026", "model_dir/latest")
        with open(own / "request.json", "w") as f:  # its own files stay where they are
            f.write("{}")
        assert (user / "params_train.yaml").exists() is False
        session.muted = False  # staging
        with open("model_dir/after_staging.txt", "w") as f:
            f.write("x")
    scratch = own / "client-setup" / str(user).lstrip("/")
    assert sorted(p.name for p in user.iterdir()) == ["after_staging.txt", "latest"]
    assert os.readlink(user / "latest") == str(user)
    assert os.readlink(scratch / "latest") == "cerebras_logs/2026"
    assert (scratch / "params_train.yaml").read_text() == "train_input: {}\n"
    assert (scratch / "cerebras_logs" / "2026").is_dir()
    assert (scratch / "run.log").exists() and (own / "request.json").exists()
    import builtins
    assert not isinstance(getattr(builtins.open, "__self__", None), SetupWrites)
    assert not isinstance(getattr(os.mkdir, "__self__", None), SetupWrites)
