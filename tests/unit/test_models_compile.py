"""/software/graphcore/projects/models_compile: the examples' executables, precompiled.

The image build runs roles/graphcore_sdk/files/precompile-examples.py (offline
compilation, no IPU); a user copies its output to ~/tmp, sets POPTORCH_CACHE_DIR=~/tmp,
and the guide's run loads every executable from there instead of compiling it.
"""

import importlib.util
import sys
from pathlib import Path

import poptorch
import pytest
import torch
from poptorch import _compiler

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "roles" / "graphcore_sdk" / "files"
EXAMPLES = FILES / "examples"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def precompiled(tmp_path_factory):
    """models_compile as the image build makes it (the script, run in this process)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "path", list(sys.path))
        patch.setattr(sys, "argv", list(sys.argv))
        patch.delenv("POPTORCH_CACHE_DIR", raising=False)
        script = load(FILES / "precompile-examples.py", "precompile_examples")
        out = tmp_path_factory.mktemp("models_compile")
        assert script.main([str(EXAMPLES), str(out)]) == 0
        patch.delenv("POPTORCH_CACHE_DIR", raising=False)  # the script set it
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    return script, out, files


def copy_to_tmp(files: dict[str, bytes], home_tmp: Path, monkeypatch) -> list[Path]:
    """`cp models_compile/* ~/tmp; export POPTORCH_CACHE_DIR=~/tmp`, and count the loads."""
    home_tmp.mkdir()
    for name, data in files.items():
        (home_tmp / name).write_bytes(data)
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(home_tmp))
    loaded: list[Path] = []
    real = _compiler.read_cached

    def read_cached(path):
        loaded.append(Path(path))
        return real(path)
    monkeypatch.setattr(_compiler, "read_cached", read_cached)
    return loaded


def test_the_mnist_run_with_the_guides_arguments_loads_both_models(
        precompiled, allocation, tmp_path, monkeypatch):
    _script, _out, files = precompiled
    assert len(files) == 3 and all(name.endswith(".popef") for name in files)
    allocation(1)
    loaded = copy_to_tmp(files, tmp_path / "tmp", monkeypatch)
    example = load(EXAMPLES / "tutorials/simple_applications/pytorch/mnist/mnist_poptorch.py",
                   "mnist_poptorch")

    def small_mnist(_root, train, download, transform):
        """Enough digits for one step of each model: the data are not in the key."""
        count = 400 if train else 80
        return torch.utils.data.TensorDataset(torch.randn(count, 1, 28, 28),
                                              torch.randint(0, 10, (count,)))
    monkeypatch.setattr(example.torchvision.datasets, "MNIST", small_mnist)
    # `python mnist_poptorch.py`, but one epoch (the epochs are not in the key).
    monkeypatch.setattr(sys, "argv", ["mnist_poptorch.py", "--epochs", "1"])
    example.main()
    # The training model and the inference model, both from the copied files.
    assert len({p.name for p in loaded}) == 2 and all(p.name in files for p in loaded)
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == sorted(files)  # none new


def test_the_gpt2_run_with_the_guides_arguments_loads_its_executable(
        precompiled, allocation, tmp_path, monkeypatch):
    script, _out, files = precompiled
    allocation(16)
    loaded = copy_to_tmp(files, tmp_path / "tmp", monkeypatch)
    monkeypatch.setattr(sys, "path", [str(EXAMPLES / "nlp/gpt2/pytorch")] + sys.path)
    example = load(EXAMPLES / "nlp/gpt2/pytorch/train_gpt2.py", "train_gpt2")
    real = _compiler.compile_model

    class Compiled(Exception):
        pass

    def compile_then_stop(*args, **kwargs):
        """The run's compilation, real; its first step (65,536 samples) is not needed."""
        real(*args, **kwargs)
        raise Compiled
    monkeypatch.setattr(_compiler, "compile_model", compile_then_stop)
    with pytest.raises(Compiled):
        example.main(script.GPT2_GUIDE_ARGS)  # the guide's command line
    assert len(loaded) == 1 and loaded[0].name in files
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == sorted(files)


def test_an_offline_compile_needs_no_ipu_and_refuses_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("IPUOF_VIPU_API_PARTITION_ID", raising=False)
    model = poptorch.inferenceModel(torch.nn.Linear(4, 2),
                                    poptorch.Options().useOfflineIpuTarget())
    model.compile(torch.randn(2, 4))
    assert len(list((tmp_path / "cache").glob("*.popef"))) == 1
    assert not model.isAttachedToDevice()
    with pytest.raises(AssertionError, match=r"Trying to run a model on an offline device "
                       r"\(ConnectionType.Never\): use model.compile\(inputs\)"):
        model(torch.randn(2, 4))


def test_the_cache_key_ignores_where_the_cache_is_but_not_the_target(tmp_path):
    model, inputs = torch.nn.Linear(4, 2), (torch.randn(2, 4),)
    here = poptorch.Options().enableExecutableCaching(str(tmp_path / "a"))
    there = poptorch.Options().enableExecutableCaching("/home/someone/tmp").useOfflineIpuTarget()
    key = _compiler.cache_key(model, inputs, here, False, "3.3.0")
    assert _compiler.cache_key(model, inputs, there, False, "3.3.0") == key
    assert _compiler.cache_key(model, inputs, here, False, "3.1.0") != key
    mk1 = poptorch.Options().useOfflineIpuTarget(1)
    assert _compiler.cache_key(model, inputs, mk1, False, "3.3.0") != key
    batched = poptorch.Options().deviceIterations(2)
    assert _compiler.cache_key(model, (torch.randn(4, 4),), batched, False, "3.3.0") != key
