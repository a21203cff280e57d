"""cstorch.sparse: weight sparsity. Not available in the emulated cluster.

A params file with a `sparsity` section gets an error that says so, rather than
a dense run that looks sparse.
"""

from __future__ import annotations

MESSAGE = ("Weight sparsity (the params' `sparsity` section) is not available in the "
           "emulated Wafer-Scale Cluster: remove the section to train densely.")


def configure_sparsity_optimizer(sparsity_type, named_parameters, **kwargs):
    raise NotImplementedError(MESSAGE)


def configure_sparsity_wrapper(*args, **kwargs):
    raise NotImplementedError(MESSAGE)


class SparsityWrapperOptimizer:
    def __init__(self, optimizer, sparsity_optimizer):
        raise NotImplementedError(MESSAGE)


__all__ = ["SparsityWrapperOptimizer", "configure_sparsity_optimizer",
           "configure_sparsity_wrapper"]
