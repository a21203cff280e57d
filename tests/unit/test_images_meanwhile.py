"""While the OS layer builds, the host artifacts of the asked systems build beside it
(host/images._Meanwhile): the Go build of kube-apiserver overlaps the OS layer's."""

import threading

import pytest
from aitestbed.host import images
from aitestbed.host.errors import AitestbedError

CLASSES = {"login": ("graphcore", "cerebras"), "cs_mgmt": ("cerebras",)}


@pytest.fixture
def fake(monkeypatch):
    started = threading.Event()
    seen: dict = {}
    monkeypatch.setattr(images, "present_node_os", lambda client: None)
    monkeypatch.setattr(images, "class_inputs", lambda client, node_os: "inputs")
    monkeypatch.setattr(images, "class_tag",
                        lambda client, node_os, c, s, inputs=None: f"t/{c}:{node_os}")
    monkeypatch.setattr(images, "_exists", lambda client, tag: True)

    def artifacts(system_names, node_os=None, node_os_later=None):
        seen["systems"] = list(system_names)
        started.set()
        seen["node_os"] = node_os_later()  # what OpenPBS's build would wait for

    monkeypatch.setattr(images, "build_host_artifacts", artifacts)
    return started, seen


def test_the_artifacts_start_before_the_os_layer_is_done(fake, monkeypatch):
    started, seen = fake

    def build_os(client, nocache=False):
        assert started.wait(10), "the artifacts did not start while the OS layer built"
        return "os1"

    monkeypatch.setattr(images, "_build_node_os", build_os)
    tags = images.ensure_class_images(object(), CLASSES)
    assert tags == {"login": "t/login:os1", "cs_mgmt": "t/cs_mgmt:os1"}
    assert seen == {"systems": ["cerebras", "graphcore"], "node_os": "os1"}


def test_a_failed_os_layer_is_the_error_and_the_artifacts_waiting_for_it_stop(fake,
                                                                            monkeypatch):
    started, seen = fake

    def build_os(client, nocache=False):
        started.wait(10)
        raise AitestbedError("building t/node-os failed: no space left")

    monkeypatch.setattr(images, "_build_node_os", build_os)
    with pytest.raises(AitestbedError, match="no space left"):
        images.ensure_class_images(object(), CLASSES)


def test_an_artifact_that_fails_meanwhile_fails_the_build(fake, monkeypatch):
    monkeypatch.setattr(images, "_build_node_os", lambda client, nocache=False: "os1")

    def artifacts(system_names, node_os=None, node_os_later=None):
        raise AitestbedError("could not build kube-apiserver v1.31.4 (see above)")

    monkeypatch.setattr(images, "build_host_artifacts", artifacts)
    with pytest.raises(AitestbedError, match="kube-apiserver"):
        images.ensure_class_images(object(), CLASSES)


def test_with_the_os_layer_present_nothing_is_built_meanwhile(fake, monkeypatch):
    started, _ = fake
    monkeypatch.setattr(images, "present_node_os", lambda client: "os0")
    monkeypatch.setattr(images, "_build_node_os", lambda *a, **k: pytest.fail("built"))
    assert images.ensure_class_images(object(), CLASSES)["login"] == "t/login:os0"
    assert not started.is_set()


def test_class_images_are_pulled_side_by_side(monkeypatch):
    monkeypatch.setenv("AITESTBED_REGISTRY", "127.0.0.1:5000/t")
    together = threading.Barrier(3, timeout=10)

    def pull(name):
        together.wait()  # breaks (BrokenBarrierError) unless three pulls run at once
        return name != "cs2"

    assert images.pull_side_by_side(pull, ["login", "cs2", "ipu_node"]) == {
        "login": True, "cs2": False, "ipu_node": True}


def test_a_pull_that_fails_is_the_error(monkeypatch):
    monkeypatch.setenv("AITESTBED_REGISTRY", "127.0.0.1:5000/t")

    def pull(name):
        if name == "cs2":
            raise AitestbedError("registry 127.0.0.1:5000/t refused: unauthorized")
        return True

    with pytest.raises(AitestbedError, match="unauthorized"):
        images.pull_side_by_side(pull, ["login", "cs2"])
