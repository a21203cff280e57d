"""The CIFAR-10 stand-in: the real files' format, registered with torchvision, learnable.

(No reachable registry ships CIFAR-10's images; aitestbed.datasets.cifar10 says so.)"""

import collections
import pickle
import shutil

import pytest
import torch
import torchvision
from aitestbed.datasets import cifar10

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    return root, cifar10.build(root, per_batch=200, test_size=300)


def test_torchvision_reads_the_files_once_their_sums_are_registered(
        small, tmp_path, monkeypatch):
    root, sums = small
    # The nodes' cifar.py as register leaves it (here on a copy of the host's).
    cifar_py = tmp_path / "cifar.py"
    shutil.copy(torchvision.datasets.cifar.__file__, cifar_py)
    assert cifar10.register(root, cifar_py) is True
    assert cifar10.register(root, cifar_py) is False  # idempotent
    text = cifar_py.read_text()
    assert all(md5 in text for md5 in sums.values())
    assert "eb9058c3a382ffc7106e4002c42a8d85" in text  # CIFAR-100's sums untouched

    cls = torchvision.datasets.CIFAR10
    monkeypatch.setattr(cls, "train_list", [[f"data_batch_{i}", sums[f"data_batch_{i}"]]
                                            for i in range(1, 6)])
    monkeypatch.setattr(cls, "test_list", [["test_batch", sums["test_batch"]]])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": sums["batches.meta"]})
    monkeypatch.setattr(torchvision.datasets.cifar, "download_and_extract_archive",
                        lambda *a, **k: pytest.fail("torchvision tried to download"))
    train = cls(str(root), train=True, download=True)
    test = cls(str(root), train=False, download=True,
               transform=torchvision.transforms.ToTensor())
    assert (len(train), len(test)) == (1000, 300)
    assert train.classes == list(cifar10.CLASSES)
    assert train.data.shape == (1000, 32, 32, 3) and train.data.dtype.name == "uint8"
    assert set(collections.Counter(test.targets).values()) == {30}
    image, label = test[0]
    assert image.shape == (3, 32, 32) and 0 <= label < 10
    assert "NOT CIFAR-10" in (root / cifar10.BASE_FOLDER / "SOURCE").read_text()


def test_a_small_network_learns_it(small):
    root, _ = small
    batches = [pickle.loads((root / cifar10.BASE_FOLDER / f"data_batch_{i}").read_bytes())
               for i in range(1, 6)]
    x = torch.tensor(sum((b["data"].tolist() for b in batches), []), dtype=torch.float32)
    x = x.view(-1, 3, 32, 32) / 255 - 0.5
    y = torch.tensor(sum((b["labels"] for b in batches), []))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
                                torch.nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(15):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.5, accuracy  # chance is 0.1


def test_a_torchvision_without_the_lists_is_a_clear_error(small, tmp_path):
    root, _ = small
    other = tmp_path / "cifar.py"
    other.write_text("class CIFAR10(object):\n    pass\n\n\nclass CIFAR100(CIFAR10):\n    pass\n")
    with pytest.raises(cifar10.DatasetError, match="cannot find the MD5 of data_batch_1"):
        cifar10.register(root, other)
