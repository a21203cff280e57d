"""images.covering: a subset's node runs from a local image of its class made from the same
inputs for these systems and more; on Docker and on Podman, which names a loaded or built
image localhost/<name> (tried with rootless Podman 4.3, docs/install.md)."""

from __future__ import annotations

from types import SimpleNamespace

from aitestbed.host import images


class Engine:
    def __init__(self, *found):
        self.images = SimpleNamespace(list=lambda name, filters: [
            SimpleNamespace(tags=tags, labels={images.LABEL_SYSTEMS: systems})
            for tags, systems in found])


def test_the_image_with_fewest_systems_that_covers_the_subset():
    engine = Engine((["aitestbed/login:aaa"], "cerebras,graphcore,sambanova"),
                    (["aitestbed/login:bbb"], "cerebras,graphcore"),
                    (["aitestbed/login:ccc"], "cerebras"))
    assert images.covering(engine, "login", "inputs", ["graphcore"]) == "aitestbed/login:bbb"
    assert images.covering(engine, "login", "inputs", ["groq"]) is None


def test_podmans_localhost_names_are_the_same_images():
    engine = Engine((["localhost/aitestbed/login:bfa6d887580c"], "cerebras,graphcore"))
    assert images.covering(engine, "login", "inputs", ["graphcore"]) == \
        "aitestbed/login:bfa6d887580c"
