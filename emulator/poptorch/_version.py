"""The SDK release this poptorch belongs to (the wheel build writes its own copy)."""

__version__ = "3.3.0"
