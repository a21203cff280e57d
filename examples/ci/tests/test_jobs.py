"""The same jobs through aitestbed's pytest plugin: `pytest tests/` once the cluster is up.

The plugin comes with aitestbed (its venv's pytest has it) and gives the fixture
`testbed`: `testbed.run(script, system=...)` runs a script as `aitestbed run` does, on
the cluster AITESTBED_CLUSTER names, and returns its result (state, exit_code, reason,
output_file, files, wsjobs, ...).
"""

import re
from pathlib import Path


def output(result) -> str:
    return Path(result.output_file).read_text()


def test_mnist_trains_one_epoch_on_one_ipu(testbed):
    result = testbed.run("graphcore/mnist.sbatch", system="graphcore")
    assert result.state == "COMPLETED", result.reason
    accuracy = re.search(r"Accuracy on \d+ test images: ([\d.]+)%", output(result))
    assert accuracy, output(result)
    assert float(accuracy.group(1)) > 80


def test_lenet_compiles_and_trains_on_one_rdu(testbed):
    result = testbed.run("sambanova/lenet.sbatch", system="sambanova")
    assert result.state == "COMPLETED", result.reason
    accuracy = re.search(r"Test Accuracy: ([\d.]+)", output(result))
    assert accuracy, output(result)
    assert float(accuracy.group(1)) > 50


def test_fc_mnist_trains_on_the_cs2(testbed):
    result = testbed.run("cerebras/fc_mnist.sh", system="cerebras")
    assert result.exit_code == 0, result.reason
    assert "Training completed successfully!" in output(result)


def test_a_failing_job_fails_with_its_own_exit_status(testbed):
    result = testbed.run("fails.sbatch", system="graphcore")
    assert result.state == "FAILED"
    assert result.exit_code == 3
    assert "fails on purpose" in output(result)
