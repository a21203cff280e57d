"""The Kubernetes test cluster's image cache (scripts/kube-test-cluster): each worker's
containerd store is the shared volume unless another test cluster holds it, and the
choice is made under a lock so two clusters made at once do not both take it."""

from __future__ import annotations

import fcntl
import importlib.util
import sys
from pathlib import Path

import pytest
from docker.errors import NotFound

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/kube-test-cluster/kube_test_cluster.py"


@pytest.fixture(scope="module")
def ktc():
    spec = importlib.util.spec_from_file_location("kube_test_cluster_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


class Holder:
    def __init__(self, name):
        self.name = name


class FakeDocker:
    """Volumes by name; `holders` maps a volume to the containers that mount it."""

    def __init__(self, volumes=(), holders=None):
        self.volumes = self
        self.containers = self
        self.existing = {v: {} for v in volumes}
        self.holders = holders or {}
        self.created: dict[str, dict] = {}

    def list(self, all=False, filters=None):   # containers.list  # noqa: A002
        assert all, "a stopped cluster still holds its stores"
        return [Holder(n) for n in self.holders.get(filters["volume"], ())]

    def get(self, name):                         # volumes.get
        if name not in self.existing:
            raise NotFound(name)
        return name

    def create(self, name, labels=None):         # volumes.create
        self.existing[name] = self.created[name] = labels or {}
        return Holder(name)


def cluster(ktc, client, name="ktc-test"):
    made = object.__new__(ktc.TestCluster)
    made.name, made.client = name, client
    return made


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))


def test_a_free_cache_is_taken_and_made_once(ktc, monkeypatch):
    monkeypatch.setattr(ktc, "IMAGE_CACHE", "aitestbed-kube-test-images")
    client = FakeDocker(volumes=["aitestbed-kube-test-images-1"])
    stores = cluster(ktc, client).image_stores({ktc.LABEL: "ktc-test"})
    stores.release()
    assert dict(stores) == {1: "aitestbed-kube-test-images-1", 2: "aitestbed-kube-test-images-2"}
    # only the missing one is made, as a cache (no cluster label: `down` keeps it)
    assert client.created == {"aitestbed-kube-test-images-2":
                              {"aitestbed.cache": "kube-test-images"}}


def test_a_held_cache_gives_the_worker_a_store_of_the_clusters_own(ktc, monkeypatch, capsys):
    monkeypatch.setattr(ktc, "IMAGE_CACHE", "aitestbed-kube-test-images")
    client = FakeDocker(volumes=["aitestbed-kube-test-images-1", "aitestbed-kube-test-images-2"],
                        holders={"aitestbed-kube-test-images-1": ["other-worker-1"]})
    labels = {ktc.LABEL: "ktc-test"}
    stores = cluster(ktc, client).image_stores(labels)
    stores.release()
    assert dict(stores) == {1: "ktc-test-worker-1-images", 2: "aitestbed-kube-test-images-2"}
    assert client.created == {"ktc-test-worker-1-images": labels}   # removed by its `down`
    assert ("aitestbed-kube-test-images-1 is held by other-worker-1: worker-1 starts with an "
            "empty image store") in capsys.readouterr().err


def test_no_cache_when_it_is_turned_off(ktc, monkeypatch):
    monkeypatch.setattr(ktc, "IMAGE_CACHE", "")
    client = FakeDocker()
    stores = cluster(ktc, client).image_stores({ktc.LABEL: "ktc-test"})
    stores.release()
    assert dict(stores) == {1: "ktc-test-worker-1-images", 2: "ktc-test-worker-2-images"}


def test_the_choice_is_made_under_a_lock_until_released(ktc, tmp_path):
    lock = tmp_path / "kube-test-cluster" / ".image-cache.lock"
    stores = ktc.ImageStores(lock)
    with open(lock) as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        stores.release()
        stores.release()       # twice is harmless (the create's finally releases again)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
