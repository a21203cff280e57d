"""The appliance errors, as cerebras_pytorch has always named them.

They live in cerebras_appliance.errors (the client library both wheels share); this
module is the same classes under cerebras_pytorch's older path.
"""

from __future__ import annotations

from cerebras_appliance.errors import (
    BY_NAME,
    ApplianceClientError,
    ApplianceCompilationError,
    ApplianceError,
    ApplianceNanError,
    ApplianceResourceExhausted,
    ApplianceUnknownError,
    from_message,
)

__all__ = [
    "BY_NAME", "ApplianceClientError", "ApplianceCompilationError", "ApplianceError",
    "ApplianceNanError", "ApplianceResourceExhausted", "ApplianceUnknownError", "from_message",
]
