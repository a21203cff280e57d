"""`cerebras.pytorch` and `cerebras.appliance`: the names release 2.2 onwards gives these packages.

Users of Release 2.10 write `import cerebras.pytorch as cstorch`; the emulated
packages are cerebras_pytorch and cerebras_appliance. An import hook makes every
`cerebras.pytorch.<x>` the very module `cerebras_pytorch.<x>` (never a second copy,
so the appliance session, the backend and isinstance checks stay one).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIASES = {"cerebras.pytorch": "cerebras_pytorch", "cerebras.appliance": "cerebras_appliance"}


class _Existing(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        pass


class AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        for alias, real in ALIASES.items():
            if fullname == alias or fullname.startswith(alias + "."):
                name = real + fullname[len(alias):]
                if importlib.util.find_spec(name) is None:
                    return None
                return importlib.util.spec_from_loader(fullname, _Existing(name))
        return None


def install() -> None:
    if not any(isinstance(finder, AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
