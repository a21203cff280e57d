"""Byte units: decimal (KB = 1000 B) and binary (KiB = 1024 B), case as written."""

from __future__ import annotations

_DECIMAL = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}
_BINARY = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
UNITS = {**_DECIMAL, **_BINARY}


def _factor(unit: str) -> int:
    factor = UNITS.get(str(unit).strip())
    if factor is None:
        raise ValueError(f"Unknown byte unit {unit!r}: expected one of {', '.join(UNITS)}")
    return factor


def convert_byte_unit(value: float, target_unit: str, src_unit: str = "B") -> float:
    """value in src_unit, expressed in target_unit (an int when it is whole)."""
    converted = value * _factor(src_unit) / _factor(target_unit)
    return int(converted) if float(converted).is_integer() else converted


__all__ = ["UNITS", "convert_byte_unit"]
