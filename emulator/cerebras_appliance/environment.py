"""appliance_environ: environment variables for the appliance's workers.

A mapping over this process's environment: what a program sets in it is also set
in os.environ here, and is remembered so that the appliance jobs of the run get it
in their workers' environment (cerebras_pytorch puts `appliance_environ.exported()`
into each job's request).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping


class ApplianceEnviron(MutableMapping):
    def __init__(self) -> None:
        self._exported: dict[str, str] = {}

    def __getitem__(self, key: str) -> str:
        if key in self._exported:
            return self._exported[key]
        return os.environ[key]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"appliance_environ takes str keys and values, got "
                            f"{type(key).__name__}: {type(value).__name__}")
        self._exported[key] = value
        os.environ[key] = value

    def __delitem__(self, key: str) -> None:
        found = self._exported.pop(key, None) is not None
        if key in os.environ:
            del os.environ[key]
        elif not found:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*os.environ, *self._exported]))

    def __len__(self) -> int:
        return len(set(os.environ) | set(self._exported))

    def exported(self) -> dict[str, str]:
        """The variables set through this mapping: what the appliance's workers get."""
        return dict(self._exported)


appliance_environ = ApplianceEnviron()

__all__ = ["ApplianceEnviron", "appliance_environ"]
