"""TensorFlow 2 on the IPU, the parts that need no TensorFlow on the host: Keras' MNIST
file and its registration, the Keras timing points, the SDK's wheels and the pinned list.
(The facade itself, tensorflow.python.ipu, runs in tests/cluster/test_graphcore_tensorflow.py,
on the nodes' TensorFlow.)"""

from __future__ import annotations

import hashlib
import io
import re
import struct
import zipfile
from pathlib import Path

import pytest
import yaml
from aitestbed.datasets import keras_mnist
from aitestbed.datasets.mnist import DatasetError
from aitestbed.graphcore import timing
from aitestbed.host.wheels import build_wheel

ROOT = Path(__file__).resolve().parents[2]
KERAS_MNIST_PY = '''    path = get_file(
        path,
        origin=origin_folder + "mnist.npz",
        file_hash=(  # noqa: E501
            "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
        ),
    )
'''


def _idx_tree(root: Path, train: int = 6, test: int = 2) -> None:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, count in (("train", train), ("t10k", test)):
        pixels = bytes((i * 7) % 256 for i in range(count * 784))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 0x803, count, 28, 28) + pixels)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 0x801, count) + bytes(i % 10 for i in range(count)))


def _npy(data: bytes) -> tuple[str, bytes]:
    assert data[:8] == b"\x93NUMPY\x01\x00"
    length = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + length].decode()
    assert (10 + length) % 64 == 0 and header.endswith("\n")
    return header, data[10 + length:]


def test_the_npz_holds_the_idx_files_in_keras_layout(tmp_path):
    _idx_tree(tmp_path)
    npz = keras_mnist.build(tmp_path)
    assert npz == tmp_path / "keras" / "mnist.npz"
    with zipfile.ZipFile(npz) as archive:
        assert sorted(archive.namelist()) == ["x_test.npy", "x_train.npy", "y_test.npy",
                                              "y_train.npy"]
        header, body = _npy(archive.read("x_train.npy"))
        assert "'descr': '|u1'" in header and "'shape': (6, 28, 28)" in header
        raw = (tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte").read_bytes()[16:]
        assert body == raw
        header, body = _npy(archive.read("y_test.npy"))
        assert "'shape': (2,)" in header and body == bytes([0, 1])
    # Byte-for-byte reproducible: a rebuild has the same sha256 Keras is told.
    first = hashlib.sha256(npz.read_bytes()).hexdigest()
    assert hashlib.sha256(keras_mnist.build(tmp_path).read_bytes()).hexdigest() == first
    assert "not Google's file" in (tmp_path / "keras" / "SOURCE").read_text()


def test_the_npz_loads_with_numpy_when_numpy_is_there(tmp_path):
    numpy = pytest.importorskip("numpy")
    _idx_tree(tmp_path)
    with numpy.load(io.BytesIO(keras_mnist.build(tmp_path).read_bytes())) as data:
        assert data["x_train"].shape == (6, 28, 28) and data["x_train"].dtype == numpy.uint8
        assert data["y_train"].tolist() == [0, 1, 2, 3, 4, 5]


def test_a_damaged_idx_file_is_refused(tmp_path):
    _idx_tree(tmp_path)
    path = tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(DatasetError, match="1 bytes of data, the header says 2"):
        keras_mnist.build(tmp_path)


def test_register_writes_the_sha256_once(tmp_path):
    _idx_tree(tmp_path)
    npz = keras_mnist.build(tmp_path)
    loader = tmp_path / "mnist.py"
    loader.write_text(KERAS_MNIST_PY)
    assert keras_mnist.register(npz, loader) is True
    digest = hashlib.sha256(npz.read_bytes()).hexdigest()
    assert f'"{digest}"' in loader.read_text() and "731c5ac6" not in loader.read_text()
    assert keras_mnist.register(npz, loader) is False
    loader.write_text("def load_data(): pass\n")
    with pytest.raises(DatasetError, match="cannot find the file_hash"):
        keras_mnist.register(npz, loader)


def test_the_command_line_fails_without_a_traceback(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        keras_mnist.main(["build", str(tmp_path / "nothing")])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith("keras_mnist: ")


def test_keras_timing_is_the_guides_tf2_mnist():
    # 101,770 parameters, batch 32: the guide's "13s 7ms/step", then "0s 222us/step".
    first = timing.keras_compile_seconds(101_770) + timing.keras_step_seconds(101_770, 1, 32, 2000)
    assert 13.0 <= first < 13.5 and first / 2000 >= 6.5e-3
    assert timing.keras_step_seconds(101_770, 1, 32, 2000) == pytest.approx(0.444)
    assert timing.keras_step_seconds(101_770, 2, 32, 100) == pytest.approx(
        timing.keras_step_seconds(101_770, 1, 32, 100) / 2)
    assert timing.keras_step_seconds(101_770, 1, 32, 10, training=False) < \
        timing.keras_step_seconds(101_770, 1, 32, 10)
    assert timing.keras_compile_seconds(101_770, training=False) < 12.6
    # PopTorch's points are untouched by Keras' own.
    assert timing.compile_seconds(225_034) == 20.0


def _defaults() -> dict:
    return yaml.safe_load((ROOT / "roles" / "graphcore_sdk" / "defaults" / "main.yml").read_text())


def test_each_sdk_has_tensorflow_and_keras_wheels_named_as_graphcores():
    for release in _defaults()["graphcore_sdk_releases"]:
        gc = f"gc{release['version']}"
        assert re.fullmatch(rf"tensorflow-2\.13\.1\+{re.escape(gc)}\+\d+\+[0-9a-f]+\+amd_znver1-"
                            r"cp311-cp311-linux_x86_64\.whl", release["tensorflow_wheel"])
        assert re.fullmatch(rf"keras-2\.13\.1\+{re.escape(gc)}\+\d+\+[0-9a-f]+-py2\.py3-none-"
                            r"any\.whl", release["keras_wheel"])


def test_an_sdk_wheel_is_a_pth_that_puts_the_directory_on_the_path(tmp_path):
    defaults = _defaults()
    release = defaults["graphcore_sdk_releases"][0]
    wheel = build_wheel(tmp_path, release["tensorflow_wheel"], {}, summary="tf",
                        overrides={"aitestbed-graphcore-tensorflow.pth":
                                   defaults["graphcore_sdk_tensorflow_dir"] + "\n"})
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "aitestbed-graphcore-tensorflow.pth" in names
        assert archive.read("aitestbed-graphcore-tensorflow.pth").decode() == \
            "/opt/graphcore/tensorflow-2.13.1\n"
        version = release["tensorflow_wheel"].split("-")[1]
        assert f"tensorflow-{version}.dist-info/RECORD" in names


def test_the_pinned_list_has_a_hash_for_every_wheel_and_no_libclang():
    lines = [line for line in (ROOT / "images" / "graphcore-tensorflow-requirements.txt")
             .read_text().splitlines() if line and not line.startswith("#")]
    names = {line.split("==")[0] for line in lines}
    assert {"tensorflow-cpu", "keras", "tensorboard", "protobuf", "h5py"} <= names
    assert "libclang" not in names and "numpy" not in names  # Debian's numpy serves
    assert all(re.fullmatch(r"[a-z0-9-]+==[\w.]+ --hash=sha256:[0-9a-f]{64}", line)
               for line in lines)
    assert "tensorflow-cpu==2.13.1" in {line.split()[0] for line in lines}


def _pinned(tmp_path: Path, **files: bytes) -> tuple[Path, Path]:
    """A cache of wheels and a requirements file pinning each to its content's hash."""
    cache = tmp_path / "cache"
    cache.mkdir()
    lines = []
    for name, content in files.items():
        (cache / name).write_bytes(content)
        project, version = name.split("-")[:2]
        lines.append(f"{project.replace('_', '-')}=={version} "
                     f"--hash=sha256:{hashlib.sha256(content).hexdigest()}")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# pinned\n" + "\n".join(lines) + "\n")
    return cache, requirements


def test_a_cache_matching_every_pin_is_used_without_pip(tmp_path):
    from aitestbed.host import sdk_artifacts

    cache, requirements = _pinned(tmp_path, **{
        "tensorflow_cpu-2.13.1-cp311-cp311-manylinux_2_17_x86_64.whl": b"tf",
        "google_auth_oauthlib-1.0.0-py2.py3-none-any.whl": b"oauth"})
    (cache / "tensorflow_cpu-2.12.0-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"old")
    found = sdk_artifacts.verified_wheels(cache, requirements)
    assert [w.name for w in found] == ["tensorflow_cpu-2.13.1-cp311-cp311-manylinux_2_17_x86_64"
                                       ".whl", "google_auth_oauthlib-1.0.0-py2.py3-none-any.whl"]


def test_a_missing_or_altered_wheel_sends_the_cache_back_to_pip(tmp_path):
    from aitestbed.host import sdk_artifacts

    cache, requirements = _pinned(tmp_path, **{"keras-2.13.1-py3-none-any.whl": b"keras",
                                               "h5py-3.9.0-cp311-cp311-linux.whl": b"h5"})
    (cache / "h5py-3.9.0-cp311-cp311-linux.whl").write_bytes(b"tampered")
    assert sdk_artifacts.verified_wheels(cache, requirements) is None
    (cache / "h5py-3.9.0-cp311-cp311-linux.whl").unlink()
    assert sdk_artifacts.verified_wheels(cache, requirements) is None
