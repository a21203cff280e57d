"""Fashion-MNIST for the Graphcore tutorials: real images, the real sizes, offline.

torchvision's FashionMNIST(root, download=True) finds the pre-placed files and
downloads nothing (the cluster cannot)."""

import collections

import pytest
import torchvision
from aitestbed.datasets import fashion_mnist, mnist
from aitestbed.host.inventory import project_root
from filelock import FileLock

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    downloads = project_root() / "build" / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(downloads / ".unit-tests.lock"):  # xdist's workers: one fetches
            tarball = fashion_mnist.fetch(downloads)
    except (OSError, mnist.DatasetError) as err:
        pytest.fail(f"cannot fetch {fashion_mnist.SOURCE_URL}: {err}", pytrace=False)
    root = tmp_path_factory.mktemp("fashion")
    fashion_mnist.build(tarball, root)
    return root


def test_torchvision_finds_the_real_sizes_without_downloading(root, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("torchvision tried to download")

    monkeypatch.setattr(torchvision.datasets.mnist, "download_and_extract_archive", no_network)
    train = torchvision.datasets.FashionMNIST(str(root), train=True, download=True)
    test = torchvision.datasets.FashionMNIST(str(root), train=False, download=True)
    assert (len(train), len(test)) == (60_000, 10_000)
    assert set(collections.Counter(test.targets.tolist()).values()) == {1_000}
    assert set(collections.Counter(train.targets.tolist()).values()) == {6_000}
    # Real Fashion-MNIST's mean grey level is 0.2860 (72.9 of 255): real clothes, not noise.
    assert abs(train.data.float().mean().item() - 72.94) < 0.5
    # Held-out images, not copies of training ones (the source repeats a few dozen
    # images, as Fashion-MNIST itself has a few duplicates: 15 of 10,000 match).
    seen = {bytes(image.numpy()) for image in train.data}
    assert sum(bytes(image.numpy()) in seen for image in test.data) < 50
    assert "`fashion-mnist` 1.1.0" in (root / "FashionMNIST" / "SOURCE").read_text()


def test_a_tampered_source_is_refused(tmp_path):
    bad = tmp_path / fashion_mnist.SOURCE_FILE
    bad.write_bytes(b"not the package")
    with pytest.raises(mnist.DatasetError, match="pinned sha512"):
        fashion_mnist.build(bad, tmp_path / "out")
