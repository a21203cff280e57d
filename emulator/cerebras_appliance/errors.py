"""What a failed appliance job raises on the client (the vendor's names)."""

from __future__ import annotations


class ApplianceError(Exception):
    """Base of every error an appliance job reports to the client."""


class ApplianceUnknownError(ApplianceError):
    """The job failed for a reason the appliance does not classify (user code, mounts...)."""


class ApplianceCompilationError(ApplianceError):
    """The compile job failed, e.g. the model does not fit the wafer."""


class ApplianceResourceExhausted(ApplianceError):
    """The job ran out of a cluster resource (memory of its pods, systems)."""


class ApplianceNanError(ApplianceError):
    """Training produced a NaN loss."""


class ApplianceClientError(ApplianceError):
    """The client's request is invalid (bad configuration, unimportable functions)."""


BY_NAME: dict[str, type[ApplianceError]] = {
    cls.__name__: cls for cls in (ApplianceUnknownError, ApplianceCompilationError,
                                  ApplianceResourceExhausted, ApplianceNanError,
                                  ApplianceClientError)}


def from_message(message: dict) -> ApplianceError:
    """The exception an {"type": "error", ...} message from a worker stands for.

    Appliance errors keep their class; anything else (the user's ModuleNotFoundError,
    FileNotFoundError...) becomes ApplianceUnknownError naming the original exception.
    """
    name = str(message.get("exception") or "Exception")
    text = str(message.get("message") or "")
    cls = BY_NAME.get(name)
    if cls is not None:
        return cls(text)
    return ApplianceUnknownError(f"{name}: {text}" if text else name)
