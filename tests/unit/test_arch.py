"""The architecture the node images are built for (host/arch): the host's or
AITESTBED_ARCH, and the wheel platforms pip downloads for it."""

from __future__ import annotations

import pytest
from aitestbed.host import arch
from aitestbed.host.errors import AitestbedError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("wanted", "machine"), [("amd64", "x86_64"), ("x86_64", "x86_64"),
                                                 ("arm64", "aarch64"), ("AARCH64", "aarch64")])
def test_docker_and_debian_names_become_the_wheels_machine(monkeypatch, wanted, machine):
    monkeypatch.setenv("AITESTBED_ARCH", wanted)
    assert arch.machine() == machine
    assert arch.wheel_platforms() == [f"manylinux2014_{machine}", f"manylinux_2_17_{machine}",
                                      "any"]
    assert arch.pip_platform_args()[:2] == ["--platform", f"manylinux2014_{machine}"]


def test_without_a_choice_it_is_the_hosts(monkeypatch):
    monkeypatch.delenv("AITESTBED_ARCH", raising=False)
    monkeypatch.setattr(arch.platform, "machine", lambda: "aarch64")
    assert arch.machine() == "aarch64"


def test_an_architecture_it_cannot_build_for_is_one_line(monkeypatch):
    monkeypatch.setenv("AITESTBED_ARCH", "riscv64")
    with pytest.raises(AitestbedError, match=r"architecture 'riscv64' \(AITESTBED_ARCH\): "
                                             "choose amd64 or arm64"):
        arch.machine()
