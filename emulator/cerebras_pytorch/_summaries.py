"""Summaries of a run: name_scope, summarize_scalar, summarize_tensor.

A summary is written, at the current step, to the SummaryWriter of the running
DataExecutor (tag: the enclosing name scopes joined by "/", then the name). Outside
a run, or for a run without a writer, there is nowhere to write it and it is dropped
(as the real release drops summaries of steps it does not log).
"""

from __future__ import annotations

import contextlib

import torch

_scopes: list[str] = []


@contextlib.contextmanager
def name_scope(name: str):
    _scopes.append(str(name))
    try:
        yield
    finally:
        _scopes.pop()


def _tag(name: str) -> str:
    return "/".join([*_scopes, str(name)])


def _writer_and_step():
    from .utils.data import DataExecutor

    executor = DataExecutor.running()
    if executor is None or executor.writer is None:
        return None, None
    writer = executor.writer
    return writer, getattr(writer, "base_step", 0) + executor.user_iteration - 1


def summarize_scalar(name: str, value) -> None:
    if isinstance(value, torch.Tensor) and value.numel() != 1:
        raise ValueError(f"summarize_scalar({name!r}) expects a scalar, got a tensor of shape "
                         f"{tuple(value.shape)}")
    writer, step = _writer_and_step()
    if writer is not None:
        writer.add_scalar(_tag(name), value, step)


def summarize_tensor(name: str, tensor: torch.Tensor) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"summarize_tensor({name!r}) expects a tensor, got "
                        f"{type(tensor).__name__}")
    writer, step = _writer_and_step()
    if writer is not None:
        writer.add_tensor(_tag(name), tensor, step)
