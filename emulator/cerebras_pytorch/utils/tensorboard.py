"""cstorch.utils.tensorboard.SummaryWriter: scalars in TensorBoard's event files.

The files are real TensorBoard event files (records of Event protocol buffers,
CRC-32C framed), encoded here: a venv without the tensorboard package writes them too.
Scalars and tensors' summary values are written. Inside an appliance job the file
goes to the client with the job's other files (the worker does not write the
user's directories), at each flush; elsewhere records are appended as they come.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
import weakref

import torch

from ..appliance import session as _session

_counter = itertools.count()
_writers: weakref.WeakSet = weakref.WeakSet()


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _bytes_field(number: int, data: bytes) -> bytes:
    return _field(number, 2, _varint(len(data)) + data)


def event(wall_time: float, step: int = 0, *, file_version: str | None = None,
          scalars: dict[str, float] | None = None) -> bytes:
    """One serialized tensorboard Event."""
    body = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(int(step)))
    if file_version is not None:
        body += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5, struct.pack("<f", v)))
            for tag, v in scalars.items())
        body += _bytes_field(5, values)
    return body


def record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + \
        struct.pack("<I", masked_crc(data))


class SummaryWriter:
    def __init__(self, log_dir: str | os.PathLike | None = None, base_step: int = 0,
                 comment: str = "", filename_suffix: str = ""):
        if log_dir is None:
            log_dir = os.path.join("runs", time.strftime("%b%d_%H-%M-%S") + "_" +
                                   socket.gethostname() + comment)
        self.log_dir = os.path.abspath(log_dir)
        self.base_step = int(base_step)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_counter)}{filename_suffix}")
        self.path = os.path.join(self.log_dir, name)
        self._session = _session.active()
        self._buffer = bytearray()
        self._dirty = False
        self._started = False
        _writers.add(self)

    def _append(self, data: bytes) -> None:
        if not self._started:
            # the file starts with its first summary (a CSX client, whose steps run on
            # the appliance, leaves no empty file beside the appliance's)
            self._started = True
            self._append(record(event(time.time(), file_version="brain.Event:2")))
        if self._session is not None:
            self._buffer += data
            self._dirty = True
            return
        os.makedirs(self.log_dir, exist_ok=True)
        with open(self.path, "ab") as stream:
            stream.write(data)

    def add_scalar(self, tag: str, scalar_value, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        if isinstance(scalar_value, torch.Tensor):
            scalar_value = scalar_value.detach().float().item()
        step = self.base_step if global_step is None else int(global_step)
        self._append(record(event(walltime or time.time(), step,
                                  scalars={str(tag): float(scalar_value)})))

    def add_scalars(self, main_tag: str, values: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        for tag, value in values.items():
            self.add_scalar(f"{main_tag}/{tag}", value, global_step, walltime)

    def add_tensor(self, tag: str, tensor: torch.Tensor, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        """A tensor's summary: its mean, and its norm, as two scalars."""
        values = tensor.detach().float()
        self.add_scalar(f"{tag}/mean", values.mean(), global_step, walltime)
        self.add_scalar(f"{tag}/norm", values.norm(), global_step, walltime)

    def flush(self) -> None:
        if self._session is not None and self._dirty:
            self._session.write_file(self.path, bytes(self._buffer))
            self._dirty = False

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def flush_all() -> None:
    """Flush every writer still open (the appliance job does, when the run ends)."""
    for writer in list(_writers):
        writer.flush()


__all__ = ["SummaryWriter", "flush_all"]
