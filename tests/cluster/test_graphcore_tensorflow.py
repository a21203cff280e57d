"""TensorFlow 2 on the IPU (seed 002's "TensorFlow 2 Environment Setup" and "MNIST -
TensorFlow2"), replayed as a user on gc-poplar-02, then our own Keras code in the shape
of Graphcore's documented API: errors, more IPUs, evaluate and predict.

Wheel names differ from the guide's (2.13.1 and cp311 for 2.6.3/2.6.0 and cp38); the
commands are the guide's.
"""

from __future__ import annotations

import re
import textwrap

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

LOGIN, POPLAR = "gc-login-01", "gc-poplar-02"
SDK_ROOT = "/software/graphcore/poplar_sdk/3.1.0"
TF_WHEEL = "tensorflow-2.13.1+gc3.1.0+246224+2b7af067dae+amd_znver1-cp311-cp311-linux_x86_64.whl"
KERAS_WHEEL = "keras-2.13.1+gc3.1.0+246230+88e2debf-py2.py3-none-any.whl"
VENV = "~/venvs/graphcore/tensorflow2_31_env"
MNIST_DIR = "~/graphcore/examples/tutorials/simple_applications/tensorflow2/mnist/"
ACTIVATE = f"source {VENV}/bin/activate"


def on_poplar(cluster, script: str, timeout: float = 600) -> tuple[int, str]:
    return cluster.hop(LOGIN, POPLAR, script, timeout=timeout)


def plain(text: str) -> str:
    """Keras' bar redraws (carriage returns) reduced to their last state."""
    return "\n".join(line.split("\r")[-1] for line in text.splitlines())


def write(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'PYEOF'\n{textwrap.dedent(text)}\nPYEOF"


@pytest.fixture(scope="module")
def tf_venv(cluster):
    """The guide's block: virtualenv, the SDK's TensorFlow and Keras wheels, the check."""
    rc, out = on_poplar(cluster, "\n".join([
        "set -e",
        f"rm -rf {VENV} ~/graphcore  # a cluster reused with AITESTBED_TEST_CLUSTER",
        "mkdir -p ~/venvs/graphcore",
        f"virtualenv {VENV}",
        ACTIVATE,
        f"POPLAR_SDK_ROOT={SDK_ROOT}",
        "export POPLAR_SDK_ROOT=$POPLAR_SDK_ROOT",
        f"pip install $POPLAR_SDK_ROOT/{TF_WHEEL}",
        f"pip install $POPLAR_SDK_ROOT/{KERAS_WHEEL}",
        'python -c "from tensorflow.python import ipu"',
        "mkdir -p ~/graphcore && cd ~/graphcore",
        "git clone -q https://github.com/graphcore/examples.git && cd examples",
        "git checkout -q v3.3.0",
    ]), timeout=900)
    assert rc == 0, out
    return out


def test_the_guides_setup_installs_and_imports_the_ipu_module(tf_venv):
    # The guide's "You should see:" line, with the SDK enabled at login (3.1.0).
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: I tensorflow/compiler/plugin/"
                     r"poplar/driver/poplar_platform\.cc:43\] Poplar version: 3\.1\.0 "
                     r"\(e12d5f9f01\) Poplar package: 9c103dc348", tf_venv), tf_venv
    assert "Successfully installed tensorflow-2.13.1+gc3.1.0" in tf_venv
    assert "Successfully installed keras-2.13.1+gc3.1.0" in tf_venv


def test_without_srun_there_is_no_ipu(cluster, tf_venv):
    rc, out = on_poplar(cluster, f"{ACTIVATE}\ncd {MNIST_DIR}\npython mnist.py")
    assert rc != 0
    assert out.rstrip().endswith(
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Target configuration "
        "failed: model disabled and no hardware IPU found. (Are you sure you enabled the "
        "Poplar driver ?)"), out


@pytest.mark.slow("the guide's 4 MNIST epochs and their calibrated times (13 s, then 222 us/step)")
def test_mnist_trains_for_real_under_srun_in_the_documented_time(cluster, tf_venv):
    rc, out = on_poplar(cluster, f"{ACTIVATE}\ncd {MNIST_DIR}\n"
                                 "/opt/slurm/bin/srun --ipus=1 python mnist.py", timeout=900)
    assert rc == 0, out
    text = plain(out)
    assert re.search(r"I tensorflow/compiler/plugin/poplar/driver/poplar_executor\.cc:1619\] "
                     r"TensorFlow device /device:IPU:0 attached to 1 IPU with Poplar device "
                     r"ID: \d+", text), text
    assert "Downloading data" not in text
    epochs = re.findall(r"2000/2000 \[=+\] - (\d+)s (\d+)(ms|us)/step - loss: ([\d.]+)", text)
    assert len(epochs) == 4, text
    # The guide: "13s 7ms/step" (compilation included), then "0s 222us/step".
    assert epochs[0][:3] == ("13", "7", "ms"), text
    assert all(e[:3] == ("0", "222", "us") for e in epochs[1:]), text
    losses = [float(e[3]) for e in epochs]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.4, losses


IPUS_AND_MEMORY = """
    import sys

    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.python import ipu

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = int(sys.argv[1])
    if sys.argv[2:] == ["typo"]:
        config.auto_select_ipu = 1
    config.configure_ipu_system()
    print("configured", flush=True)
    with ipu.ipu_strategy.IPUStrategy().scope():
        inputs = keras.Input(shape=(1000,))
        # 120 M weights: with their gradients 960 MB, more than an IPU's 900 MB.
        outputs = keras.layers.Dense(120_000)(inputs)
        model = keras.Model(inputs, outputs)
        model.compile(loss="mse", optimizer="sgd", steps_per_execution=1)
        data = tf.data.Dataset.from_tensors((tf.zeros((1, 1000)), tf.zeros((1, 120_000))))
        model.fit(data.repeat(), steps_per_epoch=1, epochs=1, verbose=0)
"""


def test_too_many_ipus_too_big_a_model_and_an_unknown_option(cluster, tf_venv):
    rc, out = on_poplar(cluster, "\n".join([
        write("~/tf2/big.py", IPUS_AND_MEMORY), ACTIVATE, "cd ~/tf2",
        # Each run's last line (the error), then its exit status.
        *(f"/opt/slurm/bin/srun --ipus={ipus} python big.py {args} >run.log 2>&1; rc=$?; "
          "grep -v '^srun: error' run.log | tail -n 1; grep -c '^configured' run.log; echo rc=$rc"
          for ipus, args in ((2, "4"), (2, "3"), (1, "1 typo"), (1, "1"))),
    ]), timeout=900)
    assert rc == 0, out
    runs = re.findall(r"^(.*)\n(\d+)\nrc=(\d+)$", out, re.MULTILINE)
    assert [(configured, status) for _, configured, status in runs] == [
        ("0", "1"), ("0", "1"), ("0", "1"), ("1", "1")], out  # only the last one configured
    four, three, typo, big = (last for last, _, _ in runs)
    assert four == ("tensorflow.python.framework.errors_impl.FailedPreconditionError: Could not "
                    "find any IPU devices with 4 IPUs for /device:IPU:0"), out
    assert three.endswith("Could not find any IPU devices with 3 IPUs for /device:IPU:0"), out
    assert typo.startswith("AttributeError: 'IPUConfig' has no attribute 'auto_select_ipu'")
    # Weights and their gradients, 2 x 480 MB, before the first step runs.
    assert re.fullmatch(r"tensorflow\.python\.framework\.errors_impl\.ResourceExhaustedError: "
                        r"Out of memory: Cannot fit all variable data onto one or more tiles\. "
                        r"IPU 0 needs 96\d,\d{3},\d{3} bytes .*", big), out



KERAS_ON_TWO_IPUS = """
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.python import ipu

    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    x_train, x_test = x_train[..., None] / 255.0, x_test[..., None] / 255.0

    def batches(x, y, repeat):
        data = tf.data.Dataset.from_tensor_slices((x.astype("float32"), y.astype("int32")))
        data = data.batch(50, drop_remainder=True)
        return data.repeat() if repeat else data

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.floating_point_behaviour.inv = True
    config.configure_ipu_system()
    ipu.utils.reset_ipu_seed(7)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential([
            keras.layers.Conv2D(8, 3, activation="relu", input_shape=(28, 28, 1)),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(0.002),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      steps_per_execution=20)
        model.fit(batches(x_train, y_train, True), steps_per_epoch=600, epochs=2, verbose=2)
        loss, accuracy = model.evaluate(batches(x_test, y_test, False), verbose=0)
        print(f"test accuracy {accuracy:.4f}")
        predicted = model.predict(batches(x_test[:1000], y_test[:1000], False), verbose=0)
        print("predicted", predicted.shape, np.mean(predicted.argmax(1) == y_test[:1000]) > 0.9)
"""


def test_our_keras_code_on_two_ipus_fits_evaluates_and_predicts(cluster, tf_venv):
    rc, out = on_poplar(cluster, "\n".join([
        write("~/tf2/two_ipus.py", KERAS_ON_TWO_IPUS), ACTIVATE, "cd ~/tf2",
        "/opt/slurm/bin/srun --ipus=2 python two_ipus.py",
    ]), timeout=900)
    assert rc == 0, out
    assert "TensorFlow device /device:IPU:0 attached to 2 IPUs with Poplar device ID: 2" in out
    assert len(re.findall(r"600/600 - \d+s - loss: [\d.]+ - accuracy: [\d.]+", out)) == 2, out
    assert float(re.search(r"test accuracy ([\d.]+)", out).group(1)) >= 0.9, out
    assert "predicted (1000, 10) True" in out
