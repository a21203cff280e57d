"""Walking nested structures (dicts, lists, tuples) of tensors."""

from __future__ import annotations

from collections.abc import Callable, Generator

import torch


def visit_structure(data, select_fn: Callable[[object], bool],
                    strict: bool = False, scope: list | None = None) -> Generator:
    """Yield (scope, item) for every item of data that select_fn accepts.

    scope is the list of keys and indices leading to the item, after the given prefix.
    With strict, an item that is neither selected nor a container is an error.
    """
    scope = list(scope or [])
    if select_fn(data):
        yield scope, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from visit_structure(value, select_fn, strict, [*scope, key])
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            yield from visit_structure(value, select_fn, strict, [*scope, index])
    elif strict:
        raise ValueError(f"Unsupported type {type(data).__name__} at {scope}")


def visit_torch_tensors(data, scope: list | None = None) -> Generator:
    """Yield (scope, tensor) for every torch.Tensor in data."""
    yield from visit_structure(data, lambda item: isinstance(item, torch.Tensor), scope=scope)


def map_torch_tensors(data, fn: Callable[[torch.Tensor], object]):
    """data with every tensor replaced by fn(tensor), containers rebuilt."""
    if isinstance(data, torch.Tensor):
        return fn(data)
    if isinstance(data, dict):
        return type(data)((key, map_torch_tensors(value, fn)) for key, value in data.items())
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(map_torch_tensors(value, fn) for value in data))
    if isinstance(data, list | tuple):
        return type(data)(map_torch_tensors(value, fn) for value in data)
    return data


def recurse_spec(spec, scope: list | None = None) -> Generator:
    """Yield the scope (key path) of every leaf of a nested spec."""
    scope = list(scope or [])
    if isinstance(spec, dict):
        for key, value in spec.items():
            yield from recurse_spec(value, [*scope, key])
    elif isinstance(spec, list | tuple):
        for index, value in enumerate(spec):
            yield from recurse_spec(value, [*scope, index])
    else:
        yield scope


__all__ = ["map_torch_tensors", "recurse_spec", "visit_structure", "visit_torch_tensors"]
