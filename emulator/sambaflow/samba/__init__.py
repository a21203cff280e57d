"""from sambaflow import samba: tensors, the session, the optimizers.

    samba.randn / randint / zeros            SambaTensors (named, with a batch dimension)
    samba.from_torch_tensor, samba.to_torch  wrap and unwrap torch tensors (no copy)
    samba.from_torch_model_ (from_torch_)    make a model's parameters SambaParameters
    samba.session.compile / run / to_cpu     the PEF's life (see samba._session: _compile, _run)
    samba.optim.SGD / Adam / AdamW
    samba.addmm                              addmm for any rank, with a transposed weight
    samba.directives.op_fusion, samba.nn.parameter.SambaParameter
"""

from .. import _runtime as _runtime_module
from . import directives, nn, optim
from ._session import SambaSession, session
from ._tensor import (
    SambaParameter,
    SambaTensor,
    addmm,
    from_torch_,
    from_torch_model_,
    from_torch_tensor,
    randint,
    randn,
    to_torch,
    zeros,
)

# Before any thread of ours runs torch (a data loader's), as poptorch does.
_runtime_module.runtime.tune_cpu()

__all__ = ["SambaParameter", "SambaSession", "SambaTensor", "addmm", "directives",
           "from_torch_", "from_torch_model_", "from_torch_tensor", "nn", "optim", "randint",
           "randn", "session", "to_torch", "zeros"]
