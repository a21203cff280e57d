"""samba.session: compile a model into a PEF, load a PEF, run it on the (emulated) RDUs.

The session is the PEF's life in two halves, each in its own module:
  samba._compile  Compiler: compile (model in, PEF and logs out; no RDU involved)
  samba._run      Runner: load (utils.trace_graph), run, the RDU's copy of the weights
                  (to_cpu, to_rdu), the data-parallel layout and the device clock
`samba.session` is the one SambaSession every app shares.
"""

from __future__ import annotations

from ._compile import Compiler
from ._run import Runner


class SambaSession(Compiler, Runner):
    """compile, load, run, to_cpu, to_rdu, close (and ours: world_size, rank, device_time)."""


session = SambaSession()
