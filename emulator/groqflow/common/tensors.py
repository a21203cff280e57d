"""Inputs as NumPy arrays: what groqit builds from and GroqModel checks and runs with.

Its own module because both need it and groqit returns a GroqModel: groqmodel importing
groqit back for this was a circle.
"""

from __future__ import annotations

import numpy as np


def to_numpy(value) -> np.ndarray:
    """A torch tensor (detached, on the CPU) or anything NumPy takes, as an array."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)
