"""`tensorflow.python.ipu`: Graphcore's IPU surface of TensorFlow 2, over CPU TensorFlow.

Installed by the Graphcore hosts' image into the real TensorFlow (`tensorflow-cpu`
2.13.1) that the SDK's tensorflow wheel puts on a venv's path, where Graphcore's own
TensorFlow has it. The models train for real on the CPU; IPUs come from the job's
V-IPU partition as PopTorch's do, and device time from the timing model
(`aitestbed.graphcore.timing`): Keras' progress bars show it.

What is here: `config` (IPUConfig, configure_ipu_system, reset_ipu_configuration),
`ipu_strategy` (IPUStrategy), Keras models compiled and fitted under the strategy
(steps_per_execution), `utils` (reset_ipu_seed, running_on_ipu_model). The rest of
Graphcore's module (pipelining, infeeds, custom ops, PopDist) is not.
"""

from . import (
    _runtime,  # noqa: F401  (the Poplar version line, the device clock)
    config,
    ipu_strategy,
    utils,
)
from ._keras import install as _install_keras_hooks

_install_keras_hooks()

__all__ = ["config", "ipu_strategy", "utils"]
