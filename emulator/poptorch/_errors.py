"""The exceptions PopTorch raises; tracebacks name them poptorch.poptorch_core.*."""

from __future__ import annotations


class Error(RuntimeError):
    """An error from the compiler or the runtime (PopTorch's C++ side)."""

    def __init__(self, message: str, location: str = "", error_type: str = "poptorch_cpp_error"):
        self.message = message
        self.location = location
        self.type = error_type
        text = f"In {location}: '{error_type}': {message}" if location else message
        super().__init__(text)


class RecoverableError(Error):
    pass


class UnrecoverableError(Error):
    pass


for _cls in (Error, RecoverableError, UnrecoverableError):
    _cls.__module__ = "poptorch.poptorch_core"
