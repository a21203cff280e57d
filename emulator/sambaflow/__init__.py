"""SambaFlow, the SambaNova SDK, as the emulated AI Testbed provides it.

`from sambaflow import samba` gives the model-facing API (tensors, the session that
compiles and runs PEFs, the optimizers); `sambaflow.samba.utils` the helpers the
example apps use (argument parsing, trace_graph, assert_close). The RDUs are
emulated: the numerics run on the host CPU with PyTorch, device time comes from
aitestbed.sambanova.timing, and tiles are asked of the node's snd daemon.

Importing this package is cheap; torch is imported with `sambaflow.samba`.
"""

from ._version import __version__

__all__ = ["__version__"]
