"""SambaTensor: a torch tensor with the name and batch dimension the compiler needs.

Torch operations on SambaTensors run at plain torch speed and return plain tensors
(torch function dispatch is disabled for the subclass, as for nn.Parameter). A
model's parameters become SambaParameters in place (same objects, so an optimizer
made before or after sees them); each then has an RDU copy once a PEF is loaded
(see the session): `.rdu()` copies the CPU value to the RDU, `.cpu()` the RDU value
back, and `.sn_grad` is the gradient the RDU computed in the last session.run.
"""

from __future__ import annotations

from typing import Any

import torch


class SambaTensor(torch.Tensor):
    """A tensor the RDU graph knows by name; `batch_dim` is its batch dimension."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data: Any = None, name: str | None = None, batch_dim: int | None = None,
                requires_grad: bool = False):
        if data is None:
            data = torch.empty(0)
        if not isinstance(data, torch.Tensor):
            data = torch.as_tensor(data)
        tensor = torch.Tensor._make_subclass(cls, data, requires_grad)
        tensor.sn_name = name
        tensor.batch_dim = batch_dim
        return tensor

    # The attributes live in the instance dict; tensors made by as_subclass have none yet.
    def __getattr__(self, name: str) -> Any:
        if name in ("sn_name", "batch_dim"):
            return None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def name(self) -> str | None:
        return self.sn_name

    def _like(self, tensor: torch.Tensor) -> SambaTensor:
        out = tensor.as_subclass(SambaTensor)
        out.sn_name = self.sn_name
        out.batch_dim = self.batch_dim
        return out

    def bfloat16(self, *args: Any, **kwargs: Any) -> SambaTensor:  # noqa: D102
        return self._like(torch.Tensor.bfloat16(self, *args, **kwargs))

    def float(self, *args: Any, **kwargs: Any) -> SambaTensor:  # noqa: D102
        return self._like(torch.Tensor.float(self, *args, **kwargs))

    def rdu(self) -> SambaTensor:
        """Move to the RDU: tensors are sent with each session.run, so this is itself."""
        return self

    def torch_tensor(self) -> torch.Tensor:
        """The same data as a plain torch tensor (no copy), as samba.to_torch."""
        return self.as_subclass(torch.Tensor)

    def cpu(self, *args: Any, **kwargs: Any) -> SambaTensor:  # noqa: D102
        return self._like(torch.Tensor.cpu(self, *args, **kwargs))


class SambaParameter(torch.nn.Parameter, SambaTensor):
    """A model parameter: a CPU copy (this tensor) and, once a PEF is loaded, an RDU copy.

    Made from data as nn.Parameter is, or as SambaFlow's lazy parameters are: from a
    `shape` and `dtype` with a `materializer(this_tensor)` that returns its value (on
    this host the value is made at once; without a materializer it is zeros).
    """

    def __new__(cls, data: Any = None, requires_grad: bool = True, *, shape: Any = None,
                dtype: torch.dtype | None = None, materializer: Any = None,
                name: str | None = None, batch_dim: int | None = None):
        if data is None and (shape is not None or materializer is not None):
            size = tuple(int(s) for s in shape) if shape is not None else None
            placeholder = SambaTensor(torch.zeros(size or (0,), dtype=dtype or torch.float32),
                                      name=name)
            data = placeholder if materializer is None else materializer(placeholder)
            if not isinstance(data, torch.Tensor):
                raise TypeError("SambaParameter: the materializer must return a tensor, not "
                                f"{type(data).__name__}")
            if size is not None and tuple(data.shape) != size:
                raise ValueError(f"SambaParameter: the materializer made shape "
                                 f"{list(data.shape)}, not the declared {list(size)}")
            if dtype is not None:
                data = data.to(dtype)
        if data is None:
            data = torch.empty(0)
        if isinstance(data, torch.Tensor):
            data = data.detach().as_subclass(torch.Tensor)
        parameter = torch.Tensor._make_subclass(cls, data, requires_grad)
        parameter.sn_name = name
        parameter.batch_dim = batch_dim
        return parameter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @property
    def sn_grad(self) -> torch.Tensor | None:
        """The gradient the RDU computed for this parameter in the last session.run."""
        rdu = self.__dict__.get("_sn_rdu")
        return None if rdu is None else rdu.grad

    @property
    def sn_data(self) -> torch.Tensor:
        """The RDU copy's value (the CPU one until a PEF is loaded)."""
        rdu = self.__dict__.get("_sn_rdu")
        return self.detach() if rdu is None else rdu.detach()

    def rdu(self) -> SambaParameter:
        """Copy the CPU value to the RDU ("Moves the CPU model to the RDU")."""
        rdu = self.__dict__.get("_sn_rdu")
        if rdu is not None:
            with torch.no_grad():
                rdu.copy_(self)
        return self

    def cpu(self, *args: Any, **kwargs: Any) -> SambaParameter:
        """Copy the RDU value to the CPU ("Moves the RDU model to the CPU")."""
        rdu = self.__dict__.get("_sn_rdu")
        if rdu is not None:
            with torch.no_grad():
                self.data.copy_(rdu.data)
        return self

    def __repr__(self) -> str:
        return "Parameter containing:\n" + torch.Tensor.__repr__(self.detach())


def from_torch_tensor(tensor: torch.Tensor, name: str | None = None,
                      batch_dim: int | None = None) -> SambaTensor:
    """The same data as a SambaTensor (no copy)."""
    if not isinstance(tensor, torch.Tensor):
        tensor = torch.as_tensor(tensor)
    out = tensor.as_subclass(SambaTensor)
    out.sn_name = name
    out.batch_dim = batch_dim
    return out


def to_torch(value: Any) -> Any:
    """A SambaTensor (or a list/tuple of them) as plain torch tensors (no copy)."""
    if isinstance(value, torch.Tensor):
        return value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value
    if isinstance(value, tuple | list):
        return type(value)(to_torch(v) for v in value)
    return value


def _of_size(make: Any, size: tuple, name: str | None, batch_dim: int | None,
             requires_grad: bool, dtype: torch.dtype | None) -> SambaTensor:
    """A SambaTensor of torch's `make(*size)`; the size as torch takes it (sizes, or one
    tuple, list or torch.Size)."""
    if len(size) == 1 and isinstance(size[0], tuple | list | torch.Size):
        size = tuple(size[0])
    return SambaTensor(make(*size, dtype=dtype), name=name, batch_dim=batch_dim,
                       requires_grad=requires_grad)


def randn(*size: Any, name: str | None = None, batch_dim: int | None = None,
          requires_grad: bool = False, dtype: torch.dtype | None = None) -> SambaTensor:
    return _of_size(torch.randn, size, name, batch_dim, requires_grad, dtype)


def randint(*args: Any, name: str | None = None, batch_dim: int | None = None,
            dtype: torch.dtype = torch.int64) -> SambaTensor:
    """randint(high, size) or randint(low, high, size), as torch.randint."""
    return SambaTensor(torch.randint(*args, dtype=dtype), name=name, batch_dim=batch_dim)


def zeros(*size: Any, name: str | None = None, batch_dim: int | None = None,
          requires_grad: bool = False, dtype: torch.dtype | None = None) -> SambaTensor:
    return _of_size(torch.zeros, size, name, batch_dim, requires_grad, dtype)


def from_torch_model_(model: torch.nn.Module) -> torch.nn.Module:
    """Make the model's parameters SambaParameters, in place (the same objects)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("from_torch_model_ takes a torch.nn.Module")
    for name, parameter in model.named_parameters():
        if type(parameter) is torch.nn.Parameter:
            parameter.__class__ = SambaParameter
        parameter.sn_name = name
        parameter.batch_dim = None
    return model


from_torch_ = from_torch_model_


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1,
          alpha: float = 1, is_transposed: bool = False) -> torch.Tensor:
    """beta * input + alpha * (mat1 @ mat2), as torch.addmm, for mat1 of any rank.

    `is_transposed=True` says mat2 is stored transposed (out_features x in_features,
    as nn.Linear's weight), so the product is mat1 @ mat2.T. `input` (the bias) may
    be None.
    """
    if is_transposed and beta == 1 and alpha == 1:
        return torch.nn.functional.linear(mat1, mat2, input)
    weight = mat2.transpose(-1, -2) if is_transposed else mat2
    product = torch.matmul(mat1, weight)
    if alpha != 1:
        product = product * alpha
    if input is None:
        return product
    return product + (input * beta if beta != 1 else input)
