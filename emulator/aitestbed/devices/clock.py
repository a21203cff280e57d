"""Device time, and how wall time follows it.

Everything the facades print (progress bars, rates, durations) is device time:
what the emulated hardware would have taken. Wall time follows it by
AITESTBED_TIME_SCALE: 1 waits the documented wall time, 0.5 half of it, and 0
(the default) runs as fast as the real computation on the CPU allows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

ENV = "AITESTBED_TIME_SCALE"


class TimeScaleError(ValueError):
    pass


def time_scale(env: Mapping[str, str] | None = None) -> float:
    raw = (os.environ if env is None else env).get(ENV, "0").strip() or "0"
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if not scale >= 0 or scale == float("inf"):
        raise TimeScaleError(f"{ENV}={raw!r} is not a time scale: use 1 for documented wall "
                             "time, 0 (the default) for as fast as possible, or a fraction")
    return scale


class VirtualClock:
    """Counts device seconds; with a scale above 0, sleeps so wall time keeps up."""

    def __init__(self, scale: float | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.scale = time_scale() if scale is None else scale
        self._monotonic, self._sleep = monotonic, sleep
        self._wall_start = monotonic()
        self._epoch = time.time()
        self.device_seconds = 0.0

    def advance(self, seconds: float) -> None:
        """The device spent `seconds`; wait until wall time is scale x device time."""
        if seconds < 0:
            raise ValueError("device time only moves forward")
        self.device_seconds += seconds
        if self.scale > 0:
            lag = self.device_seconds * self.scale - (self._monotonic() - self._wall_start)
            if lag > 0:
                self._sleep(lag)

    def now(self) -> float:
        """A time.time() that moves only with the device: what bars and rates are shown in."""
        return self._epoch + self.device_seconds

    def wall_seconds(self) -> float:
        return self._monotonic() - self._wall_start
